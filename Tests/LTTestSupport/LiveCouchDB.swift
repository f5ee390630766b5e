import Foundation

/// The real Apache CouchDB beside lt: set `LT_TEST_COUCHDB_URL=http://admin:password@127.0.0.1:5984`
/// (docs/compatibility.md says how to run one). Without it these tests are skipped.
public enum LiveCouchDB {
    public static let url = ProcessInfo.processInfo.environment["LT_TEST_COUCHDB_URL"]
    public static var isSet: Bool { url?.isEmpty == false }

    /// The base URL without credentials, and the credentials.
    public static var endpoint: (base: String, user: String, password: String) {
        let components = URLComponents(string: url ?? "")
        var plain = components
        plain?.user = nil
        plain?.password = nil
        var base = plain?.string ?? ""
        while base.hasSuffix("/") { base.removeLast() }
        return (base, components?.user ?? "", components?.password ?? "")
    }
}
