import CouchEngine
import CouchProtocol

/// The database API's path segments, decoded as CouchDB decodes them: percent-escapes, and a
/// `+` as a space in database names and document ids while `[chttpd] decode_plus_to_space` is
/// true (CouchDB 3's default), so `PUT /db/test+doc` makes the document `test doc` on both.
/// lt's own clients escape `+` (`%2B`), as PouchDB's `encodeURIComponent` does.
enum DatabasePath {
    /// `[chttpd] decode_plus_to_space`, set by the runtime configuration.
    static let plusAsSpace = Locked(true)

    static func segments(_ raw: String) -> [String] {
        let plus = plusAsSpace.withLock { $0 }
        return Substring(raw).utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map {
            CouchURL.decode($0, plusAsSpace: plus)
        }
    }
}
