import CouchJSON
import Foundation
import HTTPTypes
import Logging

/// Copies every location written to any user's database into `lt_locations_all` (same id, same
/// revision), with one consumer for all users instead of one continuous replication each (the
/// original's design, which does not scale to many users). It follows `_db_updates` to learn
/// which user databases changed and then copies just their new changes: `_changes` since a
/// checkpoint, `_bulk_get` of the new revisions with their history, `_bulk_docs` with
/// `new_edits=false` into `lt_locations_all`, then the checkpoint (a `_local` document in
/// `lt_locations_all`). On start it looks at every user database once, which also covers
/// whatever changed while it was not running. Only CouchDB API calls: it works the same
/// against Apache CouchDB.
public final class Consolidator: Sendable {
    let couch: any CouchClient
    let logger: Logger
    static let prefix = "lt_locations_user_"

    public init(couch: any CouchClient, logger: Logger = Logger(label: "lt.consolidator")) {
        self.couch = couch
        self.logger = logger
    }

    /// Runs until cancelled.
    public func run() async {
        var since = "now"
        // Take the feed's position first, so nothing written during the sweep is missed.
        if let reply = try? await couch.request(.get, "/_db_updates", query: ["since": "now"], body: nil), reply.ok {
            since = reply.json["last_seq"]?.stringValue ?? "now"
        }
        await sweep()
        while !Task.isCancelled {
            do {
                let reply = try await couch.request(.get, "/_db_updates", query: ["feed": "longpoll", "since": since, "timeout": "10000"], body: nil)
                guard reply.ok else { throw ConsolidationError("_db_updates answered \(reply.status)") }
                let json = reply.json
                let names = Set((json["results"]?.arrayValue ?? []).compactMap { row -> String? in
                    guard let name = row["db_name"]?.stringValue, name.hasPrefix(Consolidator.prefix), row["type"] != "deleted" else { return nil }
                    return name
                })
                await consolidate(names.sorted())
                since = json["last_seq"]?.stringValue ?? since
            } catch {
                logger.warning("consolidation: \(error); retrying")
                try? await Task.sleep(for: .seconds(2))
            }
        }
    }

    /// Looks at every user database once.
    func sweep() async {
        guard let reply = try? await couch.request(.get, "/_all_dbs", query: [:], body: nil), reply.ok else {
            logger.error("consolidation: cannot list databases")
            return
        }
        await consolidate((reply.json.arrayValue ?? []).compactMap(\.stringValue).filter { $0.hasPrefix(Consolidator.prefix) })
    }

    /// How many user databases are copied at the same time.
    static let parallelism = 8

    /// Copies several databases' changes, `parallelism` at a time.
    func consolidate(_ names: [String]) async {
        await withTaskGroup(of: Void.self) { group in
            var next = names.makeIterator()
            for _ in 0..<Consolidator.parallelism {
                guard let name = next.next() else { break }
                group.addTask { await self.consolidate(name) }
            }
            while await group.next() != nil {
                if let name = next.next() { group.addTask { await self.consolidate(name) } }
            }
        }
    }

    /// Copies a user database's changes since its checkpoint; errors are logged and the next
    /// update of that database tries again from the same checkpoint.
    func consolidate(_ db: String) async {
        do { try await copyChanges(db) } catch { logger.warning("consolidation of \(db): \(error)") }
    }

    func copyChanges(_ db: String) async throws {
        let all = TrackerService.allLocationsDB
        let checkpointID = "_local/consolidated-\(db)"
        let checkpoint = try await couch.request(.get, "/\(all)/\(checkpointID)")
        var since = checkpoint.ok ? checkpoint.json["seq"]?.stringValue ?? "0" : "0"
        var checkpointRev = checkpoint.ok ? checkpoint.json["_rev"]?.stringValue : nil
        while true {
            let changes = try await couch.request(.get, "/\(db)/_changes", query: ["since": since, "style": "all_docs", "limit": "500"], body: nil)
            if changes.status == 404 { return }  // deleted meanwhile
            guard changes.ok else { throw ConsolidationError("\(db)/_changes answered \(changes.status)") }
            let rows = changes.json["results"]?.arrayValue ?? []
            guard let last = changes.json["last_seq"]?.stringValue else { return }
            // A checkpoint of an earlier database of the same name (deleted and created again)
            // does not apply: this server's sequences end in a 12-hex-digit tag of the database,
            // and a different tag means another database. Start over. (Apache CouchDB's
            // sequences are opaque and change shape with every update; they are left alone.)
            if since != "0", let tag = Consolidator.databaseTag(last), let old = Consolidator.databaseTag(since), old != tag {
                since = "0"
                continue
            }
            var wanted: [JSON] = []
            for row in rows {
                guard let id = row["id"]?.stringValue, !id.hasPrefix("_design/") else { continue }
                for change in row["changes"]?.arrayValue ?? [] {
                    if let rev = change["rev"] { wanted.append(["id": .string(id), "rev": rev]) }
                }
            }
            if !wanted.isEmpty {
                let fetched = try await couch.request(.post, "/\(db)/_bulk_get", query: ["revs": "true", "attachments": "true"], body: ["docs": .array(wanted)])
                guard fetched.ok else { throw ConsolidationError("\(db)/_bulk_get answered \(fetched.status)") }
                var docs: [JSON] = []
                for result in fetched.json["results"]?.arrayValue ?? [] {
                    for item in result["docs"]?.arrayValue ?? [] { if let doc = item["ok"] { docs.append(doc) } }
                }
                let written = try await couch.request(.post, "/\(all)/_bulk_docs", body: ["docs": .array(docs), "new_edits": false])
                guard written.ok else { throw ConsolidationError("\(all)/_bulk_docs answered \(written.status)") }
            }
            if rows.isEmpty && last == since { return }
            var body: JSONObject = ["seq": .string(last)]
            if let checkpointRev { body["_rev"] = .string(checkpointRev) }
            let saved = try await couch.request(.put, "/\(all)/\(checkpointID)", body: .object(body))
            guard saved.ok else { throw ConsolidationError("saving the checkpoint of \(db) answered \(saved.status)") }
            checkpointRev = saved.json["rev"]?.stringValue
            since = last
            if rows.count < 500 { return }
        }
    }
}

extension Consolidator {
    /// The database tag of one of this server's sequence strings (`N-<12 hex digits>`).
    static func databaseTag(_ seq: String) -> Substring? {
        let parts = seq.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, parts[1].count == 12, parts[1].allSatisfy(\.isHexDigit) else { return nil }
        return parts[1]
    }
}

struct ConsolidationError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
