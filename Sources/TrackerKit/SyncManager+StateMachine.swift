import Replication

extension SyncManager {
    /// Which replications run and what the UI is told, without I/O or a clock: `SyncManager`
    /// tells it what happens (a request, a run starting or ending, a replication's progress)
    /// and does what it answers (start a run, run again, publish a status). At most one run per
    /// direction at a time; requests made while one runs are remembered and run once after it,
    /// however many came; in continuous mode the running replications take changes up by
    /// themselves, so requests are not needed.
    struct StateMachine: Sendable {
        private(set) var status: Status = .idle
        /// Runs so far, by direction (coalesced requests are not counted twice).
        private(set) var runs: [Direction: Int] = [:]
        private var running: Set<Direction> = []
        private var again: Set<Direction> = []
        private(set) var isContinuous = false

        /// A replication of `direction` is asked for: whether to start one now.
        mutating func requested(_ direction: Direction) -> Bool {
            guard !isContinuous else { return false }
            guard running.insert(direction).inserted else {
                again.insert(direction)
                return false
            }
            return true
        }

        /// A run of `direction` starts (the first, or again): the status to show.
        mutating func runStarting(_ direction: Direction) -> Status {
            again.remove(direction)
            runs[direction, default: 0] += 1
            return show(.syncing(direction, done: 0, total: nil))
        }

        /// A run ended: whether to run `direction` again (it was asked for meanwhile).
        mutating func runEnded(_ direction: Direction) -> Bool {
            if again.contains(direction) { return true }
            running.remove(direction)
            return false
        }

        /// Continuous sync is asked for: whether to start it (it is not running yet).
        mutating func continuousStarting() -> Bool {
            guard !isContinuous else { return false }
            isContinuous = true
            runs[.push, default: 0] += 1
            runs[.pull, default: 0] += 1
            return true
        }

        mutating func continuousStopped() {
            isContinuous = false
        }

        /// A run reached the end of what it had to do.
        mutating func succeeded() -> Status { show(.idle) }

        /// A run failed: `offline` when the server could not be reached, else `error`.
        mutating func failed(_ error: String) -> Status {
            let lowercased = error.lowercased()
            let unreachable = ["connect", "refused", "timeout", "timed out", "unreachable", "network", "host"].contains
            { lowercased.contains($0) }
            return show(unreachable ? .offline(error) : .error(error))
        }

        /// A replication of `direction` reported progress: the status to show, or nil when
        /// this update changes nothing shown (a replication is `stopped` before it starts; an
        /// error ends the run, whose outcome is shown then).
        mutating func progress(_ update: ReplicationStatus, _ direction: Direction) -> Status? {
            switch update.state {
            case .busy, .connecting:
                let done = update.missingChecked
                return show(.syncing(direction, done: done, total: update.changesPending.map { done + $0 }))
            case .idle: return show(.idle)
            case .offline: return show(.offline(update.error ?? "the server cannot be reached"))
            case .error, .stopped: return nil
            }
        }

        private mutating func show(_ new: Status) -> Status {
            status = new
            return new
        }
    }
}
