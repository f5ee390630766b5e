import CouchEngine
import CouchJSON
import Foundation
import Hummingbird
import ServiceLifecycle

/// `/{db}/_changes` in all its modes (normal, longpoll, continuous, eventsource), filters and the
/// shared reads of listeners waiting on the same commit.
struct ChangesEndpoints: Sendable {
    let api: CouchAPI

    /// `/{db}/_changes` with every feed type. Waiting feeds sleep on the database's change
    /// notifier, so idle listeners cost no polling.
    func changes(_ db: DocumentDatabase, _ request: APIRequest) async throws -> APIResponse {
        var feed = request.query["feed"] ?? "normal"
        if feed == "live" { feed = "continuous" }  // CouchDB's other name for it
        guard ["normal", "longpoll", "continuous", "eventsource"].contains(feed) else {
            throw CouchError.badRequest("Supported `feed` types: normal, continuous, live, longpoll, eventsource")
        }
        let options = try await changesOptions(db, request)
        let (heartbeat, timeout) = try feedTimes(request)
        if feed == "normal" { return try await normalChanges(db, options) }
        return try await waitingChanges(db, request, options, feed: feed, heartbeat: heartbeat, timeout: timeout)
    }

    /// A waiting feed's `heartbeat` (none, or at least 100 ms) and `timeout` (default 60 s).
    func feedTimes(_ request: APIRequest) throws -> (heartbeat: Duration?, timeout: Duration) {
        var heartbeat: Duration?
        if let raw = request.query["heartbeat"] {
            if raw == "true" {
                heartbeat = .milliseconds(60000)
            } else {
                // CouchDB's two refusals, in its words.
                guard let ms = Int(raw) else {
                    throw CouchError.badRequest(
                        "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
                }
                guard ms > 0 else {
                    throw CouchError.badRequest("The heartbeat value should be a positive integer (in milliseconds).")
                }
                heartbeat = .milliseconds(max(ms, 100))
            }
        }
        return (heartbeat, try request.int("timeout").map { .milliseconds(max($0, 0)) } ?? .milliseconds(60000))
    }

    /// What a `_changes` request asks: its parameters (and a POST body's `doc_ids` or
    /// `selector`), each checked as CouchDB checks it.
    func changesOptions(_ db: DocumentDatabase, _ request: APIRequest) async throws -> ChangesOptions {
        let body = request.method == .post && !request.body.isEmpty ? try request.jsonObject() : nil
        var options = ChangesOptions()
        // `limit=0` answers no rows at once, with every change pending (CouchDB 3).
        options.limit = try request.int("limit")
        options.descending = try request.bool("descending")
        options.includeDocs = try request.bool("include_docs")
        options.read.conflicts = try request.bool("conflicts")
        options.read.attachments = try request.bool("attachments")
        options.read.attEncodingInfo = try request.bool("att_encoding_info")
        switch request.query["style"] ?? "main_only" {
        case "main_only": options.allLeaves = false
        case "all_docs": options.allLeaves = true
        default: throw CouchError.badRequest("Supported `style` values: main_only, all_docs")
        }
        // A browser's EventSource reconnecting names the last event it saw: that wins over `since`.
        let lastEvent = request.query["feed"] == "eventsource" ? request.header("Last-Event-ID") : nil
        if let since = lastEvent ?? request.query["since"] {
            let parsed = since == "now" ? JSON.string("now") : ((try? JSON.parse(since)) ?? .string(since))
            let value = try db.parseSequence(parsed)
            options.since = value < 0 ? try await db.updateSeq() : value
        }
        if options.descending, request.query["since"] == nil { options.since = Int.max }
        switch request.query["filter"] {
        case nil: break
        case "_doc_ids":
            let fromQuery = try request.jsonParam("doc_ids")
            let ids = body?["doc_ids"] ?? fromQuery
            guard case let .array(list)? = ids, list.allSatisfy({ $0.stringValue != nil }) else {
                throw CouchError.badRequest("`doc_ids` filter parameter is not a list of doc ids.")
            }
            options.filter = .docIDs(Set(list.compactMap { $0.stringValue.map { ExactID($0) } }))
        case "_selector":
            guard let selector = body?["selector"] else {
                throw CouchError.badRequest("Selector must be specified in POST payload")
            }
            options.filter = .selector(try Selector(json: selector))
        case "_design":
            options.filter = .design
        case let name?:
            options.filter = .documents(try await api.design.designFilter(db, name, request))
        }
        return options
    }

    /// `feed=normal`: small answers in one piece; large ones streamed in pages, so reading the
    /// whole feed of a big database does not hold it all in memory.
    func normalChanges(_ db: DocumentDatabase, _ options: ChangesOptions) async throws -> APIResponse {
        let pageSize = 5000
        var first = options
        first.limit = min(options.limit ?? pageSize, pageSize)
        // Rows written by the engine where it can (every filter but selectors and functions);
        // otherwise built as values and written here.
        @Sendable func page(_ options: ChangesOptions) async throws -> (rows: [[UInt8]], lastSeq: Int, pending: Int) {
            if let written = try await db.changesSerialized(options) { return written }
            let page = try await db.changes(options)
            return (page.rows.map(\.bytes), page.lastSeq, page.pending)
        }
        let firstPage = try await page(first)
        if firstPage.rows.count < pageSize || options.limit.map({ $0 <= pageSize }) == true {
            // As `.json(changesResult(...))` writes it: {"results":[…],"last_seq":…,"pending":…}.
            var out = Array(#"{"results":["#.utf8)
            out.appendJoined(firstPage.rows)
            out += "],".utf8
            out += JSON.object([
                "last_seq": .string(db.sequenceString(firstPage.lastSeq)), "pending": .int(firstPage.pending),
            ]).bytes.dropFirst()
            out.append(UInt8(ascii: "\n"))
            return .json(bytes: out)
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "must-revalidate"
        let body = ResponseBody { writer in
            let total = options.limit ?? Int.max
            var current = firstPage
            var requested = pageSize
            var sent = 0
            var next = options
            try await writer.write(ByteBuffer(string: "{\"results\":[\n"))
            while true {
                var out: [UInt8] = []
                for row in current.rows {
                    if sent > 0 { out.append(contentsOf: ",\n".utf8) }
                    sent += 1
                    out += row
                }
                try await writer.write(ByteBuffer(bytes: out))
                if current.rows.count < requested || sent >= total { break }
                requested = min(pageSize, total - sent)
                next.since = current.lastSeq
                next.limit = requested
                current = try await page(next)
            }
            // Close the array, then the members of {"last_seq","pending"} without its "{".
            let tail: JSON = [
                "last_seq": .string(db.sequenceString(current.lastSeq)), "pending": .int(current.pending),
            ]
            try await writer.write(
                ByteBuffer(bytes: Array("\n],".utf8) + tail.bytes.dropFirst() + [UInt8(ascii: "\n")]))
            try await writer.finish(nil)
        }
        return APIResponse(status: .ok, headers: headers, body: body)
    }

    /// `longpoll`, `continuous` and `eventsource`: a streamed answer that waits for changes
    /// (up to `timeout`, with `heartbeat` newlines meanwhile), counted against the user's share
    /// of open feeds until it is done with. It ends, sending nothing more, once its user is no
    /// longer who they were or may no longer read the database (`Authenticator.stillValid`):
    /// a revoked API key, a deleted user, a changed password, a role or membership taken away.
    func waitingChanges(
        _ db: DocumentDatabase, _ request: APIRequest, _ options: ChangesOptions, feed: String, heartbeat: Duration?,
        timeout: Duration
    ) async throws -> APIResponse {
        var headers = HTTPFields()
        headers[.contentType] = feed == "eventsource" ? "text/event-stream" : "application/json"
        headers[.cacheControl] = "must-revalidate"
        let slot = try api.feeds.open(for: request)
        let question = SharedFeedReads.question(db, request)
        let stillAllowed = await api.auth.stillValid(request.user) { user in (try? user.authorize(.read, to: db)) != nil
        }
        let stream = ResponseBody { writer in
            withExtendedLifetime(slot) {}
            // On server shutdown, waiting feeds end at once (with a proper last answer) instead
            // of holding the shutdown up until their timeout.
            let stopping = Locked(false)
            try await withGracefulShutdownHandler {
                try await self.streamChanges(
                    db, options: options, question: question, feed: feed, heartbeat: heartbeat, timeout: timeout,
                    stopping: { stopping.withLock { $0 } }, stillAllowed: stillAllowed, writer: &writer)
            } onGracefulShutdown: {
                stopping.withLock { $0 = true }
                db.notifier.wakeAll()
            }
            try await writer.finish(nil)
        }
        return APIResponse(status: .ok, headers: headers, body: stream)
    }

    /// A plain `_changes` read by a server admin (the consolidator) answered from the store's
    /// record of recent changes (`RecentChanges`) without opening the database; nil when that
    /// record does not cover it, or the request asks for anything else (other feeds, filters,
    /// options), which the database answers.
    func recentChanges(_ name: String, _ request: APIRequest) -> APIResponse? {
        let understood: Set<String> = ["since", "limit", "style", "include_docs", "feed"]
        guard request.user.isServerAdmin, request.method == .get, request.query.keys.allSatisfy(understood.contains),
            request.query["feed"] ?? "normal" == "normal"
        else { return nil }
        var since = 0
        if let raw = request.query["since"] {
            guard let parsed = try? DocumentDatabase.parseSequence((try? JSON.parse(raw)) ?? .string(raw)), parsed >= 0
            else { return nil }
            since = parsed
        }
        let limit: Int?, includeDocs: Bool
        do {
            limit = try request.int("limit")
            if limit == 0 { return nil }  // the database answers it (no rows, all pending)
            includeDocs = try request.bool("include_docs")
        } catch {
            return nil  // the database's answer has the error
        }
        let allLeaves: Bool
        switch request.query["style"] ?? "main_only" {
        case "main_only": allLeaves = false
        case "all_docs": allLeaves = true
        default: return nil
        }
        guard
            let page = api.store.recentChanges.page(
                name, since: since, limit: limit, includeDocs: includeDocs, allLeaves: allLeaves)
        else { return nil }
        return .json(changesResult(rows: page.rows, lastSeq: page.lastSeq, pending: page.pending))
    }

    func changesResult(_ db: DocumentDatabase, _ page: ChangesPage) -> JSON {
        changesResult(rows: page.rows, lastSeq: db.sequenceString(page.lastSeq), pending: page.pending)
    }

    func changesResult(rows: [JSON], lastSeq: String, pending: Int) -> JSON {
        ["results": .array(rows), "last_seq": .string(lastSeq), "pending": .int(pending)]
    }

    /// Runs a longpoll, continuous or eventsource feed until its limit, timeout, the client
    /// going away or `stillAllowed` saying no (asked before anything is sent). Heartbeats are
    /// newlines (continuous, longpoll) or heartbeat events.
    func streamChanges(
        _ db: DocumentDatabase, options: ChangesOptions, question: String, feed: String, heartbeat: Duration?,
        timeout: Duration,
        stopping: @Sendable () -> Bool, stillAllowed: @Sendable () async -> Bool, writer: inout any ResponseBodyWriter
    ) async throws {
        var options = options
        var remaining = options.limit ?? Int.max
        let clock = ContinuousClock()
        var idleSince = clock.now
        // A filtered feed is woken only by changes that pass its filter (its question's watcher
        // reads each commit once for all of them); an unfiltered one by every commit.
        let watcher =
            options.filter == nil || options.descending
            ? nil : api.sharedReads.watcher(db, options, question: question, since: options.since)
        defer { if let watcher { api.sharedReads.leave(watcher, question: question) } }
        while true {
            options.limit = remaining == Int.max ? nil : remaining
            // Listeners asking the same question from the same position share one read.
            let shared = try await api.sharedReads.changes(db, options, question: question)
            let page = shared.page
            // Whoever lost the right to read gets nothing more (revoked mid-feed).
            if !page.rows.isEmpty, await !stillAllowed() { return }
            if feed == "longpoll" {
                if !page.rows.isEmpty || remaining == 0 || clock.now - idleSince >= timeout || stopping() {
                    try await writer.write(ByteBuffer(bytes: changesResult(db, page).bytes + [10]))
                    return
                }
            } else if !page.rows.isEmpty {
                // Serialized once for every listener that shares the page.
                try await writer.write(feed == "eventsource" ? shared.eventsource : shared.continuous)
                remaining -= min(remaining, page.rows.count)
                idleSince = clock.now
            }
            options.since = page.lastSeq
            if remaining == 0 || options.descending || stopping() {
                if feed == "continuous" {
                    try await writer.write(
                        ByteBuffer(
                            bytes: JSON.object(["last_seq": .string(db.sequenceString(page.lastSeq))]).bytes + [10]))
                }
                return
            }
            // Wait for the next commit, a heartbeat, or the end of the timeout.
            let untilTimeout = timeout - (clock.now - idleSince)
            if heartbeat == nil, untilTimeout <= .zero {
                if feed == "continuous" {
                    try await writer.write(
                        ByteBuffer(
                            bytes: JSON.object(["last_seq": .string(db.sequenceString(page.lastSeq))]).bytes + [10]))
                }
                return
            }
            let wait = heartbeat.map { min($0, heartbeat == nil ? untilTimeout : $0) } ?? untilTimeout
            let changed: Bool
            if let watcher, page.lastSeq >= watcher.start {
                changed = await watcher.notifier.wait(after: page.lastSeq, timeout: wait)
            } else {
                changed = await db.notifier.wait(after: page.lastSeq, timeout: wait)
            }
            if Task.isCancelled { return }
            if !changed, heartbeat != nil, !stopping() {
                if await !stillAllowed() { return }
                if feed == "eventsource" {
                    try await writer.write(ByteBuffer(bytes: Array("event: heartbeat\ndata: \n\n".utf8)))
                } else {
                    try await writer.write(ByteBuffer(bytes: [10]))
                }
            }
        }
    }
}
