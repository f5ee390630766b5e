import CouchJSON
import CouchServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LTTestSupport
import Testing
import NIOHTTP1

/// Clients that try to wear the server down: guessing passwords, holding connections open,
/// and whether the owner still gets in. Issue 22's F5 and F6, against a real `lt serve`.
@Suite("Abuse", .timeLimit(.minutes(5)))
struct AbuseTests {
    /// A request "from" `client`, through the trusted proxy the server was told about.
    static func via(_ client: String) -> [(String, String)] { [("X-Forwarded-For", client)] }

    @Test("10,000 failed logins from one address leave a valid user's password, API key and session cookie working, on both listeners")
    func floodOfFailedLogins() async throws {
        let s = try TestServer(extraArguments: ["--trusted-proxy", "127.0.0.1/32"])
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/dave", json: ["password": "right-password"]).status == 201)
        let attacker = Self.via("203.0.113.66")
        // The attacker guesses dave's password, and others', from one address: after a few
        // failures every further attempt waits, so most of the 10,000 are refused cheaply.
        var statuses: [Int: Int] = [:]
        try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var counts = 0
                    for i in 0..<1250 {
                        let name = i.isMultiple(of: 2) ? "dave" : "guess\(worker)-\(i)"
                        let reply = try await s.request(.POST, "/api/login", json: ["username": .string(name), "password": "wrong"], auth: .none,
                                                        headers: attacker, base: "http://127.0.0.1:\(s.appPort)")
                        counts += reply.status == 429 ? 1 : 0
                        #expect(reply.status == 429 || reply.status == 401)
                    }
                    return counts
                }
            }
            for try await refused in group { statuses[429, default: 0] += refused }
        }
        #expect((statuses[429] ?? 0) > 9_900, "most attempts must be refused without a password check: \(statuses)")
        // The attacker is refused even with the right password now: it is their own failures.
        let attackerRight = try await s.request(.POST, "/api/login", json: ["username": "dave", "password": "right-password"], auth: .none,
                                                headers: attacker, base: "http://127.0.0.1:\(s.appPort)")
        #expect(attackerRight.status == 429)
        #expect(attackerRight.json["reason"]?.stringValue?.contains("try again in") == true)

        // Dave, from his own address: password login, the API key it gives, a dashboard session.
        let owner = Self.via("198.51.100.7")
        let login = try await s.request(.POST, "/api/login", json: ["username": "dave", "password": "right-password"], auth: .none,
                                        headers: owner, base: "http://127.0.0.1:\(s.appPort)")
        #expect(login.status == 200, "\(login.text)")
        let key = login.json["api_key"]?.stringValue ?? "", secret = login.json["api_password"]?.stringValue ?? ""
        #expect(try await s.request(.GET, "/api/keys", auth: .basic(key, secret), headers: owner, base: "http://127.0.0.1:\(s.appPort)").status == 200)
        #expect(try await s.request(.PUT, "/lt_locations_user_dave/fix-1", json: ["type": "Feature"], auth: .basic(key, secret), headers: owner).status == 201)
        let session = try await s.request(.POST, "/api/session", json: ["username": "dave", "password": "right-password"], auth: .none,
                                          headers: owner, base: "http://127.0.0.1:\(s.appPort)")
        #expect(session.status == 200, "\(session.text)")
        // The API key and the admin work from the attacker's own address too: those are not
        // password guesses for an account the attacker failed.
        #expect(try await s.request(.GET, "/lt_locations_user_dave/fix-1", auth: .basic(key, secret), headers: Self.via("203.0.113.67")).status == 200)
        #expect(try await s.request(.GET, "/_all_dbs", headers: owner).status == 200)
    }

    @Test("Failures count the same on both listeners, back off exponentially, and an X-Forwarded-For from an untrusted peer is ignored")
    func bothListeners() async throws {
        let s = try TestServer()  // no trusted proxy: the header is the client's own word
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:erin", json: ["name": "erin", "type": "user", "roles": [], "password": "pw-erin"]).status == 201)
        // Five wrong passwords on the database API, each "from" another address (ignored).
        for i in 0..<5 {
            let reply = try await s.request(.GET, "/_session", auth: .basic("erin", "wrong"), headers: Self.via("192.0.2.\(i)"))
            #expect(reply.status == 401, "\(reply.text)")
        }
        // The sixth attempt waits, with her right password, on the application API too.
        let app = try await s.app(.POST, "/api/session", json: ["username": "erin", "password": "pw-erin"])
        #expect(app.status == 429, "\(app.text)")
        let db = try await s.request(.POST, "/_session", json: ["name": "erin", "password": "pw-erin"], auth: .none)
        #expect(db.status == 429 && db.json["error"] == "too_many_requests", "\(db.text)")
        // The wait is short at first (1 s), and grows only with further failures.
        try await Task.sleep(for: .milliseconds(1200))
        let after = try await s.request(.GET, "/_session", auth: .basic("erin", "pw-erin"))
        #expect(after.status == 200 && after.json["userCtx"]?["name"] == "erin", "\(after.text)")
    }

    @Test("Guesses at one account from many addresses never refuse its owner's first try from an address of their own")
    func distributedGuessing() async throws {
        let s = try TestServer(extraArguments: ["--trusted-proxy", "127.0.0.0/8"])
        defer { s.stop() }
        #expect(try await s.app(.PUT, "/api/users/fay", json: ["password": "pw-fay"]).status == 201)
        for i in 0..<40 {
            let reply = try await s.request(.POST, "/api/login", json: ["username": "fay", "password": "wrong"], auth: .none,
                                            headers: Self.via("203.0.113.\(i)"), base: "http://127.0.0.1:\(s.appPort)")
            #expect(reply.status == 401 || reply.status == 429)
        }
        // A guessing address that failed before now waits for the account's failures as well.
        let again = try await s.request(.POST, "/api/login", json: ["username": "fay", "password": "wrong"], auth: .none,
                                        headers: Self.via("203.0.113.3"), base: "http://127.0.0.1:\(s.appPort)")
        #expect(again.status == 429, "\(again.text)")
        let owner = try await s.request(.POST, "/api/login", json: ["username": "fay", "password": "pw-fay"], auth: .none,
                                        headers: Self.via("198.51.100.20"), base: "http://127.0.0.1:\(s.appPort)")
        #expect(owner.status == 200, "\(owner.text)")
    }

    /// A raw TCP connection to `port` from `source` (an address of the loopback range).
    static func connect(_ port: Int, from source: String = "127.0.0.1") throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        precondition(fd >= 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        _ = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { close(fd); throw POSIXError(.ECONNREFUSED) }
        return fd
    }

    /// Seconds until the server closes `fd` (reads return 0), at most `limit`; nil if it did not.
    static func secondsUntilClosed(_ fd: Int32, limit: Double) -> Double? {
        let start = Date()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date().timeIntervalSince(start) < limit {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { return Date().timeIntervalSince(start) }
        }
        return nil
    }

    static func send(_ fd: Int32, _ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    @Test("CONNECT is answered at once (CouchDB answers it like any method) and its connection closed, not held open as a tunnel")
    func connectMethod() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let fd = try Self.connect(s.port)
        defer { close(fd) }
        Self.send(fd, "CONNECT /lt_places/_index/a HTTP/1.1\r\nHost: x\r\n\r\n")
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let start = Date()
        while Date().timeIntervalSince(start) < 5 {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        let text = String(decoding: answer, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 404"), "\(text)")
        #expect(Date().timeIntervalSince(start) < 4, "the connection was held open")
        #expect(try await s.request(.GET, "/").status == 200)
    }

    @Test("Slowloris: unfinished headers and a body that stops are cut off by their timeouts; one address gets only its share of connections; a valid user is served throughout")
    func slowClients() async throws {
        let s = try TestServer(extraArguments: ["--request-timeout", "2", "--body-timeout", "1", "--max-connections-per-address", "8"])
        defer { s.stop() }
        // Headers that never end, from the attacker's own loopback address.
        let slowHead = try Self.connect(s.port, from: "127.0.0.2")
        defer { close(slowHead) }
        Self.send(slowHead, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        // A body that stops after one byte.
        let slowBody = try Self.connect(s.port, from: "127.0.0.2")
        defer { close(slowBody) }
        Self.send(slowBody, "PUT /lt_places/slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        // Meanwhile a valid user is answered at once.
        #expect(try await s.request(.GET, "/lt_places/_all_docs?limit=1").status == 200)
        let body = Self.secondsUntilClosed(slowBody, limit: 10)
        let head = Self.secondsUntilClosed(slowHead, limit: 10)
        #expect(body != nil && body! < 5, "a stalled body was not cut off: \(String(describing: body))")
        #expect(head != nil && head! < 5, "unfinished headers were not cut off: \(String(describing: head))")
        #expect(try await s.request(.GET, "/lt_places/slow").status == 404)

        // Eight idle connections from one address are its share; the ninth is closed at once,
        // while another address is still served.
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for _ in 0..<8 { held.append(try Self.connect(s.port, from: "127.0.0.3")) }
        try await Task.sleep(for: .milliseconds(200))
        let ninth = try Self.connect(s.port, from: "127.0.0.3")
        defer { close(ninth) }
        let refused = Self.secondsUntilClosed(ninth, limit: 3)
        #expect(refused != nil && refused! < 1, "the ninth connection from one address was kept: \(String(describing: refused))")
        #expect(try await s.request(.GET, "/").status == 200)
        // An idle keep-alive connection is closed after the head timeout too.
        let idle = Self.secondsUntilClosed(held[0], limit: 6)
        #expect(idle != nil, "an idle connection was kept past the request timeout")
    }

    @Test("One user holds at most --max-feeds-per-user longpoll/continuous feeds at once (429 beyond); a closed feed frees its slot; admins are not counted")
    func feedsPerUser() async throws {
        let s = try TestServer(extraArguments: ["--max-feeds-per-user", "2"])
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:gil", json: ["name": "gil", "type": "user", "roles": [], "password": "pw-gil"]).status == 201)
        #expect(try await s.request(.PUT, "/feeds").status == 201)
        #expect(try await s.request(.PUT, "/feeds/_security", json: ["members": ["names": ["gil"], "roles": []]]).status == 200)
        let gil = TestServer.Auth.basic("gil", "pw-gil")
        // Her password checked once (then cached), so that both feeds are open well before the third.
        #expect(try await s.request(.GET, "/feeds", auth: gil).status == 200)
        let waiting = (0..<2).map { _ in
            Task { try await s.request(.GET, "/feeds/_changes?feed=longpoll&since=now&timeout=8000", auth: gil) }
        }
        try await Task.sleep(for: .milliseconds(1500))
        let third = try await s.request(.GET, "/feeds/_changes?feed=continuous&since=now&timeout=500", auth: gil)
        #expect(third.status == 429 && third.json["error"] == "too_many_requests", "\(third.text)")
        // An admin's feeds are not counted; a normal read is not a feed.
        #expect(try await s.request(.GET, "/feeds/_changes?feed=longpoll&since=now&timeout=100").status == 200)
        #expect(try await s.request(.GET, "/feeds/_changes", auth: gil).status == 200)
        // A write ends both long polls; their slots are free again.
        #expect(try await s.request(.PUT, "/feeds/doc", json: ["x": 1]).status == 201)
        for task in waiting { #expect(try await task.value.status == 200) }
        try await Task.sleep(for: .milliseconds(200))
        let again = try await s.request(.GET, "/feeds/_changes?feed=longpoll&since=now&timeout=200", auth: gil)
        #expect(again.status == 200, "\(again.text)")
    }

    @Test("A long poll is not cut off by the connection timeouts while it waits for its answer")
    func longPollOutlivesTimeouts() async throws {
        let s = try TestServer(extraArguments: ["--request-timeout", "1", "--body-timeout", "1"])
        defer { s.stop() }
        #expect(try await s.request(.PUT, "/t").status == 201)
        let started = Date()
        let reply = try await s.request(.GET, "/t/_changes?feed=longpoll&since=now&timeout=3000")
        #expect(reply.status == 200 && reply.json["last_seq"] != nil, "\(reply.text)")
        #expect(Date().timeIntervalSince(started) > 2.5)
    }

    @Test("Behind one NAT: 40 failed logins from an address for other accounts do not lock out a user who has logged in from it before, nor their API key; a newcomer there waits")
    func sharedAddress() async throws {
        let s = try TestServer(extraArguments: ["--trusted-proxy", "127.0.0.1/32"])
        defer { s.stop() }
        let nat = Self.via("100.64.0.1")  // carrier-grade NAT: many people, one address
        let app = "http://127.0.0.1:\(s.appPort)"
        for name in ["hana", "ivo"] { #expect(try await s.app(.PUT, "/api/users/\(name)", json: ["password": .string("pw-\(name)")]).status == 201) }
        let first = try await s.request(.POST, "/api/login", json: ["username": "hana", "password": "pw-hana"], auth: .none, headers: nat, base: app)
        #expect(first.status == 200)
        let key = first.json["api_key"]?.stringValue ?? "", secret = first.json["api_password"]?.stringValue ?? ""
        for i in 0..<40 {
            _ = try await s.request(.POST, "/api/login", json: ["username": .string("someone\(i)"), "password": "wrong"], auth: .none, headers: nat, base: app)
        }
        let hana = try await s.request(.POST, "/api/login", json: ["username": "hana", "password": "pw-hana"], auth: .none, headers: nat, base: app)
        #expect(hana.status == 200, "a user who logged in from this address before gets in: \(hana.text)")
        #expect(try await s.request(.GET, "/lt_locations_user_hana", auth: .basic(key, secret), headers: nat).status == 200)
        let newcomer = try await s.request(.POST, "/api/login", json: ["username": "ivo", "password": "pw-ivo"], auth: .none, headers: nat, base: app)
        #expect(newcomer.status == 429, "an address over its limit still slows down accounts it has not logged in to: \(newcomer.text)")
        // Her own failures for her account still count.
        for _ in 0..<6 { _ = try await s.request(.POST, "/api/login", json: ["username": "hana", "password": "wrong"], auth: .none, headers: nat, base: app) }
        let guessed = try await s.request(.POST, "/api/login", json: ["username": "hana", "password": "pw-hana"], auth: .none, headers: nat, base: app)
        #expect(guessed.status == 429)
    }

    @Test("A body that trickles steadily is cut off at --body-deadline, though no pause is long")
    func trickledBody() async throws {
        let s = try TestServer(extraArguments: ["--body-timeout", "2", "--body-deadline", "3"])
        defer { s.stop() }
        let fd = try Self.connect(s.port, from: "127.0.0.4")
        defer { close(fd) }
        Self.send(fd, "PUT /lt_places/trickle HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        let started = Date()
        var closedAfter: Double?
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date().timeIntervalSince(started) < 10 {
            Self.send(fd, " ")  // a byte every half second: never a long pause
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 500) > 0, read(fd, &buffer, buffer.count) <= 0 {
                closedAfter = Date().timeIntervalSince(started)
                break
            }
        }
        #expect(closedAfter != nil && closedAfter! > 2 && closedAfter! < 6, "closed after \(String(describing: closedAfter))")
        #expect(try await s.request(.GET, "/").status == 200)
    }

    @Test("Registration: at most --max-registrations-per-hour per address (429 with Retry-After), admins exempt, 0 closes it; reserved names and database accounts' names refused")
    func registrationLimits() async throws {
        let s = try TestServer(extraArguments: ["--trusted-proxy", "127.0.0.1/32", "--max-registrations-per-hour", "3"])
        defer { s.stop() }
        let app = "http://127.0.0.1:\(s.appPort)"
        let spammer = Self.via("203.0.113.9")
        for i in 0..<3 {
            #expect(try await s.request(.PUT, "/api/users/spam\(i)", json: ["password": "pw"], auth: .none, headers: spammer, base: app).status == 201)
        }
        let refused = try await s.request(.PUT, "/api/users/spam3", json: ["password": "pw"], auth: .none, headers: spammer, base: app)
        #expect(refused.status == 429 && refused.json["error"] == "too_many_requests", "\(refused.text)")
        let retry = Int(refused.headers.first(name: "Retry-After") ?? "") ?? 0
        #expect(retry > 3500 && retry <= 3600, "Retry-After: \(retry)")
        #expect(try await s.request(.GET, "/lt_locations_user_spam3").status == 404)  // nothing made
        // Another address, and an admin, are not held up.
        #expect(try await s.request(.PUT, "/api/users/neighbour", json: ["password": "pw"], auth: .none, headers: Self.via("198.51.100.9"), base: app).status == 201)
        #expect(try await s.request(.PUT, "/api/users/spam3", json: ["password": "pw"], headers: spammer, base: app).status == 201)

        // Names that are not free.
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:ann", json: ["name": "ann", "type": "user", "roles": ["analyst"], "password": "pw-ann"]).status == 201)
        for name in ["admin", "root", "key-0123456789abcdef0123456789abcdef", "ann"] {
            let taken = try await s.request(.PUT, "/api/users/\(name)", json: ["password": "pw"], base: app)
            #expect(taken.status == 409 && taken.json["error"] == "conflict", "\(name): \(taken.text)")
        }

        let closed = try TestServer(extraArguments: ["--max-registrations-per-hour", "0"])
        defer { closed.stop() }
        let anonymous = try await closed.app(.PUT, "/api/users/zed", json: ["password": "pw"])
        #expect(anonymous.status == 403 && anonymous.json["reason"]?.stringValue?.contains("admin") == true, "\(anonymous.text)")
        #expect(try await closed.app(.PUT, "/api/users/zed", json: ["password": "pw"], auth: .admin).status == 201)
    }
}
