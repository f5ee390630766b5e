import CommandSupport
import CouchJSON
import Foundation
import LTServer
import LTTestSupport
import Testing
@testable import lt
import NIOHTTP1

@Suite("lt doctor: this build, a data directory and its server, with advice for each finding")
struct DoctorTests {
    /// The doctor's JSON answer and exit status.
    func doctor(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, json: JSON, text: String) {
        let json = try TestServer.runLT(["doctor", "--json"] + arguments, environment: environment)
        let text = try TestServer.runLT(["doctor"] + arguments, environment: environment)
        #expect(json.status == text.status, "\(json.errors) \(text.errors)")
        return (json.status, (try? JSON.parse(Array(json.output.utf8))) ?? .null, text.output)
    }

    func finding(_ answer: JSON, _ check: String) -> [JSON] {
        (answer["findings"]?.arrayValue ?? []).filter { $0["check"]?.stringValue == check }
    }

    @Test("A running server, through its control socket and over HTTP: every check answers; a failing replication is a problem with its reason and advice (exit 1) until it is gone; a stopped server's directory is still checked")
    func runningServer() async throws {
        let scratch = try TemporaryDirectory("lt-doctor-server")
        defer { scratch.cleanup() }
        let s = try TestServer(dataDirectory: scratch.url.appendingPathComponent("data"))  // kept after it stops
        defer { s.stop() }
        let directory = s.dataDirectory.path
        let url = "http://\(TestServer.admin.0):\(TestServer.admin.1)@127.0.0.1:\(s.port)"
        for arguments in [["--data", directory], ["--url", url]] {
            let (status, answer, text) = try doctor(arguments)
            #expect(status == 0, "\(text)")
            let checks = Set((answer["findings"]?.arrayValue ?? []).compactMap { $0["check"]?.stringValue })
            #expect(checks.isSuperset(of: ["this lt", "disk", "server", "JavaScript", "allocator", "open files", "consolidation", "replication"]), "\(checks)")
            #expect(text.contains("  ok       server         lt 0.1.0 (CouchDB 3.4.3 API), db-per-user, up "), "\(text)")
            #expect(text.contains("  ok       consolidation  nothing waiting, nothing refused\n"), "\(text)")
            #expect(text.contains("  ok       replication    no replication jobs\n"), "\(text)")
            #expect(finding(answer, "open files").first?["message"]?.stringValue?.contains("(2 for each of ") == true)
            // The data directory is this machine's: looked at through the socket, not for a URL alone.
            #expect(finding(answer, "data").isEmpty == (arguments[0] == "--url"))
        }

        // Another user (nobody, when these tests run as root): the socket is not theirs, nor the directory.
        if getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", TestServer.binary.path, "doctor", "--data", directory]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 1, "\(text)")
            #expect(text.contains("  warning  server         \(s.dataDirectory.standardizedFileURL.path)/control.sock belongs to another user, so the server on it was not asked\n"
                                  + "                          → run lt doctor as the user the server runs as (sudo -u lt lt doctor --data …), or give --url with an admin's credentials\n"),
                    "\(text)")
            #expect(text.contains("is not writable by this user"), "\(text)")
        } else {
            print("DoctorTests: another user's view skipped (needs root and setpriv)")
        }

        // A continuous replication from nowhere: crashing, named with its ends, its reason and what to do.
        let created = try await s.request(.PUT, "/_replicator/nightly", json: ["source": "http://127.0.0.1:1/gone", "target": "tracks",
                                                                                "create_target": true, "continuous": true])
        #expect(created.status == 201)
        var problem: JSON?
        for _ in 0..<100 where problem == nil {
            problem = finding(try doctor(["--data", directory]).json, "replication").first { $0["level"] == "problem" }
            if problem == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let message = problem?["message"]?.stringValue ?? ""
        #expect(message.hasPrefix("_replicator/nightly (http://127.0.0.1:1/gone/ → local:tracks) is crashing: ") && message.contains("refused"), "\(message)")
        #expect(problem?["advice"] == "the peer cannot be reached from this machine: is it running, and its host and port right? (curl its URL from here); it is retried with growing waits")
        for arguments in [["--data", directory], ["--url", url]] {
            let (status, answer, text) = try doctor(arguments)
            #expect(status == 1 && answer["problems"] == 1, "\(text)")
            #expect(text.hasSuffix("1 problem: see the advice (→) above\n") && text.contains("\n                          → the peer cannot be reached"), "\(text)")
        }
        let rev = try await s.request(.GET, "/_replicator/nightly").json["_rev"]?.stringValue ?? ""
        #expect(try await s.request(.DELETE, "/_replicator/nightly?rev=\(rev)").status == 200)
        let cleared = try await eventually { try doctor(["--data", directory]).status == 0 }
        #expect(cleared, "the replication gone, nothing to fix")

        // Wrong credentials: a problem that says so, not a crash of the command.
        let refused = try doctor(["--url", "http://\(TestServer.admin.0):wrong@127.0.0.1:\(s.port)"])
        #expect(refused.status == 1 && finding(refused.json, "server").first?["level"] == "problem", "\(refused.text)")
        #expect(refused.text.contains("→ is it running and reachable from here, and are the URL's credentials a server admin's?"), "\(refused.text)")

        // Stopped: the directory, and the open-file limit lt serve would start with here.
        s.stop()
        let (status, answer, text) = try doctor(["--data", directory])
        #expect(status == 0, "\(text)")
        #expect(finding(answer, "server").first?["message"] == .string("no server is running on \(s.dataDirectory.standardizedFileURL.path)"))
        let data = finding(answer, "data").first?["message"]?.stringValue ?? ""
        #expect(data.range(of: #"^\d+ databases, .* in "#, options: .regularExpression) != nil && data.hasSuffix(s.dataDirectory.standardizedFileURL.path), "\(data) \(text)")
        #expect(finding(answer, "open files").first?["level"] == "ok")
    }

    @Test("Settings a server would break on: server.json others can read, and more open databases than the open-file limit allows (exit 1, with the fix)")
    func brokenSettings() async throws {
        let directory = try TemporaryDirectory("lt-doctor")
        defer { directory.cleanup() }
        let data = directory.url.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: data.appendingPathComponent("server.json"))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: data.appendingPathComponent("server.json").path)
        let readable = try doctor(["--data", data.path])
        #expect(readable.status == 1)
        #expect(readable.text.contains("  problem  data           server.json (the admins' password hashes and the session secret) can be read by other users\n"
                                       + "                          → chmod 600 \(data.standardizedFileURL.path)/server.json\n"), "\(readable.text)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: data.appendingPathComponent("server.json").path)

        // LT_MAX_OPEN_DATABASES as lt serve reads it, under a shell's limit of 4096 descriptors.
        let script = "ulimit -n 4096 && exec \"$0\" doctor --data \"$1\""
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script, TestServer.binary.path, data.path]
        process.environment = ProcessInfo.processInfo.environment.merging(["LT_MAX_OPEN_DATABASES": "5000"]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(text.contains("  problem  open files     max-open-databases 5000 needs 10000 descriptors, more than the open-file limit 4096 leaves (lt serve refuses to start)\n"
                              + "                          → raise the open-file limit (LimitNOFILE=65536 in the systemd unit, as deploy/lt.service has; ulimit -n in a shell), or lower --max-open-databases to 1920\n"),
                "\(text)")
    }

    @Test("The checks on made-up facts: disk, open files, consolidation, replications, versions, and numbers a peer sends")
    func checks() throws {
        let mib: Int64 = 1 << 20
        #expect(DoctorChecks.disk(DiskSpace(free: 100 * mib, total: 10_000 * mib), largestDatabase: 0).level == .problem)
        #expect(DoctorChecks.disk(DiskSpace(free: 5_000 * mib, total: 100_000 * mib), largestDatabase: 6_000 * mib).level == .problem)  // no room to compact it
        #expect(DoctorChecks.disk(DiskSpace(free: 5_000 * mib, total: 100_000 * mib), largestDatabase: 10 * mib).level == .warning)   // 5%
        #expect(DoctorChecks.disk(DiskSpace(free: 50_000 * mib, total: 100_000 * mib), largestDatabase: 10 * mib)
                == Finding(check: "disk", level: .ok, message: "49 GiB free of 98 GiB (50%)"))

        #expect(DoctorChecks.openFiles(limit: 65536, maxOpen: 2048, isDefault: true, databases: 10, connections: 4096, open: 60).level == .ok)
        #expect(DoctorChecks.openFiles(limit: 8000, maxOpen: 2048, isDefault: false, databases: 10, connections: 4096, open: 60).level == .warning)
        #expect(DoctorChecks.openFiles(limit: 65536, maxOpen: 2048, isDefault: true, databases: 10, connections: 4096, open: 60_000).level == .warning)
        let crowded = DoctorChecks.openFiles(limit: 4480, maxOpen: 192, isDefault: true, databases: 5000, connections: 4096, evictions: 812)
        #expect(crowded.level == .warning && crowded.message.hasSuffix("5000 databases but the limit allows only 192 open at once, so busy ones are closed and reopened; databases closed to make room so far: 812"))
        #expect(DoctorChecks.openFiles(limit: 1024, maxOpen: Int.max, isDefault: false, databases: 0).level == .problem)  // no overflow

        #expect(DoctorChecks.consolidation(sweep: 0, retrying: 0, unreadable: 1, refused: 3)
                == Finding(check: "consolidation", level: .problem, message: "1 user database cannot be read; lt_locations_all refuses 3 locations: analysts do not see those locations",
                           advice: "lt status --app http://ADMIN:PASSWORD@HOST:8080 lists them with the reasons; they are tried again with growing waits"))
        #expect(DoctorChecks.consolidation(sweep: 0, retrying: 2, unreadable: 0, refused: 0).level == .warning)
        #expect(DoctorChecks.consolidation(sweep: 40, retrying: 0, unreadable: 0, refused: 0).message == "the start-up sweep has 40 user databases still to look at")
        // Cluster mode: the node that does not answer is named; all down is the application down.
        #expect(DoctorChecks.clusterNodes([("a:5984", true), ("b:5984", true)]) == Finding(check: "cluster", level: .ok, message: "2 CouchDB nodes, all answering"))
        let oneDown = DoctorChecks.clusterNodes([("a:5984", true), ("c:5984", false), ("b:5984", true)])
        #expect(oneDown.level == .problem && oneDown.message == "CouchDB node c:5984 does not answer; the application goes on through the other 2 nodes", "\(oneDown.message)")
        #expect(DoctorChecks.clusterNodes([("a:5984", false)]).message == "no CouchDB node answers (a:5984): the application answers 503")
        // A node in maintenance mode is named with what its /_up says, as a warning, not a node gone.
        let resting = DoctorChecks.clusterNodes([("a:5984", true), ("b:5984", false), ("c:5984", true)], withdrawn: ["b:5984": "maintenance_mode"])
        #expect(resting.level == .warning && resting.message == "CouchDB node b:5984 (its /_up answers maintenance_mode) asks for no requests; the application goes on through the other 2 nodes", "\(resting.message)")
        let both = DoctorChecks.clusterNodes([("a:5984", true), ("b:5984", false), ("c:5984", false)], withdrawn: ["b:5984": "seeding"])
        #expect(both.level == .problem && both.message == "CouchDB node c:5984 does not answer (and b:5984 asks for no requests); the application goes on through the other node", "\(both.message)")

        // A document's job appears in both lists once; its masked target comes from the job.
        let job: JSON = ["id": "doc:a", "source": "http://peer/db/", "target": "local:mine", "state": "crashing",
                         "info": ["error": "certificate verify failed"]]
        let document: JSON = ["id": "doc:a", "doc_id": "a", "source": "http://peer/db/", "target": "*****", "state": "crashing",
                              "info": ["error": "certificate verify failed"], "error_count": 4]
        let failing = DoctorChecks.replications([job], [document])
        #expect(failing == [Finding(check: "replication", level: .problem,
                                    message: "_replicator/a (http://peer/db/ → local:mine) is crashing: certificate verify failed, 4 errors so far",
                                    advice: "the peer's certificate is not trusted: give its CA with --ca-file (LT_CA_FILE) and restart; it is retried with growing waits")])
        #expect(DoctorChecks.advice(forReplicationError: "401 unauthorized", state: "failed").hasPrefix("the peer refuses the credentials"))
        #expect(DoctorChecks.advice(forReplicationError: "{db_not_found,<<\"x\">>} not_found", state: "crashing").hasPrefix("a database is missing"))
        #expect(DoctorChecks.replications([["id": "j", "state": "running"]], []) == [Finding(check: "replication", level: .ok, message: "1 replication job, none failing")])

        let older = ServerFacts(welcome: ["version": "3.4.3", "vendor": ["name": "LocationTracker", "version": "0.0.9"]], samples: [], jobs: [], documents: [])
        #expect(DoctorChecks.server(older, thisVersion: "0.1.0", databases: nil, largestDatabase: 0).first
                == Finding(check: "server", level: .warning, message: "lt 0.0.9 (CouchDB 3.4.3 API); this command is lt 0.1.0",
                           advice: "restart the server to run the installed lt (systemctl restart lt)"))
        let couch = ServerFacts(welcome: ["version": "3.4.3", "vendor": ["name": "The Apache Software Foundation"]], samples: nil, jobs: [], documents: [])
        #expect(DoctorChecks.server(couch, thisVersion: "0.1.0", databases: nil, largestDatabase: 0).map(\.check) == ["server", "replication"])

        #expect(DoctorChecks.count(.nan) == 0 && DoctorChecks.count(.infinity) == 0 && DoctorChecks.count(-5) == 0 && DoctorChecks.count(1e300) == 1 << 53)
        #expect(ProgressLine.size(812) == "812 bytes" && ProgressLine.size(7_654_321) == "7.3 MiB" && ProgressLine.size(1 << 42) == "4.0 TiB")
        #expect(try TestServer.runLT(["--version"]).output == "0.1.0\n")
        #expect(DoctorChecks.shortName(ofAllocator: "jemalloc 5.3.0-0-g54eaed1d (background_thread:true)") == "jemalloc 5.3.0")
    }
}
