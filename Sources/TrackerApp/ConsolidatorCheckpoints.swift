import CouchJSON
import CouchProtocol
import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers

/// Saving the consolidator's checkpoints, beside the rounds.
///
/// A round moves each copied database's checkpoint in memory as soon as its locations are in
/// `lt_locations_all`, and the next round reads from there. This lane writes the moved
/// checkpoints (`_local/consolidated-<database>` in `lt_locations_all`) in one `_bulk_docs`,
/// at most once every `checkpointSaveInterval`: a round no longer waits for a second commit
/// (on a loaded CouchDB cluster that was a third of a round's time), and a steady stream of
/// writes makes one checkpoint commit a second instead of one per round. What a stop loses is
/// at most the last second's checkpoints: those locations are copied again after the restart,
/// with the same revisions, which changes nothing in `lt_locations_all`.
extension Consolidator {
    /// The shortest time between two saves of the checkpoints.
    static let checkpointSaveInterval = Duration.seconds(1)

    /// The lane that saves checkpoints, until cancelled: after each save it waits for the next
    /// round to move one, and at least `checkpointSaveInterval`; a save that fails is tried
    /// again after a wait that doubles up to `longestRetry`.
    func saveCheckpoints() async {
        for await _ in saveSignals {
            var wait = Consolidator.firstRetry
            while !Task.isCancelled {
                do {
                    try await saveMovedCheckpoints()
                    break
                } catch {
                    logger.warning("consolidation: saving checkpoints: \(error); trying again in \(wait)")
                    try? await Task.sleep(for: wait)
                    wait = min(Consolidator.longestRetry, wait * 2)
                }
            }
            try? await Task.sleep(for: Consolidator.checkpointSaveInterval)
        }
    }

    /// Writes every checkpoint moved since its last save. A checkpoint that could not be written
    /// because the document changed behind this consolidator's back (another instance saved it,
    /// or the user was deleted and registered again) is read afresh and taken as it is there.
    func saveMovedCheckpoints() async throws {
        let names = unsaved.withLockedValue { unsaved -> [String] in
            defer { unsaved.removeAll() }
            return unsaved.sorted()
        }
        let saving: [(db: String, seq: String, rev: String?)] = checkpoints.withLockedValue { checkpoints in
            names.compactMap { name in checkpoints[name].map { (name, $0.seq, $0.rev) } }
        }
        guard !saving.isEmpty else { return }
        let all = TrackerService.allLocationsDB
        let docs: [JSON] = saving.map { item in
            var doc: JSONObject = ["_id": .string(Consolidator.checkpointPrefix + item.db), "seq": .string(item.seq)]
            if let rev = item.rev { doc["_rev"] = .string(rev) }
            return .object(doc)
        }
        let results: [JSON]
        do {
            let saved = try await couch.request(.post, "/\(all)/_bulk_docs", body: ["docs": .array(docs)])
            try saved.requireOK()
            results = saved.json.arrayValue ?? []
        } catch {
            unsaved.withLockedValue { $0.formUnion(names) }
            throw error
        }
        for (item, result) in zip(saving, results) {
            if let rev = result["rev"]?.stringValue, result["error"] == nil {
                // Only the revision: a round may have moved the sequence meanwhile (and put the
                // database back among the unsaved).
                checkpoints.withLockedValue { $0[item.db]?.rev = rev }
            } else {
                let current = try? await couch.request(.get, "/\(all)/\(Consolidator.checkpointPrefix)\(item.db)")
                let fresh = current.flatMap {
                    $0.ok ? Checkpoint(seq: $0.json["seq"]?.stringValue ?? "0", rev: $0.json["_rev"]?.stringValue) : nil
                }
                checkpoints.withLockedValue { $0[item.db] = fresh }
            }
        }
    }
}
