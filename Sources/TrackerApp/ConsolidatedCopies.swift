import CouchJSON
import CouchProtocol
import HTTPTypes
import Logging

/// `lt_locations_all` keeps every user's copies under `<user>:<id>` (`Consolidator.copy`), so
/// that no user's ids, revisions or claims reach another's copies. Before that (up to issue 40)
/// it kept them under the ids their users gave them, and one user could replace or delete
/// another's. A database of that time is brought over once, when the server starts.
extension TrackerService {
    /// The `_local` document of `lt_locations_all` saying its copies are kept by owner.
    static let copiesByOwnerID = "_local/lt-copies-by-owner"
    /// Where a legacy copy that says nothing of its owner is kept.
    static let unownedNamespace = OwnerNamespace(owner: "~unowned")!

    /// Brings a `lt_locations_all` from before copies were kept by owner to that form, once
    /// (nothing to do on a new one): every consolidation checkpoint goes, so every user's
    /// database is copied again under their namespace; then each copy of the old form goes
    /// where it belongs — purged when the user it names has a database (their own copies come
    /// back from it; one it does not hold was written under their name by someone else, and
    /// comes back from that writer's database as the writer's), kept under the name it carries
    /// when that user is gone (a deleted user's locations, kept for analysts), or under
    /// `~unowned:` when it names no one. Safe to stop and run again.
    func upgradeConsolidatedCopies() async throws {
        let all = TrackerService.allLocationsDB
        if try await couch.request(.get, "/\(all)/\(TrackerService.copiesByOwnerID)").ok { return }
        let checkpoints = try await couch.request(
            .get, "/\(all)/_local_docs",
            query: [
                "startkey": JSON.string(Consolidator.checkpointPrefix).text,
                "endkey": JSON.string(Consolidator.checkpointPrefix + "\u{FFF0}").text,
            ], body: nil)
        try expect(checkpoints, "read the consolidation checkpoints")
        let forgotten: [JSON] = (checkpoints.json["rows"]?.arrayValue ?? []).compactMap { row in
            guard let id = row["id"], let rev = row["value"]?["rev"] else { return nil }
            return ["_id": id, "_rev": rev, "_deleted": true]
        }
        if !forgotten.isEmpty {
            try await expect(
                couch.request(.post, "/\(all)/_bulk_docs", body: ["docs": .array(forgotten)]),
                "forget the consolidation checkpoints")
        }
        var tally = (pages: 0, copies: 0, recopied: 0, dropped: 0, kept: 0, unowned: 0)
        var last: String?
        while true {
            var query = ["include_docs": "true", "conflicts": "true", "limit": "1000"]
            if let last { query["startkey"] = JSON.string(last).text }
            let reply = try await couch.request(.get, "/\(all)/_all_docs", query: query, body: nil)
            try expect(reply, "read \(all)")
            // From the last id seen, itself left out: it may have been purged meanwhile.
            let rows = (reply.json["rows"]?.arrayValue ?? []).filter { $0["id"]?.stringValue != last }
            guard let end = rows.last?["id"]?.stringValue else { break }
            let legacy = rows.compactMap { row -> JSON? in
                guard let doc = row["doc"], let id = doc["_id"]?.stringValue, !id.hasPrefix("_design/"),
                    !TrackerService.isKeyedCopy(doc)
                else { return nil }
                return doc
            }
            let moved = try await upgrade(legacy)
            tally.pages += 1
            tally.copies += legacy.count
            tally.recopied += moved.recopied
            tally.dropped += moved.dropped
            tally.kept += moved.kept
            tally.unowned += moved.unowned
            if tally.pages.isMultiple(of: 20) {
                logger.notice("upgrading \(all) to copies kept by owner: \(tally.copies) old copies seen so far")
            }
            last = end
        }
        try await expect(
            couch.request(.put, "/\(all)/\(TrackerService.copiesByOwnerID)", body: ["since": JSON.millisecondsNow()]),
            "mark \(all) as kept by owner")
        if tally.copies > 0 || !forgotten.isEmpty {
            logger.notice(
                """
                upgraded \(all) to copies kept by owner (<user>:<id>): \(tally.recopied) old copies will be copied again from their \
                users' databases (\(forgotten.count) databases); \(tally.dropped) named a user whose database does not hold them \
                (written by another user under that name; they come back from the writer's database as the writer's); \
                \(tally.kept) of deleted users kept under the name they carry; \(tally.unowned) under ~unowned: (they name no user)
                """)
        }
    }

