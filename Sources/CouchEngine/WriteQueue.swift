import GRDB
import Metrics

/// Group commit: writes submitted while a transaction is running are gathered and committed
/// together in the next transaction, each in its own savepoint. Many concurrent writers then
/// share one fsync instead of paying one each, and a failing write rolls back only itself.
///
/// A write's caller resumes only after its transaction commits, so an acknowledged write is
/// on disk (in the WAL) before the client hears about it.
final class WriteQueue: Sendable {
    /// Counters a transaction updates; loaded at its start and stored at its end.
    final class Context {
        var seq: Int
        var docCount: Int
        var delCount: Int
        var purgeSeq: Int
        /// Bytes the live documents keep (`RevisionStore.liveSize`): `sizes` in the database's info.
        var liveBytes: Int
        /// Whether to list each document's change in `changes` (for `RecentChanges`).
        let listsChanges: Bool
        /// The documents' changes, one per sequence step, when `listsChanges`.
        var changes: [RecentChanges.Change] = []
        /// False once a write changed documents in a way `changes` does not show (a purge).
        var changesComplete = true
        init(seq: Int, docCount: Int, delCount: Int, purgeSeq: Int, liveBytes: Int, listsChanges: Bool) {
            self.listsChanges = listsChanges
            self.liveBytes = liveBytes
            self.seq = seq
            self.docCount = docCount
            self.delCount = delCount
            self.purgeSeq = purgeSeq
        }
    }

    /// Resumes the writer after the commit.
    private typealias Finish = @Sendable () -> Void

    private struct Item: Sendable {
        /// Runs the write inside the group transaction; returns how to resume its caller.
        let run: @Sendable (GRDB.Database, Context) -> Finish
        /// Resumes the caller with the error when the group transaction fails.
        let fail: @Sendable (any Error) -> Void
    }

    private struct State {
        var pending: [Item] = []
        var draining = false
    }

    private let pool: any DatabaseWriter
    private let state = Locked(State())
    /// Called after each commit, before any writer resumes, with the new update sequence.
    private let onCommit: @Sendable (Int) -> Void
    /// Called after each commit, before any writer resumes, with the sequences before and
    /// after it, the documents' changes and whether they are all of them; nil: changes are
    /// not listed.
    typealias ChangesListener =
        @Sendable (_ before: Int, _ after: Int, _ changes: [RecentChanges.Change], _ complete: Bool) -> Void
    private let onChanges: ChangesListener?
    private let metrics: EngineMetrics

    init(
        pool: any DatabaseWriter, metrics: EngineMetrics, onChanges: ChangesListener? = nil,
        onCommit: @escaping @Sendable (Int) -> Void
    ) {
        self.pool = pool
        self.metrics = metrics
        self.onChanges = onChanges
        self.onCommit = onCommit
    }

    /// Runs `work` in a savepoint of the next group transaction and returns its result once
    /// that transaction has committed. If `work` throws, only its own changes roll back.
    func write<T: Sendable>(_ work: @escaping @Sendable (GRDB.Database, Context) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let run: @Sendable (GRDB.Database, Context) -> Finish = { db, context in
                let before = (context.seq, context.docCount, context.delCount, context.purgeSeq, context.liveBytes)
                let listed = (context.changes.count, context.changesComplete)
                do {
                    var value: T?
                    try db.inSavepoint {
                        value = try work(db, context)
                        return .commit
                    }
                    let result = value!
                    return { continuation.resume(returning: result) }
                } catch {
                    (context.seq, context.docCount, context.delCount, context.purgeSeq, context.liveBytes) = before
                    context.changes.removeLast(context.changes.count - listed.0)
                    context.changesComplete = listed.1
                    return { continuation.resume(throwing: error) }
                }
            }
            let item = Item(run: run, fail: { continuation.resume(throwing: $0) })
            metrics.queued.increment()
            let startDrain = state.withLock { state -> Bool in
                state.pending.append(item)
                if state.draining { return false }
                state.draining = true
                return true
            }
            if startDrain {
                Task { await self.drain() }
            }
        }
    }

    private func drain() async {
        while true {
            let batch = state.withLock { state -> [Item] in
                let batch = state.pending
                state.pending.removeAll()
                if batch.isEmpty { state.draining = false }
                return batch
            }
            if batch.isEmpty { return }
            metrics.batchSize.record(batch.count)
            let started = ContinuousClock.now
            defer { metrics.queued.decrement(by: Double(batch.count)) }
            do {
                let listsChanges = onChanges != nil
                let (finishers, before, seq, changes, complete) = try await pool.write {
                    db -> ([Finish], Int, Int, [RecentChanges.Change], Bool) in
                    let context = Context(
                        seq: try DatabaseFile.metaInt(db, "update_seq"),
                        docCount: try DatabaseFile.metaInt(db, "doc_count"),
                        delCount: try DatabaseFile.metaInt(db, "doc_del_count"),
                        purgeSeq: try DatabaseFile.metaInt(db, "purge_seq"),
                        liveBytes: try RevisionStore.liveBytes(db),
                        listsChanges: listsChanges)
                    let start = (context.seq, context.docCount, context.delCount, context.purgeSeq, context.liveBytes)
                    let finishers = batch.map { $0.run(db, context) }
                    if (context.seq, context.docCount, context.delCount, context.purgeSeq, context.liveBytes) != start {
                        try DatabaseFile.setMeta(db, "live_bytes", String(context.liveBytes))
                        try DatabaseFile.setMeta(db, "update_seq", String(context.seq))
                        try DatabaseFile.setMeta(db, "doc_count", String(context.docCount))
                        try DatabaseFile.setMeta(db, "doc_del_count", String(context.delCount))
                        try DatabaseFile.setMeta(db, "purge_seq", String(context.purgeSeq))
                    }
                    return (finishers, start.0, context.seq, context.changes, context.changesComplete)
                }
                metrics.transaction.record(duration: started.duration(to: .now))
                onChanges?(before, seq, changes, complete)
                // Published before any writer resumes: a writer that reads next must find its
                // commit in `ChangeNotifier.latest` (an index known current up to `latest`
                // answers without a look at its tables).
                onCommit(seq)
                for finish in finishers { finish() }
            } catch {
                // The transaction itself failed (disk full, I/O error): nobody's write happened.
                for item in batch { item.fail(error) }
            }
        }
    }
}
