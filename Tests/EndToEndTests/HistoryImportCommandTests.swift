import AsyncHTTPClient
import CouchJSON
import Foundation
import HistoryImport
import LTTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// `lt import` and `/api/.../imports` against a real `lt serve`, in every mode: what a file
/// holds becomes the user's locations (and reaches the consolidated database), again adds
/// nothing, a file cut half way completes without duplicates when imported whole, a Takeout
/// ZIP archive's histories are read and its other files passed over, and one user
/// can neither import into, list nor stop another's imports.
@Suite("History import", .serialized, .timeLimit(.minutes(4)))
struct HistoryImportCommandTests {
    /// A database per user, one shared database, and in front of a cluster (a stand-in, or
    /// the real CouchDB given by LT_TEST_COUCHDB_URL).
    enum Mode: String, CaseIterable, Sendable { case perUser, singleDB, cluster }
    static let modes = Mode.allCases

    struct Setup {
        let server: TestServer
        let directory: TemporaryDirectory
        let single: Bool
        var appURL: String { "http://admin:\(TestServer.admin.1)@127.0.0.1:\(server.appPort)" }

        /// The location documents of `user` as the database holds them, by the id they know.
        func locations(of user: String) async throws -> [String: JSON] {
            let db = single ? "lt_locations_all_envoy" : "lt_locations_user_\(user)"
            let prefix = single ? "\(user):" : ""
            let rows = try await server.request(.GET, "/\(db)/_all_docs?include_docs=true").json["rows"]?.arrayValue ?? []
            var out: [String: JSON] = [:]
            for row in rows {
                guard let id = row["id"]?.stringValue, id.hasPrefix(prefix + "imp-") else { continue }
                out[String(id.dropFirst(prefix.count))] = row["doc"]
            }
            return out
        }

        func runImport(_ arguments: [String]) throws -> (status: Int32, json: JSON, errors: String) {
            let run = try TestServer.runLT(["import"] + arguments + ["--app", appURL, "--json"])
            return (run.status, (try? JSON.parse(Array(run.output.utf8))) ?? .null, run.errors)
        }
    }

    func setUp(_ mode: Mode) async throws -> Setup {
        let arguments = mode == .singleDB ? ["--mode", "single-db"] : []
        let server = try TestServer(cluster: mode == .cluster, extraArguments: arguments + ["--password-iterations", "1000"])
        for user in ["amy", "bob"] {
            #expect(try await server.app(.PUT, "/api/users/\(user)", json: ["password": .string("pw-\(user)-secret")]).status == 201)
        }
        return Setup(server: server, directory: try TemporaryDirectory("lt-import"), single: mode == .singleDB)
    }

