import XCTest

@testable import AdorchDaemon

final class RateLimiterTests: XCTestCase {
    func testABurstThenTheSustainedRateEachUidOnItsOwn() {
        var limiter = RateLimiter(rate: CallRate(perSecond: 2, burst: 3))
        let start = ContinuousClock.now
        for _ in 0..<3 { XCTAssertNil(limiter.take(1000, now: start)) }
        XCTAssertEqual(limiter.take(1000, now: start), .milliseconds(500), "one token comes back every 1/2 s")
        XCTAssertNil(limiter.take(1001, now: start), "another uid has its own bucket")
        XCTAssertEqual(limiter.take(1000, now: start + .milliseconds(250)), .milliseconds(250))
        XCTAssertNil(limiter.take(1000, now: start + .milliseconds(500)))
        XCTAssertNotNil(limiter.take(1000, now: start + .milliseconds(500)))
        // A quiet spell refills up to the burst, not beyond.
        let later = start + .seconds(60)
        for _ in 0..<3 { XCTAssertNil(limiter.take(1000, now: later)) }
        XCTAssertNotNil(limiter.take(1000, now: later))
    }

    func testZeroTurnsTheLimitOff() {
        var limiter = RateLimiter(rate: CallRate(perSecond: 0, burst: 1))
        let now = ContinuousClock.now
        for _ in 0..<1000 { XCTAssertNil(limiter.take(7, now: now)) }
    }
}
