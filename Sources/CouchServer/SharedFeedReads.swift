import CouchEngine
import CouchJSON
import Foundation
import NIOCore

/// Listeners that ask the same question share one answer. Many longpoll, continuous and
/// eventsource feeds of a database often wait with the same filter (a design document's filter
/// and its query, `_doc_ids`, `_selector`) at the same position; after a commit each would read
/// the changes since then and run its filter over them, one query-server round trip per
/// listener for JavaScript filters. Here the first to ask reads and filters; the others with
/// the same question — same database, same request apart from its feed settings, same user
/// (a filter's `req.userCtx`), same position — get that page. Answers are kept a second at
/// most (a page ends at its own `last_seq`, so a listener given one read a moment ago
/// continues from there and misses nothing) and 256 at once.
///
/// A filter that reads `req.headers` or `req.peer` is assumed to answer the same for two
/// requests that differ only there (listeners of one app send the same headers).
final class SharedFeedReads: Sendable {
    /// A page as every listener sharing it writes it: serialized once.
    struct Page: Sendable {
        let page: ChangesPage
        /// One JSON line per row (continuous feeds).
        let continuous: ByteBuffer
        /// One `data:`/`id:` event per row (eventsource feeds).
        let eventsource: ByteBuffer

        init(_ page: ChangesPage) {
            self.page = page
            var lines: [UInt8] = [], events: [UInt8] = []
            for row in page.rows {
                let bytes = row.bytes
                lines += bytes
                lines.append(10)
                events += Array("data: ".utf8) + bytes + Array("\nid: \(row["seq"]?.stringValue ?? "")\n\n".utf8)
            }
            continuous = ByteBuffer(bytes: lines)
            eventsource = ByteBuffer(bytes: events)
        }
    }

    private struct Entry {
        var task: Task<Page, any Error>
        var created: ContinuousClock.Instant
    }
    private let entries = Locked<[String: Entry]>([:])
    static let lifetime = Duration.seconds(1)
    static let capacity = 256

    /// The question a feed asks, without its position: what makes two listeners' pages equal.
    static func question(_ db: Database, _ request: APIRequest) -> String {
        let ignored: Set<String> = ["feed", "since", "heartbeat", "timeout"]
        let query = request.query.filter { !ignored.contains($0.key) }.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        let user = (request.user.name ?? "") + "\u{0}" + request.user.roles.joined(separator: ",")
        return [db.name, db.uuid, query, user, String(decoding: request.body, as: UTF8.self)].joined(separator: "\u{0}")
    }

    /// The changes after `options.since`, shared with every listener asking `question` from the
    /// same position while the database's latest commit is the same.
    func changes(_ db: Database, _ options: ChangesOptions, question: String) async throws -> Page {
        // The latest commit is not part of the key: a page read a moment ago ends at its own
        // last_seq, and a listener continues from there, so it misses nothing.
        let key = "\(question)\u{0}\(options.since)\u{0}\(options.limit ?? -1)"
        let now = ContinuousClock.now
        let task = entries.withLock { entries -> Task<Page, any Error> in
            if let entry = entries[key], now - entry.created < SharedFeedReads.lifetime { return entry.task }
            if entries.count >= SharedFeedReads.capacity {
                entries = entries.filter { now - $0.value.created < SharedFeedReads.lifetime }
                if entries.count >= SharedFeedReads.capacity { entries.removeAll() }
            }
            let task = Task { Page(try await db.changes(options)) }
            entries[key] = Entry(task: task, created: now)
            return task
        }
        return try await task.value
    }
}
