import CouchJSON
import CouchProtocol
public import Foundation
import HTTPTypes
import Logging

/// Cluster mode: purges reach every instance's mirrors.
///
/// Each `lt serve` in front of a cluster keeps its own copies of `lt_places` and the
/// locations database for geo queries, filled by pull replication. A purge (deleting a user
/// purges their locations) does not replicate, so the instance that purges on the cluster also
/// writes a notice into `lt_purges` there (`{"db", "ids", "purged_at"}`), and every instance
/// follows that database's changes and purges the same ids from its copy, keeping its place
/// in the feed in its copy's `_local` documents. Notices are purged themselves after
/// `retention`; an instance whose place is older than that starts its copies afresh (see
/// `mirrorsAreStale`).
extension TrackerService {
    public static let purgesDB = "lt_purges"
    /// How long notices are kept.
    public static let purgeRetention: TimeInterval = 30 * 24 * 3600
    static let purgeCheckpoint = "_local/lt-purges-applied"

    /// Creates `lt_purges` on the cluster (admins only).
    func preparePurgeNotices() async throws {
        _ = try await createDatabase(TrackerService.purgesDB)
        try await expect(
            couch.request(
                .put, "/\(TrackerService.purgesDB)/_security",
                body: [
                    "admins": ["names": [], "roles": ["_admin"]], "members": ["names": [], "roles": ["_admin"]],
                ]), "secure \(TrackerService.purgesDB)")
    }

    /// Writes the notice of a purge, and purges notices past the retention.
    func recordPurge(_ ids: [String], from db: String) async throws {
        let now = (Date().timeIntervalSince1970 * 1000).rounded()
        let notice: JSON = [
            "_id": .string(TrackerService.noticeID(now) + "-" + UUID().uuidString.lowercased()),
            "db": .string(db), "ids": .array(ids.map(JSON.string)), "purged_at": JSON.milliseconds(now),
        ]
        try await expect(
            couch.request(.post, "/\(TrackerService.purgesDB)", body: notice), "record a purge for the other instances")
        let expired = try await couch.request(
            .get, "/\(TrackerService.purgesDB)/_all_docs",
            query: [
                "endkey": JSON.string(TrackerService.noticeID(now - TrackerService.purgeRetention * 1000)).text,
                "limit": "1000",
            ], body: nil)
        let old = (expired.json["rows"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        if !old.isEmpty { _ = try await purge(old, from: TrackerService.purgesDB) }
    }

    /// Notice ids sort by time: milliseconds, zero-padded.
    static func noticeID(_ milliseconds: Double) -> String {
        let digits = String(Int64(max(0, milliseconds)))
        return String(repeating: "0", count: max(0, 15 - digits.count)) + digits
    }

    /// Whether this instance's copy of `db` missed notices that are gone by now: its place in
    /// `lt_purges` is older than the retention. Such a copy is to be started afresh.
    public func mirrorIsStale(_ db: String) async throws -> Bool {
        let checkpoint = try await geo.request(.get, "/\(db)/\(TrackerService.purgeCheckpoint)")
        guard checkpoint.ok, let at = checkpoint.json["applied_at"]?.doubleValue else { return false }
        return Date().timeIntervalSince1970 * 1000 - at > TrackerService.purgeRetention * 1000
    }

    /// Applies the cluster's purge notices to this server's copy of `db`, following
    /// `lt_purges` until cancelled.
    public func followPurges(into db: String) async {
        while !Task.isCancelled {
            do {
                try await applyPurges(into: db)
            } catch is CancellationError {
                return
            } catch {
                logger.warning("following \(TrackerService.purgesDB): \(error); again in 5 s")
                try? await Task.sleep(for: .seconds(5))
            }
        }
    }

    /// One long poll of `lt_purges`: purges from this server's copy of `db` what new notices
    /// for it list, then moves the copy's place in the feed on (and notes when, at least
    /// hourly, for `mirrorIsStale`).
    func applyPurges(into db: String) async throws {
        let path = "/\(db)/\(TrackerService.purgeCheckpoint)"
        let checkpoint = try await geo.request(.get, path)
        let since = checkpoint.ok ? checkpoint.json["since"]?.stringValue ?? "0" : "0"
        let changes = try await couch.request(
            .get, "/\(TrackerService.purgesDB)/_changes",
            query: [
                "feed": "longpoll", "since": since, "include_docs": "true", "timeout": "25000",
            ], body: nil)
        try expect(changes, "follow \(TrackerService.purgesDB)")
        try Task.checkCancellation()
        guard let last = changes.json["last_seq"] else { return }
        for row in changes.json["results"]?.arrayValue ?? [] {
            guard let doc = row["doc"], doc["db"]?.stringValue == db else { continue }
            let purged = try await purge((doc["ids"]?.arrayValue ?? []).compactMap(\.stringValue), from: db, on: geo)
            if purged > 0 {
                logger.info(
                    "purged \(purged) documents from this server's copy of \(db), as \(row["id"]?.stringValue ?? "a notice") says"
                )
            }
        }
        let now = (Date().timeIntervalSince1970 * 1000).rounded()
        let lastText = last.stringValue ?? last.text
        if lastText == since, let at = checkpoint.json["applied_at"]?.doubleValue, now - at < 3_600_000 { return }
        var updated: JSONObject = ["since": .string(lastText), "applied_at": JSON.milliseconds(now)]
        if checkpoint.ok, let rev = checkpoint.json["_rev"] { updated["_rev"] = rev }
        try await expect(
            geo.request(.put, path, body: .object(updated)), "remember the place in \(TrackerService.purgesDB)")
    }
}
