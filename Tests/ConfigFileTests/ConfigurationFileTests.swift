import ConfigFile
import Foundation
import Testing

@Suite("Configuration files")
struct ConfigurationFileTests {
    static let keys: [String: ConfigurationFile.Kind] = [
        "host": .string, "db-port": .integer, "database-only": .boolean, "tls": .onOff, "trusted-proxy": .list, "admin": .string,
    ]

    func read(_ text: String) throws -> [String: String] {
        try ConfigurationFile(text: text, path: "lt.yaml", keys: Self.keys).values
    }

    func failure(_ text: String) -> String {
        do {
            _ = try read(text)
            return "no failure"
        } catch {
            return String(describing: error)
        }
    }

    @Test("Each kind as the flag takes it: text, integers, true/false, on/off (YAML's yes/no too), lists joined with commas")
    func kinds() throws {
        let values = try read("""
            host: 0.0.0.0
            db-port: 5984
            database-only: true
            tls: yes
            trusted-proxy: [10.0.0.0/8, 192.168.1.1]
            admin: "ops:secret"
            """)
        #expect(values == ["host": "0.0.0.0", "db-port": "5984", "database-only": "true", "tls": "on", "trusted-proxy": "10.0.0.0/8,192.168.1.1", "admin": "ops:secret"])
        #expect(try read("tls: off\ntrusted-proxy: 10.0.0.0/8,172.16.0.0/12")["tls"] == "off")
        #expect(try read("trusted-proxy: 10.0.0.0/8,172.16.0.0/12")["trusted-proxy"] == "10.0.0.0/8,172.16.0.0/12")
        #expect(try read("").isEmpty)
        #expect(try read("# only a comment\n").isEmpty)
    }

    @Test("Every mistake names the file, the line and the key: unknown keys (with a suggestion), wrong kinds, not a mapping, not YAML")
    func mistakes() {
        #expect(failure("db-prot: 5984") == #"lt.yaml, line 1: unknown setting "db-prot" (did you mean db-port?); the settings are admin, database-only, db-port, host, tls, trusted-proxy"#)
        #expect(failure("host: a\ndb-port: many") == #"lt.yaml, line 2: db-port must be an integer, not "many""#)
        #expect(failure("database-only: maybe") == #"lt.yaml, line 1: database-only must be true or false, not "maybe""#)
        #expect(failure("tls: sometimes") == #"lt.yaml, line 1: tls must be on or off, not "sometimes""#)
        #expect(failure("host: [a, b]") == "lt.yaml, line 1: host must be a string, not a list")
        #expect(failure("trusted-proxy: [[a]]") == "lt.yaml, line 1: trusted-proxy must be a list of strings, not a list")
        #expect(failure("host:") == "lt.yaml, line 1: host must be a string, not \"\"")
        #expect(failure("- host\n- port").hasPrefix("lt.yaml, line 1: the configuration must be a mapping"))
        #expect(failure("host: [unclosed").hasPrefix("lt.yaml is not valid YAML: "))
    }

    @Test("A file that is not there, or not readable, is a clear failure; one others can read is reported as such")
    func files() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lt-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = directory.appendingPathComponent("none.yaml").path
        #expect(throws: ConfigurationFile.Failure.self) { try ConfigurationFile(path: missing, keys: Self.keys) }
        let file = directory.appendingPathComponent("lt.yaml")
        try Data("db-port: 6000\n".utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        let private_ = try ConfigurationFile(path: file.path, keys: Self.keys)
        #expect(private_.values == ["db-port": "6000"] && !private_.readableByOthers)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        #expect(try ConfigurationFile(path: file.path, keys: Self.keys).readableByOthers)
        try Data([0xFF, 0xFE, 0x00]).write(to: file)
        #expect(throws: ConfigurationFile.Failure.self) { try ConfigurationFile(path: file.path, keys: Self.keys) }
    }
}
