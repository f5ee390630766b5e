import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import TrackerApp

/// Dashboard sessions' lifetime on a clock the test moves.
@Suite("Dashboard sessions")
struct DashboardSessionsTests {
    @Test("A session lasts 12 hours from sign-in however often it is used, then is gone; tokens are kept only as digests")
    func absoluteLifetime() {
        let clock = NIOLockedValueBox(Date(timeIntervalSince1970: 1_800_000_000))
        let sessions = DashboardSessions(now: { clock.withLockedValue { $0 } })
        let token = sessions.start(name: "ann", roles: ["analyst"], isTrackerUser: false, account: "state-1")
        for _ in 0..<11 {
            clock.withLockedValue { $0 += 3600 }
            #expect(sessions.session(token)?.name == "ann")  // used every hour: not renewed by use
        }
        clock.withLockedValue { $0 += 3599 }
        #expect(sessions.session(token)?.account == "state-1")
        clock.withLockedValue { $0 += 1 }
        #expect(sessions.session(token) == nil)
        #expect(sessions.session("not-a-token") == nil)
        #expect(DashboardSessions.digest(token) != token && DashboardSessions.digest(token).count == 64)
        #expect(DashboardSessions.setCookie(token).contains("Max-Age=43200"))
    }
}
