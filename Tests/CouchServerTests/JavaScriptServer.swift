import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1
import Testing

extension TestServer {
    /// A server that runs JavaScript, or nil where lt was built without it (never in CI,
    /// where that is a failure): a probe database's view must answer.
    static func withJavaScript(dataDirectory: URL? = nil, extraArguments: [String] = []) async throws -> TestServer? {
        let s = try TestServer(dataDirectory: dataDirectory, extraArguments: extraArguments)
        _ = try await s.request(.PUT, "/probe")
        _ = try await s.request(.PUT, "/probe/_design/p", json: ["views": ["all": ["map": "function (doc) { emit(1, 1); }"]]])
        let available = try await s.request(.GET, "/probe/_design/p/_view/all")
        guard available.status == 200 else {
            #expect(available.status == 501 && ProcessInfo.processInfo.environment["CI"] == nil, "\(available.text)")
            s.stop()
            return nil
        }
        return s
    }
}
