import CouchJSON
import Foundation
import HTTPServing
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("HTTP serving")
struct HTTPServingTests {
    struct Unexpected: Error, CustomStringConvertible {
        var description: String { "the disk is on fire" }
    }

    /// A router's failures through `JSONErrors`, in process (Hummingbird's `.router` testing: no
    /// socket, the middleware and routes as a listener runs them).
    @Test("JSONErrors answers every failure as CouchDB's {error, reason}: a CouchError with its status, Hummingbird's with its own, no route as not_found, anything else a 500 naming it")
    func jsonErrors() async throws {
        let router = Router(context: BasicRequestContext.self)
        router.middlewares.add(JSONErrors<BasicRequestContext>())
        router.get("/conflict") { _, _ -> String in throw CouchError.conflict }
        router.get("/refused") { _, _ -> String in throw HTTPError(.badRequest, message: "no good") }
        router.get("/fire") { _, _ -> String in throw Unexpected() }
        router.get("/fine") { _, _ -> String in "fine" }
        try await Application(router: router).test(.router) { client in
            func answer(_ path: String) async throws -> (HTTPResponse.Status, JSON?, String?) {
                try await client.execute(uri: path, method: .get) { response in
                    let bytes = Array(buffer: response.body)
                    return (response.status, try? JSON.parse(bytes), response.headers[.contentType])
                }
            }
            let conflict = try await answer("/conflict")
            #expect(conflict.0 == .conflict && conflict.1 == ["error": "conflict", "reason": "Document update conflict."] && conflict.2 == "application/json")
            let refused = try await answer("/refused")
            #expect(refused.0 == .badRequest && refused.1 == ["error": "bad_request", "reason": "no good"])
            let missing = try await answer("/nowhere")
            #expect(missing.0 == .notFound && missing.1?["error"] == "not_found")
            let fire = try await answer("/fire")
            #expect(fire.0 == .internalServerError && fire.1 == ["error": "internal_server_error", "reason": "the disk is on fire"])
            let fine = try await client.execute(uri: "/fine", method: .get) { String(buffer: $0.body) }
            #expect(fine == "fine")
        }
    }

    @Test("The client behind trusted proxies: the nearest X-Forwarded-For hop that is not one of them; anyone else's header ignored; garbage trusts nothing beyond")
    func clientAddress() throws {
        let address = ClientAddress(trustedProxies: [try AddressRange("10.0.0.0/8"), try AddressRange("192.168.1.1")])
        func client(_ peer: String?, _ forwarded: String?) -> String {
            var headers = HTTPFields()
            if let forwarded { headers[HTTPField.Name("X-Forwarded-For")!] = forwarded }
            return address.client(peer: peer, headers: headers)
        }
        #expect(client("203.0.113.9", "1.2.3.4") == "203.0.113.9")  // not a proxy: its header is the client's word
        #expect(client("10.1.2.3", "198.51.100.7") == "198.51.100.7")
        #expect(client("10.1.2.3", "6.6.6.6, 198.51.100.7, 192.168.1.1") == "198.51.100.7")  // spoofed first hop skipped
        #expect(client("10.1.2.3", "10.9.9.9, 10.8.8.8") == "10.9.9.9")  // only proxies: the farthest
        #expect(client("10.1.2.3", "not-an-address, 10.8.8.8") == "10.1.2.3")
        #expect(client("10.1.2.3", nil) == "10.1.2.3")
        #expect(client(nil, "1.2.3.4") == "unknown")
        #expect(throws: (any Error).self) { try AddressRange("10.0.0.0/33") }
        #expect(throws: (any Error).self) { try AddressRange("example.org") }
        #expect(try AddressRange("2001:db8::/32").contains("2001:db8::1") && !(try AddressRange("2001:db8::/32").contains("2001:db9::1")))
    }

    @Test("At most limit events per client in any window, the wait until the next said in whole seconds; clients apart; memory bounded")
    func rateLimit() {
        let limit = ClientRateLimit(limit: 3, window: 60, capacity: 100)
        let start = Date(timeIntervalSince1970: 1_000_000)
        for second in [0, 10, 20] { #expect(limit.record("a", now: start + Double(second)) == nil) }
        #expect(limit.record("a", now: start + 30) == 30)  // the first event leaves the window at 60
        #expect(limit.record("b", now: start + 30) == nil)
        #expect(limit.record("a", now: start + 59.5) == 1)
        #expect(limit.record("a", now: start + 60) == nil)  // refused events were not counted
        for n in 0..<1_000 { _ = limit.record("client-\(n)", now: start + 61 + Double(n) / 100) }
        #expect(limit.count <= 100)
    }
}
