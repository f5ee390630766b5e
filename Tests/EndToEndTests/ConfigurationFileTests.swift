import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

/// `lt serve --config FILE`: every option as a YAML key, flag > `LT_*` variable > file >
/// default, `--print-config` with secrets masked, and a bad file refused before anything starts.
@Suite("Configuration file")
struct ConfigurationFileTests {
    static func write(_ text: String, in directory: TemporaryDirectory, name: String = "lt.yaml") throws -> String {
        let path = directory.url.appendingPathComponent(name).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        _ = chmod(path, 0o600)
        return path
    }

    /// The `key: value  # source` lines of `--print-config`, by key.
    static func printed(_ output: String) -> [String: (value: String, source: String)] {
        var lines: [String: (String, String)] = [:]
        for line in output.split(separator: "\n") where !line.hasPrefix("#") {
            guard let colon = line.firstIndex(of: ":"), let hash = line.range(of: "  # ") else { continue }
            let value = line[line.index(after: colon)..<hash.lowerBound].trimmingCharacters(in: .whitespaces)
            lines[String(line[..<colon])] = (value, String(line[hash.upperBound...]))
        }
        return lines
    }

    @Test("Precedence: a flag over its LT_* variable over the file over the default; --print-config masks secrets and starts nothing")
    func precedence() throws {
        let directory = try TemporaryDirectory("lt-config")
        defer { directory.cleanup() }
        let data = directory.url.appendingPathComponent("data").path
        let path = try Self.write("""
            # every key is an option's flag name
            data: \(data)
            db-port: 7001
            port: 7002
            host: 0.0.0.0
            max-feeds-per-user: 7
            admin: "ops:file-secret-9931"
            couchdb: http://root:url-secret-4417@couch.example:5984
            trusted-proxy: [10.0.0.0/8, 192.0.2.1]
            access-log: off
            """, in: directory)
        let run = try TestServer.runLT(["serve", "--config", path, "--db-port", "7101", "--print-config"],
                                       environment: ["LT_PORT": "7202", "LT_DB_PORT": "7201", "LT_HOST": ""])
        #expect(run.status == 0, "\(run.errors)")
        let lines = Self.printed(run.output)
        #expect(lines["db-port"]! == ("7101", "flag"))
        #expect(lines["port"]! == ("7202", "environment"))
        #expect(lines["host"]! == ("\"0.0.0.0\"", "file"))  // an empty variable counts as unset
        #expect(lines["max-feeds-per-user"]! == ("7", "file"))
        #expect(lines["trusted-proxy"]! == ("[\"10.0.0.0/8\", \"192.0.2.1\"]", "file"))
        #expect(lines["access-log"]! == ("off", "file"))
        #expect(lines["durability"]! == ("\"full\"", "default") && lines["body-timeout"]! == ("30", "default"))
        #expect(lines["admin"]! == ("\"ops:********\"", "file"))
        #expect(lines["couchdb"]!.value.contains("root:********@couch.example"))
        #expect(!run.output.contains("file-secret-9931") && !run.output.contains("url-secret-4417") && !run.errors.contains("secret-"))
        // Printing started nothing and created nothing.
        #expect(!FileManager.default.fileExists(atPath: data))
        // The same file with LT_CONFIG instead of --config.
        let viaVariable = try TestServer.runLT(["serve", "--print-config"], environment: ["LT_CONFIG": path])
        #expect(Self.printed(viaVariable.output)["db-port"]! == ("7001", "file"))
    }

    @Test("A server started from a file runs with its settings")
    func serverUsesFile() async throws {
        let directory = try TemporaryDirectory("lt-config")
        defer { directory.cleanup() }
        let path = try Self.write("max-body-size: 2000\nmax-document-size: 1500\njavascript: off\n", in: directory)
        let s = try TestServer(extraArguments: ["--config", path])
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/c").status == 201)
        let big = try await s.request(.PUT, "/c/big", json: ["padding": .string(String(repeating: "x", count: 3000))])
        #expect(big.status == 413, "\(big.text)")
        let document = try await s.request(.PUT, "/c/doc", json: ["padding": .string(String(repeating: "x", count: 1600))])
        #expect(document.status == 413 && document.json["error"] == "document_too_large", "\(document.text)")
        #expect(try await s.request(.PUT, "/c/small", json: ["padding": "x"]).status == 201)
        let view = try await s.request(.PUT, "/c/_design/d", json: ["views": ["v": ["map": "function(doc) { emit(doc._id, 1); }"]]])
        #expect(view.status == 201)
        #expect(try await s.request(.GET, "/c/_design/d/_view/v").status == 501)  // JavaScript off, as the file says
    }

