import Testing
@testable import Replication

/// `RetryBackoff`, failure by failure: no network, no clock, no sleeping.
@Suite("Replication's retry backoff (without network or clock)")
struct RetryBackoffTests {
    static func options(continuous: Bool, maxRetries: Int = 10) -> ReplicationOptions {
        var options = ReplicationOptions()
        options.continuous = continuous
        options.maxRetries = maxRetries
        options.initialBackoff = .milliseconds(250)
        options.maxBackoff = .seconds(2)
        return options
    }

    @Test("A one-shot replication waits 250 ms, then twice as long each time up to its limit, and gives up after maxRetries failures in a row")
    func oneShot() {
        var backoff = RetryBackoff(Self.options(continuous: false, maxRetries: 5))
        let waits = (0..<6).map { _ in backoff.failed(jitter: 1) }
        #expect(waits == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), nil])
        #expect(backoff.failures == 6)
    }

    @Test("A continuous replication never gives up; its waits stay at the limit however long the outage (no overflow after thousands of failures)")
    func continuous() {
        var backoff = RetryBackoff(Self.options(continuous: true, maxRetries: 2))
        var last: Duration?
        for _ in 0..<5000 { last = backoff.failed(jitter: 1) }
        #expect(last == .seconds(2))
    }

    @Test("Each wait is scaled by its jitter, so devices cut off together come back spread out")
    func jitter() {
        var low = RetryBackoff(Self.options(continuous: true)), high = low
        #expect(low.failed(jitter: 0.5) == .milliseconds(125))
        #expect(high.failed(jitter: 1.5) == .milliseconds(375))
        for _ in 0..<10 { _ = low.failed(jitter: 1); _ = high.failed(jitter: 1) }
        #expect(low.failed(jitter: 0.5) == .seconds(1) && high.failed(jitter: 1.5) == .seconds(3))
    }

    @Test("Only failures that waiting can fix are retried: network and 5xx always, an untrusted peer only by a continuous replication, never 401/403, a missing database or a refusal")
    func whatIsRetried() {
        let oneShot = RetryBackoff(Self.options(continuous: false)), continuous = RetryBackoff(Self.options(continuous: true))
        let cases: [(ReplicationError.Kind, Bool, Bool)] = [
            (.transient, true, true), (.untrustedPeer, false, true), (.unauthorized, false, false), (.notFound, false, false), (.fatal, false, false),
        ]
        for (kind, byOneShot, byContinuous) in cases {
            let error = ReplicationError(kind, "\(kind)")
            #expect(oneShot.retries(error) == byOneShot, "\(kind)")
            #expect(continuous.retries(error) == byContinuous, "\(kind)")
        }
    }
}