    @Test("lt import: a Records.json becomes the user's locations, field for field; again adds nothing; a file cut half way then whole completes without duplicates; the consolidated database gets them", arguments: modes)
    func importTwiceAndResume(mode: Mode) async throws {
        let setup = try await setUp(mode)
        defer { setup.server.stop(); setup.directory.cleanup() }
        var files = HistoryFiles(seed: 46)
        let points = files.points(1500)
        let (bytes, _) = files.file(.googleRecords, points)
        let file = setup.directory.url.appendingPathComponent("Records.json")
        try Data(bytes).write(to: file)

        let first = try setup.runImport([file.path, "--user", "amy"])
        #expect(first.status == 0, "\(first.errors)")
        #expect(first.json["totals"]?["written"] == 1500 && first.json["totals"]?["duplicates"] == 0)
        let summary = try #require(first.json["imports"]?.arrayValue?.first)
        #expect(summary["format"] == "google-records" && summary["state"] == "done" && summary["bytes_read"] == .int(bytes.count))
        #expect(summary["skipped"]?["no latitudeE7/longitudeE7"] == 1)
        let stored = try await setup.locations(of: "amy")
        #expect(stored.count == 1500)
        for point in points {
            let location = ImportedLocation(time: point.time, latitude: point.lat, longitude: point.lon)
            let doc = try #require(stored[location.documentID(user: "amy")], "a point is missing")
            #expect(doc["created_at"] == .int(Int(point.time)))
            #expect(doc["geometry"]?["coordinates"] == [.double(point.lon), .double(point.lat)])
            #expect(doc["properties"]?["accuracy"]?.doubleValue == Double(point.accuracy))
            #expect(doc["properties"]?["username"] == "amy")
        }
        #expect(try await setup.locations(of: "bob").isEmpty)

        let again = try setup.runImport([file.path, "--user", "amy"])
        #expect(again.json["totals"]?["written"] == 0 && again.json["totals"]?["duplicates"] == 1500)
        #expect(try await setup.locations(of: "amy").count == 1500)

        // Bob's file is cut at two thirds: what came before is stored, and the error names the byte.
        let cut = setup.directory.url.appendingPathComponent("cut.json")
        try Data(bytes.prefix(bytes.count * 2 / 3)).write(to: cut)
        let partial = try setup.runImport([cut.path, "--user", "bob"])
        #expect(partial.status != 0)
        let failed = try #require(partial.json["imports"]?.arrayValue?.first)
        #expect(failed["state"] == "failed")
        #expect(failed["error"]?.stringValue?.contains("google-records") == true)
        #expect(failed["error"]?.stringValue?.contains("byte") == true)
        let half = try #require(failed["written"]?.intValue)
        #expect(half > 500 && half < 1500)
        #expect(try await setup.locations(of: "bob").count == half)
        let whole = try setup.runImport([file.path, "--user", "bob"])
        #expect(whole.json["totals"]?["written"] == .int(1500 - half) && whole.json["totals"]?["duplicates"] == .int(half))
        #expect(try await setup.locations(of: "bob").count == 1500)

        // Consolidation carries them to the analysts' database like any device's.
        if !setup.single {
            var count = 0
            for _ in 0..<200 {
                let all = try await setup.server.request(.GET, "/lt_locations_all/_all_docs?start_key=%22amy%3Aimp-%22&end_key=%22amy%3Aimp.%22")
                count = all.json["rows"]?.arrayValue?.count ?? 0
                if count == 1500 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(count == 1500)
        }

        // --dry-run reads and counts; nothing is stored.
        var other = HistoryFiles(seed: 47)
        let (gpx, _) = other.file(.gpx, other.points(40))
        let gpxFile = setup.directory.url.appendingPathComponent("track.gpx")
        try Data(gpx).write(to: gpxFile)
        let dry = try setup.runImport([gpxFile.path, "--user", "amy", "--dry-run"])
        #expect(dry.json["totals"]?["written"] == 40 && dry.json["imports"]?[0]?["format"] == "gpx")
        #expect(try await setup.locations(of: "amy").count == 1500)

        // A file that is no history: refused, naming what it reads.
        let junk = setup.directory.url.appendingPathComponent("notes.txt")
        try Data("hello\n".utf8).write(to: junk)
        let refused = try setup.runImport([junk.path, "--user", "amy"])
        #expect(refused.status != 0)
        #expect(refused.json["imports"]?[0]?["error"]?.stringValue?.contains("Records.json") == true)

        // A Takeout download as one ZIP archive (written by Python's zipfile): its history
        // entries are read, its other files passed over; again adds nothing.
        var takeout = HistoryFiles(seed: 48)
        var members: [(name: String, bytes: [UInt8])] = [
            ("Takeout/archive_browser.html", Array("<html><body>Takeout</body></html>".utf8)),
            ("Takeout/Location History/Records.json", takeout.file(.googleRecords, takeout.points(500)).bytes),
            ("Takeout/Location History/Semantic Location History/2024/2024_MAY.json",
             takeout.file(.googleSemantic, takeout.points(300)).bytes),
        ]
        var expected = 0
        for (format, member) in zip([HistoryFormat.googleRecords, .googleSemantic], members.dropFirst()) {
            var reader = HistoryReader(format: format)
            try reader.feed(member.bytes) { _ in expected += 1 }
            try reader.finish { _ in expected += 1 }
        }
        members.append(("Takeout/Location History/Settings.json", Array(#"{"deviceSettings":[]}"#.utf8)))
        let archive = setup.directory.url.appendingPathComponent("takeout-20240601.zip")
        var arguments = [
            "python3", "-c",
            "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED); "
                + "[z.write(p, a) for a, p in zip(sys.argv[2::2], sys.argv[3::2])]; z.close()",
            archive.path,
        ]
        for (index, member) in members.enumerated() {
            let path = setup.directory.url.appendingPathComponent("member\(index)")
            try Data(member.bytes).write(to: path)
            arguments += [member.name, path.path]
        }
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = arguments
        try python.run()
        python.waitUntilExit()
        #expect(python.terminationStatus == 0)
        let zipped = try setup.runImport([archive.path, "--user", "bob"])
        #expect(zipped.status == 0, "\(zipped.errors)")
        let archiveSummary = try #require(zipped.json["imports"]?.arrayValue?.first)
        #expect(archiveSummary["format"] == "zip" && archiveSummary["state"] == "done")
        #expect(archiveSummary["entries"]?.arrayValue?.compactMap { $0["format"]?.stringValue } == ["google-records", "google-semantic"])
        #expect(archiveSummary["written"] == .int(expected) && expected > 600)
        #expect(archiveSummary["skipped"]?["archive entries that are not a location history"] == 2)
        #expect(try await setup.locations(of: "bob").count == 1500 + expected)
        let zippedAgain = try TestServer.runLT(["import", archive.path, "--user", "bob", "--app", setup.appURL])
        #expect(zippedAgain.status == 0)
        #expect(zippedAgain.output.contains("ZIP archive of 2 location files, 0 written, \(expected) already there"), "\(zippedAgain.output)")
        #expect(zippedAgain.output.contains("Semantic Location History/2024/2024_MAY.json: google-semantic, "), "\(zippedAgain.output)")
    }

    /// An upload whose body arrives when the test says: its first piece at once.
    struct SlowUpload {
        let continuation: AsyncStream<ByteBuffer>.Continuation
        let response: Task<(status: Int, json: JSON), any Error>

        init(_ url: String, user: (String, String), first: [UInt8]) {
            let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream()
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Authorization", value: TestServer.basic(user.0, user.1))
            request.body = .stream(stream, length: .unknown)
            self.continuation = continuation
            response = Task {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                let body = try await response.body.collect(upTo: 1 << 20)
                return (Int(response.status.code), (try? JSON.parse(Array(buffer: body))) ?? .null)
            }
            continuation.yield(ByteBuffer(bytes: first))
        }

        func finish(_ rest: ArraySlice<UInt8>) async throws -> (status: Int, json: JSON) {
            var start = rest.startIndex
            while start < rest.endIndex {
                let end = min(rest.endIndex, start + 65_536)
                continuation.yield(ByteBuffer(bytes: rest[start..<end]))
                start = end
            }
            continuation.finish()
            return try await response.value
        }
    }

    @Test("A running import is listed with its progress, can be stopped, and one user runs at most two at once (429 beyond); the stopped import's locations stay", arguments: [Mode.perUser, .singleDB])
    func cancelAndLimit(mode: Mode) async throws {
        let setup = try await setUp(mode)
        defer { setup.server.stop(); setup.directory.cleanup() }
        var files = HistoryFiles(seed: 11)
        let (bytes, _) = files.file(.googleRecords, files.points(4000))
        let url = "http://127.0.0.1:\(setup.server.appPort)/api/me/imports"
        let amy = ("amy", "pw-amy-secret")
        let first = SlowUpload(url + "?name=one.json", user: amy, first: Array(bytes.prefix(100_000)))
        let second = SlowUpload(url + "?name=two.json", user: amy, first: Array(bytes.prefix(100_000)))
        func running() async throws -> [JSON] {
            let list = try await setup.server.request(
                .GET, "/api/me/imports", auth: .basic(amy.0, amy.1), base: "http://127.0.0.1:\(setup.server.appPort)")
            return (list.json["imports"]?.arrayValue ?? []).filter { $0["state"] == "running" }
        }
        var jobs: [JSON] = []
        for _ in 0..<100 {
            jobs = try await running()
            if jobs.count == 2, jobs.allSatisfy({ ($0["bytes_read"]?.intValue ?? 0) > 0 }) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(jobs.count == 2 && jobs.allSatisfy { ($0["bytes_read"]?.intValue ?? 0) >= 65_536 }, "\(jobs)")
        // A third at once is refused, saying why.
        let third = try await setup.server.request(
            .POST, "/api/me/imports", body: bytes, auth: .basic(amy.0, amy.1), base: "http://127.0.0.1:\(setup.server.appPort)")
        #expect(third.status == 429 && third.json["reason"]?.stringValue?.contains("imports running") == true)
        // Stopping one: it ends as cancelled, what it stored stays; the other completes.
        let id = try #require(jobs.first { $0["file_name"] == "one.json" }?["id"]?.stringValue)
        let stop = try await setup.server.request(
            .DELETE, "/api/me/imports/\(id)", auth: .basic(amy.0, amy.1), base: "http://127.0.0.1:\(setup.server.appPort)")
        #expect(stop.status == 202)
        let stopped = try await first.finish(bytes[100_000...])
        #expect(stopped.status == 200 && stopped.json["state"] == "cancelled", "\(stopped)")
        let completed = try await second.finish(bytes[100_000...])
        #expect(completed.json["state"] == "done" && completed.json["duplicates"]?.intValue ?? -1 >= 0)
        #expect(try await setup.locations(of: "amy").count == 4000)
        #expect(try await running().isEmpty)
    }

    @Test("One user against another: bob cannot import as amy, list or stop amy's imports; his own import lands in his locations only", arguments: modes)
    func attacker(mode: Mode) async throws {
        let setup = try await setUp(mode)
        defer { setup.server.stop(); setup.directory.cleanup() }
        var files = HistoryFiles(seed: 3)
        let (bytes, _) = files.file(.ownTracksJSON, files.points(30))
        let bob = TestServer.Auth.basic("bob", "pw-bob-secret")
        let base = "http://127.0.0.1:\(setup.server.appPort)"
        let asAmy = try await setup.server.request(.POST, "/api/users/amy/imports", body: bytes, auth: bob, base: base)
        #expect(asAmy.status == 401 || asAmy.status == 403)
        #expect(try await setup.locations(of: "amy").isEmpty)
        let anonymous = try await setup.server.request(.POST, "/api/me/imports", body: bytes, auth: .none, base: base)
        #expect(anonymous.status == 401)
        // Amy imports; bob sees none of it and cannot stop it by its id.
        let amy = TestServer.Auth.basic("amy", "pw-amy-secret")
        let mine = try await setup.server.request(.POST, "/api/me/imports?name=amy.json", body: bytes, auth: amy, base: base)
        #expect(mine.status == 200 && mine.json["written"] == 30)
        let id = try #require(mine.json["id"]?.stringValue)
        #expect(try await setup.server.request(.GET, "/api/me/imports", auth: bob, base: base).json["imports"] == [])
        #expect(try await setup.server.request(.GET, "/api/users/amy/imports", auth: bob, base: base).status != 200)
        #expect(try await setup.server.request(.DELETE, "/api/me/imports/\(id)", auth: bob, base: base).status == 404)
        let listed = try await setup.server.request(.GET, "/api/me/imports", auth: amy, base: base)
        #expect(listed.json["imports"]?[0]?["id"] == .string(id) && listed.json["imports"]?[0]?["file_name"] == "amy.json")
        // Bob's own import of the same file is his: 30 new locations under his ids, amy's untouched.
        let his = try await setup.server.request(.POST, "/api/me/imports", body: bytes, auth: bob, base: base)
        #expect(his.json["written"] == 30)
        let amys = try await setup.locations(of: "amy")
        let bobs = try await setup.locations(of: "bob")
        #expect(amys.count == 30 && bobs.count == 30 && Set(amys.keys).isDisjoint(with: bobs.keys))
        #expect(bobs.values.allSatisfy { $0["properties"]?["username"] == "bob" })
    }
}