    @Test("Unknown keys, wrong types, bad YAML and a missing file are refused naming the file, line and key; nothing is created")
    func badFiles() throws {
        let directory = try TemporaryDirectory("lt-config")
        defer { directory.cleanup() }
        let data = directory.url.appendingPathComponent("data").path
        let cases: [(String, [String])] = [
            ("data: \(data)\ndb-prot: 5984\n", ["line 2", "unknown setting \"db-prot\"", "did you mean db-port?"]),
            ("data: \(data)\nport: eighty\n", ["line 2", "port must be an integer, not \"eighty\""]),
            ("data: \(data)\naccess-log: sometimes\n", ["line 2", "access-log must be on or off"]),
            ("data: \(data)\ndatabase-only: 3\n", ["line 2", "database-only must be true or false"]),
            ("data: \(data)\nhost: [a, b]\n", ["line 2", "host must be a string, not a list"]),
            ("data: \(data)\nport: [1\n", ["is not valid YAML"]),
            ("- data\n- port\n", ["must be a mapping of settings"]),
            ("data: \(data)\nport: 1\nport: 2\n", ["duplicated key(s): 'port'"]),
            ("data: \(data)\nport: 70000\n", ["ports are from 0"]),
        ]
        for (index, (text, expected)) in cases.enumerated() {
            let path = try Self.write(text, in: directory, name: "bad-\(index).yaml")
            let run = try TestServer.runLT(["serve", "--config", path])
            #expect(run.status != 0, "\(text)")
            for part in expected { #expect(run.errors.contains(part), "\(text): \(run.errors)") }
            if !text.hasPrefix("- ") && !text.contains("[1") { #expect(run.errors.contains(path) || expected == ["ports are from 0"], "\(run.errors)") }
        }
        let missing = try TestServer.runLT(["serve", "--config", directory.url.appendingPathComponent("none.yaml").path])
        #expect(missing.status != 0 && missing.errors.contains("none.yaml: there is no such file"), "\(missing.errors)")
        #expect(!FileManager.default.fileExists(atPath: data))
        // A file with a password that others may read is used, with a warning.
        let open = try Self.write("admin: \"ops:pw-1\"\n", in: directory, name: "open.yaml")
        _ = chmod(open, 0o644)
        let warned = try TestServer.runLT(["serve", "--config", open, "--print-config"])
        #expect(warned.status == 0 && warned.errors.contains("chmod 600"), "\(warned.errors)")
    }

    @Test("README's table of options is the code's: every option, its variable (which works) and its default")
    func readmeTableMatchesCode() throws {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        // | `--db-port` | `LT_DB_PORT` | `5984` | what |
        var rows: [String: (variable: String, defaultCell: String)] = [:]
        for line in readme.split(separator: "\n") where line.hasPrefix("| `--") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3 else { continue }
            rows[String(cells[0].dropFirst(3).dropLast())] = (String(cells[1].dropFirst().dropLast()), cells[2])
        }
        // Defaults as the code has them: every setting, printed with nothing set.
        let clean = ProcessInfo.processInfo.environment.filter { $0.key.hasPrefix("LT_") }.mapValues { _ in "" }
        let defaults = try TestServer.runLT(["serve", "--print-config"], environment: clean)
        #expect(defaults.status == 0, "\(defaults.errors)")
        var printed: [String: String] = [:]
        for line in defaults.output.split(separator: "\n") {
            if line.hasPrefix("# "), line.hasSuffix(": (not set)") { printed[String(line.dropFirst(2).dropLast(": (not set)".count))] = ""; continue }
            guard !line.hasPrefix("#"), let colon = line.firstIndex(of: ":"), let hash = line.range(of: "  # ") else { continue }
            printed[String(line[..<colon])] = line[line.index(after: colon)..<hash.lowerBound].trimmingCharacters(in: .whitespaces)
                .trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        #expect(Set(rows.keys) == Set(printed.keys), "README lacks \(Set(printed.keys).subtracting(rows.keys).sorted()), has extra \(Set(rows.keys).subtracting(printed.keys).sorted())")
        for (key, value) in printed where !value.isEmpty {
            guard let cell = rows[key]?.defaultCell else { continue }
            if let range = cell.range(of: "at most `") {
                let most = Int(cell[range.upperBound...].prefix { $0.isNumber }) ?? 0
                #expect((Int(value) ?? .max) <= most, "\(key): \(value) > \(most)")
            } else {
                #expect(cell == "`\(value)`", "\(key): README says \(cell), the code \(value)")
            }
        }
        // Each variable is the one the code reads: set to a valid value, the setting says it came from there.
        var values: [String: String] = [:]
        for (key, value) in printed { values[key] = value }
        values["admin"] = "ops:pw-table"
        values["couchdb"] = "http://root:pw@127.0.0.1:1"
        values["device-couchdb"] = "https://couchdb.example.org"
        values["trusted-proxy"] = "10.0.0.0/8"
        values["cors-origins"] = "http://app.example"
        values["ca-file"] = "/nonexistent-ca.pem"  // read only when the server starts
        values["tiles"] = "none"
        values["tile-attribution"] = "none"
        var environment = clean
        for (key, row) in rows where !["tls-cert", "tls-key"].contains(key) { environment[row.variable] = values[key] ?? "" }
        let fromVariables = try TestServer.runLT(["serve", "--print-config"], environment: environment)
        #expect(fromVariables.status == 0, "\(fromVariables.errors)")
        for (key, _) in rows where !["tls-cert", "tls-key"].contains(key) {
            #expect(fromVariables.output.contains("\n\(key): ") && fromVariables.output.split(separator: "\n").contains { $0.hasPrefix("\(key): ") && $0.hasSuffix("# environment") },
                    "\(key) from \(rows[key]!.variable)")
        }
        let help = try TestServer.runLT(["serve", "--help"]).output
        #expect(help.contains("LT_TLS_CERT") && help.contains("LT_TLS_KEY") && rows["tls-cert"]?.variable == "LT_TLS_CERT" && rows["tls-key"]?.variable == "LT_TLS_KEY")
    }
}
