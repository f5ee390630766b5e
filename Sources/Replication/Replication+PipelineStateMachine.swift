import CouchJSON

extension Replication {
    /// The order of a replication's work once it knows where to start: which changes to read
    /// next (up to `depth` batches ahead of the one being written), which batch to write, when
    /// to save a checkpoint, when to wait for the source, when it is done. A value the
    /// replicator feeds with what happened (a batch read, a batch written, a checkpoint saved,
    /// the source changed) and asks for its next step; it does no I/O and reads no clock, so
    /// it is tested event by event.
    ///
    /// The rule it keeps: a checkpoint never names a sequence before every change up to it is
    /// written (batches are written in the order read, and a checkpoint names the last batch
    /// written, or the source's end once nothing is in flight).
    struct PipelineStateMachine: Sendable {
        /// The next step.
        enum Action: Equatable, Sendable {
            /// Read the source's changes after `from`.
            case read(from: JSON)
            /// Write the oldest batch read (once its revisions are fetched).
            case writeOldest
            /// Save a checkpoint naming `seq`.
            case checkpoint(JSON)
            /// Caught up, continuous: wait until the source changes after `since`.
            case waitForChanges(since: JSON)
            /// Caught up, one-shot: done.
            case finish
        }

        enum Phase: Equatable {
            /// Reading and writing batches.
            case flowing
            /// The source had nothing more and every batch read is written.
            case caughtUp
            /// Continuous, waiting on the source.
            case waiting
            case finished
        }

        /// Every change up to this is written.
        private(set) var since: JSON
        /// What the last checkpoint saved names.
        private(set) var checkpointed: JSON
        /// Where the next read starts: after the last batch read.
        private var readFrom: JSON
        /// Batches read and not yet written.
        private(set) var inFlight = 0
        /// The source had nothing after `readFrom`: its `last_seq` then (`.null` when it gave none).
        /// (Compared and cleared as `.none`: JSON takes a bare `nil` as its own null.)
        private var exhausted: JSON?
        /// A batch was written more than `checkpointInterval` after the last checkpoint.
        private var checkpointWanted = false
        private var lastCheckpoint: Duration = .zero
        private(set) var phase = Phase.flowing
        let depth: Int
        let continuous: Bool
        let checkpointInterval: Duration

        /// Starts at `since` (a checkpoint's sequence, or the one asked for), which counts as
        /// saved; `depth` batches at most are read ahead of the one being written.
        init(since: JSON, depth: Int, continuous: Bool, checkpointInterval: Duration) {
            self.since = since
            checkpointed = since
            readFrom = since
            self.depth = max(1, depth)
            self.continuous = continuous
            self.checkpointInterval = checkpointInterval
        }

        /// The next step.
        mutating func next() -> Action {
            if phase == .flowing {
                if checkpointWanted {
                    checkpointWanted = false
                    return .checkpoint(since)
                }
                if inFlight < depth, case .none = exhausted { return .read(from: readFrom) }
                if inFlight > 0 { return .writeOldest }
                // Nothing in flight and nothing more to read: caught up, at the source's end.
                if let last = exhausted, !last.isNull { since = last }
                readFrom = since
                exhausted = .none
                phase = .caughtUp
            }
            switch phase {
            case .caughtUp:
                if since != checkpointed { return .checkpoint(since) }
                phase = continuous ? .waiting : .finished
                return continuous ? .waitForChanges(since: since) : .finish
            case .waiting: return .waitForChanges(since: since)
            case .finished, .flowing: return .finish
            }
        }

        /// A read after `readFrom` came back: `count` changes, and the sequence after them.
        mutating func changesRead(count: Int, lastSeq: JSON) {
            if count == 0 {
                exhausted = lastSeq
            } else {
                readFrom = lastSeq
                inFlight += 1
            }
        }

        /// The oldest batch, read up to `lastSeq`, is written, at `now` (since the start).
        mutating func batchWritten(lastSeq: JSON, at now: Duration) {
            inFlight -= 1
            since = lastSeq
            if since != checkpointed, now - lastCheckpoint >= checkpointInterval { checkpointWanted = true }
        }

        /// A checkpoint naming `seq` is saved, at `now`.
        mutating func checkpointSaved(_ seq: JSON, at now: Duration) {
            checkpointed = seq
            lastCheckpoint = now
        }

        /// The source changed (or the wait timed out): read again.
        mutating func sourceChanged() {
            guard phase == .waiting else { return }
            phase = .flowing
        }

        /// What a checkpoint should name when the replication stops early (cancelled, or a
        /// failure): the progress not yet saved, or nil.
        var unsavedProgress: JSON? {
            // Not `cond ? since : nil`: JSON takes `nil` as its own null, which is not "none".
            guard since != checkpointed else { return Optional.none }
            return since
        }
    }
}
