/// When a replication asks again after a request failed, without a clock (the replicator
/// sleeps): only failures trying again can fix (`ReplicationError.isRetryable`; for a
/// continuous replication also an untrusted peer, waited out like any outage); after
/// `initialBackoff`, doubling with each failure in a row up to `maxBackoff`, each wait scaled
/// by a jitter of 0.5–1.5 so that devices cut off together do not all come back together; a
/// one-shot replication gives up after `maxRetries` failures in a row, a continuous one never.
struct RetryBackoff: Sendable {
    let continuous: Bool
    let maxRetries: Int
    let initialBackoff: Duration
    let maxBackoff: Duration
    /// Failures in a row so far.
    private(set) var failures = 0

    init(_ options: ReplicationOptions) {
        continuous = options.continuous
        maxRetries = options.maxRetries
        initialBackoff = options.initialBackoff
        maxBackoff = options.maxBackoff
    }

    /// Whether trying again can fix `error`.
    func retries(_ error: ReplicationError) -> Bool {
        continuous ? error.isRetryableWhenContinuous : error.isRetryable
    }

    /// A retryable request failed again: how long to wait before the next try (`jitter` in
    /// 0.5...1.5), or nil when a one-shot replication has tried enough.
    mutating func failed(jitter: Double) -> Duration? {
        failures += 1
        if !continuous, failures > maxRetries { return nil }
        let base = initialBackoff * (1 << min(failures - 1, 16))
        return min(base, maxBackoff) * jitter
    }
}
