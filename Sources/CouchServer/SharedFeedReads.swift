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
/// (a filter's `req.userCtx`), same position, same latest commit — get that page. Answers are
/// kept a second at most and 256 at once.
///
/// A filter that reads `req.headers` or `req.peer` is assumed to answer the same for two
/// requests that differ only there (listeners of one app send the same headers).
final class SharedFeedReads: Sendable {
    /// A page as every listener sharing it writes it: serialized once.
    struct Page: Sendable {
        let page: ChangesPage
        /// Each row as JSON.
        let rows: [[UInt8]]
        /// One JSON line per row (continuous feeds).
        let continuous: ByteBuffer

        init(_ page: ChangesPage) {
            self.page = page
            rows = page.rows.map(\.bytes)
            continuous = ByteBuffer(bytes: rows.flatMap { $0 + [10] })
        }

        /// One `data:`/`id:` event per row (eventsource feeds, few: made when asked for).
        var eventsource: ByteBuffer {
            var events: [UInt8] = []
            for (row, bytes) in zip(page.rows, rows) {
                events += Array("data: ".utf8) + bytes + Array("\nid: \(row["seq"]?.stringValue ?? "")\n\n".utf8)
            }
            return ByteBuffer(bytes: events)
        }
    }

    private struct Entry {
        var task: Task<Page, any Error>
        var created: ContinuousClock.Instant
    }
    private let entries = Locked<[String: Entry]>([:])
    /// Watchers of filtered feeds' questions (`FeedWatcher`).
    let watchers = Locked<[String: FeedWatcher]>([:])
    static let lifetime = Duration.seconds(1)
    static let capacity = 256

    /// The question a feed asks, without its position: what makes two listeners' pages equal.
    static func question(_ db: DocumentDatabase, _ request: APIRequest) -> String {
        let ignored: Set<String> = ["feed", "since", "heartbeat", "timeout"]
        let query = request.query.filter { !ignored.contains($0.key) }.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        let user = (request.user.name ?? "") + "\u{0}" + request.user.roles.joined(separator: ",")
        return [db.name, db.uuid, query, user, String(decoding: request.body, as: UTF8.self)].joined(separator: "\u{0}")
    }

    /// The changes after `options.since`, shared with every listener asking `question` from the
    /// same position while the database's latest commit is the same.
    func changes(_ db: DocumentDatabase, _ options: ChangesOptions, question: String) async throws -> Page {
        // The latest commit is part of the key. Without it, a listener woken by a commit was
        // given the page read before that commit (empty), found the commit still ahead of it,
        // and asked again at once, spinning on that page until it expired: changes were seen up
        // to a second late, at the cost of a busy loop (`lt-bench compare`'s longpoll p99).
        let key = "\(question)\u{0}\(options.since)\u{0}\(options.limit ?? -1)\u{0}\(db.notifier.latest)"
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

/// Filtered feeds wait on a watcher of their question instead of on every commit: the watcher
/// reads each commit once (through `SharedFeedReads`) and publishes the sequence of the last
/// change that passed the filter, so a listener whose filter matches nothing of a commit is not
/// woken by it. One watcher per question while any feed asks it; it starts where the first one
/// stood.
final class FeedWatcher: Sendable {
    /// Publishes the sequence of the latest change that passed the filter.
    let notifier = ChangeNotifier()
    /// Where the watcher began reading: a feed that stands before it waits on the database itself
    /// (the watcher has not seen what lies between).
    let start: Int
    fileprivate let task = Locked<Task<Void, Never>?>(nil)
    fileprivate let listeners = Locked(0)

    fileprivate init(start: Int) {
        self.start = start
    }

    /// Reads each commit after `start` until cancelled.
    fileprivate func run(
        _ db: DocumentDatabase, _ options: ChangesOptions, question: String, reads: SharedFeedReads
    ) async {
        var position = start
        var options = options
        options.limit = nil
        while !Task.isCancelled {
            guard await db.notifier.wait(after: position, timeout: .seconds(60)) else {
                // A timeout, or the database going away or the server stopping: let every
                // listener look for itself.
                if !Task.isCancelled { notifier.wakeAll() }
                continue
            }
            do {
                options.since = position
                let page = try await reads.changes(db, options, question: question).page
                if let seq = page.rows.last?["seq"], let matched = try? db.parseSequence(seq) {
                    notifier.publish(seq: matched)
                }
                position = max(position, page.lastSeq)
            } catch {
                notifier.wakeAll()
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}

extension SharedFeedReads {
    /// The watcher of `question` (made and started if none runs), counted until `leave`.
    func watcher(_ db: DocumentDatabase, _ options: ChangesOptions, question: String, since: Int) -> FeedWatcher {
        let (watcher, isNew) = watchers.withLock { watchers -> (FeedWatcher, Bool) in
            if let existing = watchers[question] {
                existing.listeners.withLock { $0 += 1 }
                return (existing, false)
            }
            let watcher = FeedWatcher(start: since)
            watcher.listeners.withLock { $0 = 1 }
            watchers[question] = watcher
            return (watcher, true)
        }
        if isNew {
            let task = Task { [self] in await watcher.run(db, options, question: question, reads: self) }
            watcher.task.withLock { $0 = task }
        }
        return watcher
    }

    /// A feed stops asking: the last one stops the watcher.
    func leave(_ watcher: FeedWatcher, question: String) {
        let last = watchers.withLock { watchers -> Bool in
            let left = watcher.listeners.withLock { count -> Int in
                count -= 1
                return count
            }
            guard left == 0 else { return false }
            if watchers[question] === watcher { watchers.removeValue(forKey: question) }
            return true
        }
        if last { watcher.task.withLock { $0?.cancel() } }
    }
}
