import CouchEngine
@testable import CouchServer
import CouchJSON
import Foundation
import HTTPServing
import LTTestSupport
import Testing
import NIOHTTP1

/// Basic auth on every request pays one PBKDF2 run per user, as CouchDB's
/// `couch_passwords_cache`: the remembered check lasts while it is used, and requests that
/// arrive together wait for one run.
@Suite("Verified passwords")
struct PasswordCacheTests {
    static let key = Array(repeating: UInt8(7), count: 32)
    static let alice = UserContext(name: "alice", roles: [])

    @Test("An entry lasts while it is used: each use moves its idle time back to zero; unused for max_idle it is gone")
    func idleExpiry() {
        var cache = VerifiedPasswords()
        let start = Date(timeIntervalSince1970: 1_000_000)
        cache.insert(Self.key, Self.alice, now: start)
        // Used every 500 s for an hour: never idle long enough to go.
        for step in 1...7 {
            #expect(cache.lookup(Self.key, now: start.addingTimeInterval(Double(step) * 500)) == Self.alice, "step \(step)")
        }
        let lastUse = start.addingTimeInterval(3500)
        #expect(cache.lookup(Self.key, now: lastUse.addingTimeInterval(VerifiedPasswords.maxIdle - 1)) == Self.alice)
        let idle = lastUse.addingTimeInterval(VerifiedPasswords.maxIdle - 1 + VerifiedPasswords.maxIdle)
        #expect(cache.lookup(Self.key, now: idle) == nil)
        #expect(cache.count == 0)
        #expect(cache.lookup(Array(repeating: 8, count: 32), now: start) == nil)
    }

    @Test("At most max_objects entries: past it the least recently used goes, and idle ones go first")
    func bounded() {
        func key(_ i: Int) -> [UInt8] { withUnsafeBytes(of: i) { Array($0) } }
        var cache = VerifiedPasswords()
        let start = Date(timeIntervalSince1970: 1_000_000)
        for i in 0..<VerifiedPasswords.maxEntries {
            cache.insert(key(i), Self.alice, now: start.addingTimeInterval(Double(i) / 100))
        }
        // Key 0 is used again, so key 1 is now the least recently used.
        let later = start.addingTimeInterval(200)
        #expect(cache.lookup(key(0), now: later) == Self.alice)
        cache.insert(Self.key, Self.alice, now: later)
        #expect(cache.count == VerifiedPasswords.maxEntries)
        #expect(cache.lookup(key(1), now: later) == nil)
        #expect(cache.lookup(key(0), now: later) == Self.alice)
        #expect(cache.lookup(key(2), now: later) == Self.alice)
        #expect(cache.lookup(Self.key, now: later) == Self.alice)
        // Ten times the bound of new users, each looked up often: still the bound.
        for i in 0..<(10 * VerifiedPasswords.maxEntries) {
            let now = later.addingTimeInterval(Double(i) / 1000)
            cache.insert(key(1_000_000 + i), Self.alice, now: now)
            _ = cache.lookup(key(1_000_000 + i), now: now)
            _ = cache.lookup(Self.key, now: now)
            #expect(cache.count <= VerifiedPasswords.maxEntries)
        }
        #expect(cache.lookup(Self.key, now: later.addingTimeInterval(100)) == Self.alice)
        #expect(cache.lookup(key(1_000_000 + 10 * VerifiedPasswords.maxEntries - 1), now: later.addingTimeInterval(100)) == Self.alice)
        #expect(cache.lookup(key(1_000_000), now: later.addingTimeInterval(100)) == nil)
        // Long after, one insertion drops every idle entry but the ones used since.
        let muchLater = later.addingTimeInterval(100 + VerifiedPasswords.maxIdle + 1)
        cache.insert(key(-1), Self.alice, now: muchLater)
        #expect(cache.count == 1)
    }

    @Test("16 requests at once with a new user's password (600,000 iterations) cost one PBKDF2 run, and the next 16 none; a wrong password is refused for each")
    func oneRunForConcurrentRequests() async throws {
        let s = try TestServer()
        defer { s.stop() }
        let user: JSON = ["_id": "org.couchdb.user:eve", "name": "eve", "password": "eve-password-2718", "roles": [], "type": "user"]
        #expect(try await s.request(.PUT, "/_users/org.couchdb.user:eve", json: user).status == 201)
        func verifications() async throws -> Double {
            let reply = try await s.request(.GET, "/_node/_local/_prometheus")
            return PrometheusSample.parse(reply.text).sum("lt_password_verifications_total")
        }
        func together(_ password: String) async throws -> [Int] {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<16 {
                    group.addTask { try await s.request(.GET, "/_session", auth: .basic("eve", password)).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        let before = try await verifications()
        #expect(try await together("eve-password-2718") == Array(repeating: 200, count: 16))
        #expect(try await verifications() - before == 1)
        #expect(try await together("eve-password-2718") == Array(repeating: 200, count: 16))
        #expect(try await verifications() - before == 1)
        let session = try await s.request(.GET, "/_session", auth: .basic("eve", "eve-password-2718")).json
        #expect(session["userCtx"]?["name"] == "eve")
        // Each refused: 401, or 429 once the login throttle has seen the failures.
        let wrong = try await together("not-her-password")
        #expect(wrong.allSatisfy { [401, 429].contains($0) } && wrong.contains(401), "\(wrong)")
    }
}
