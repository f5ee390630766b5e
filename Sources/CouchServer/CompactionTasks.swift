import CouchEngine
import CouchJSON
import Foundation

/// Compactions running in the background (`POST /{db}/_compact`, and `/{db}/_compact/{ddoc}`
/// for a design document's views, which live in the database's file): at most one per
/// database, listed in `_active_tasks` with their progress as CouchDB lists them, and behind
/// `compact_running` in `GET /{db}` and the design document's `_info`.
final class CompactionTasks: Sendable {
    private struct Task {
        /// The design document whose views are compacted; nil for the database.
        let design: String?
        let started: Date
        var updated: Date
        var done = 0
        var total = 0
    }

    private let running = Locked<[String: Task]>([:])

    /// Marks `name` as compacting (the views of `design`, or the database); false when it
    /// already is.
    func start(_ name: String, design: String? = nil) -> Bool {
        running.withLock { running in
            guard running[name] == nil else { return false }
            running[name] = Task(design: design, started: Date(), updated: Date())
            return true
        }
    }

    func update(_ name: String, done: Int, total: Int) {
        running.withLock { running in
            running[name]?.done = done
            running[name]?.total = total
            running[name]?.updated = Date()
        }
    }

    func finish(_ name: String) {
        _ = running.withLock { $0.removeValue(forKey: name) }
    }

    /// How many compactions run now.
    var count: Int { running.withLock { $0.count } }
    func isRunning(_ name: String) -> Bool { running.withLock { $0[name] != nil } }

    /// `_active_tasks` rows, as CouchDB's `database_compaction` tasks.
    func activeTasks() -> [JSON] {
        running.withLock { $0 }.sorted { $0.key < $1.key }.map { name, task in
            var row: JSONObject = [
                "type": task.design == nil ? "database_compaction" : "view_compaction", "database": .string(name),
                "node": "lt@localhost",
                "pid": .string("compaction:\(name)"), "phase": task.design == nil ? "document_copy" : "view",
                "changes_done": .int(task.done), "total_changes": .int(task.total),
                "progress": .int(task.total == 0 ? 0 : task.done * 100 / task.total),
                "started_on": .int(Int(task.started.timeIntervalSince1970)),
                "updated_on": .int(Int(task.updated.timeIntervalSince1970)),
            ]
            if let design = task.design { row["design_document"] = .string(design) }
            return .object(row)
        }
    }
}

extension CouchAPI {
    /// `GET /{db}`'s object: the engine's, with `compact_running` from the running compactions.
    func info(_ db: DocumentDatabase) async throws -> JSONObject {
        var info = try await db.info()
        info["compact_running"] = .bool(compactions.isRunning(db.name))
        return info
    }
}