    /// Whether a document of `lt_locations_all` is a copy of this form: its id under a user's
    /// namespace (or `~unowned:`), and naming no other user.
    static func isKeyedCopy(_ doc: JSON) -> Bool {
        guard let id = doc["_id"]?.stringValue, let owner = OwnerNamespace.owner(ofStored: id) else { return false }
        if owner == TrackerService.unownedNamespace.owner { return true }
        guard (try? TrackerService.validate(username: owner)) != nil else { return false }
        let named = doc["properties"]?["username"]
        return named == nil || named?.stringValue == owner
    }

    /// Moves one page of old copies: purged where their owner's database holds them, the rest
    /// written under the owner they name (with their history and attachments) and then purged.
    func upgrade(_ legacy: [JSON]) async throws -> (recopied: Int, dropped: Int, kept: Int, unowned: Int) {
        var byOwner: [String: [JSON]] = [:]
        var unowned: [JSON] = []
        for doc in legacy {
            if let name = doc["properties"]?["username"]?.stringValue,
                (try? TrackerService.validate(username: name)) != nil
            {
                byOwner[name, default: []].append(doc)
            } else {
                unowned.append(doc)
            }
        }
        var purge: [String] = []
        var recopied = 0, dropped = 0
        var rekey: [(doc: JSON, namespace: OwnerNamespace)] = unowned.map { ($0, TrackerService.unownedNamespace) }
        for (owner, docs) in byOwner {
            let keys = docs.compactMap { $0["_id"] }
            let found = try await couch.request(
                .post, "/\(TrackerService.locationDB(for: owner))/_all_docs", body: ["keys": .array(keys)])
            if found.status == 404 {
                // A user deleted with their locations kept: nothing to check them against.
                let namespace = try TrackerService.namespace(of: owner)
                rekey += docs.map { ($0, namespace) }
                continue
            }
            guard found.ok else { throw failure(found, "look for \(owner)'s locations") }
            // Users cannot purge their own documents, so every copy that is theirs has its id
            // in their database (a deletion too). Those come back from there; a copy their
            // database does not hold is not theirs (another user wrote it under their name, and
            // it comes back from that user's database under that user's).
            let held = Set(
                (found.json["rows"]?.arrayValue ?? []).compactMap { row in
                    row["value"] != nil ? row["id"]?.stringValue : nil
                })
            for doc in docs {
                guard let id = doc["_id"]?.stringValue else { continue }
                purge.append(id)
                if held.contains(id) { recopied += 1 } else { dropped += 1 }
            }
        }
        purge += try await rewrite(rekey)
        if !purge.isEmpty { _ = try await purgeEverywhere(purge, from: TrackerService.allLocationsDB) }
        let unownedMoved = rekey.filter { $0.namespace == TrackerService.unownedNamespace }.count
        return (recopied, dropped, rekey.count - unownedMoved, unownedMoved)
    }

    /// Writes old copies under their new ids, every leaf with its history and attachments;
    /// the old ids that were written (to be purged).
    func rewrite(_ docs: [(doc: JSON, namespace: OwnerNamespace)]) async throws -> [String] {
        guard !docs.isEmpty else { return [] }
        let all = TrackerService.allLocationsDB
        var wanted: [JSON] = []
        var namespaces: [String: OwnerNamespace] = [:]
        var oldIDs: [String: String] = [:]  // new id -> old id
        for (doc, namespace) in docs {
            guard let id = doc["_id"]?.stringValue, let rev = doc["_rev"] else { continue }
            namespaces[id] = namespace
            oldIDs[namespace.stored(id)] = id
            for leaf in [rev] + (doc["_conflicts"]?.arrayValue ?? []) {
                wanted.append(["id": .string(id), "rev": leaf])
            }
        }
        let fetched = try await couch.request(
            .post, "/\(all)/_bulk_get", query: ["revs": "true", "attachments": "true"], body: ["docs": .array(wanted)])
        try expect(fetched, "read old copies in \(all)")
        var copies: [JSON] = []
        for result in fetched.json["results"]?.arrayValue ?? [] {
            for item in result["docs"]?.arrayValue ?? [] {
                guard let doc = item["ok"], let id = doc["_id"]?.stringValue, let namespace = namespaces[id],
                    let copy = Consolidator.copy(
                        of: doc, in: namespace, naming: namespace != TrackerService.unownedNamespace)
                else { continue }
                copies.append(copy)
            }
        }
        let written = try await couch.request(
            .post, "/\(all)/_bulk_docs", body: ["docs": .array(copies), "new_edits": false])
        try expect(written, "write copies by owner in \(all)")
        let failed = Set(
            (written.json.arrayValue ?? []).compactMap { row in
                row["error"] != nil ? row["id"]?.stringValue.flatMap { oldIDs[$0] } : nil
            })
        for id in failed {
            logger.warning(
                "upgrading \(all): the old copy \(id) could not be written under its owner; it stays as it is")
        }
        return namespaces.keys.filter { !failed.contains($0) }
    }
}
