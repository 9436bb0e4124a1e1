@testable import AdorchPluginHost
import XCTest

/// The watchdog's CPU bound (HostCPUWatch): a host is killed only when its CPU time over a
/// whole window passes a core's worth, never for a burst.
final class HostCPUWatchTests: XCTestCase {
    private let start = ContinuousClock.now
    private let beat = Duration.milliseconds(250)

    /// Feeds a host using `share` of a core for `span`, a heartbeat at a time; the first
    /// verdict, with when it came.
    private func run(share: Double, for span: Duration) -> (at: Duration, used: Duration)? {
        var watch = HostCPUWatch()
        var elapsed = Duration.zero
        while elapsed <= span {
            if let used = watch.record(cpu: elapsed * share, at: start + elapsed) { return (elapsed, used) }
            elapsed += beat
        }
        return nil
    }

    func testAHostSpinningOnTwoCoresIsStoppedAfterOneWindow() throws {
        let verdict = try XCTUnwrap(run(share: 2, for: .seconds(60)))
        XCTAssertEqual(verdict.at, HostCPUWatch.window, "judged as soon as a whole window is seen")
        XCTAssertEqual(verdict.used, HostCPUWatch.window * 2)
    }

    func testAHostUnderACoreIsNeverStopped() {
        XCTAssertNil(run(share: 0.9, for: .seconds(120)))
    }

    func testABurstShorterThanTheWindowIsNotStopped() {
        var watch = HostCPUWatch()
        var cpu = Duration.zero
        var elapsed = Duration.zero
        while elapsed <= .seconds(60) {
            // 3 s on both cores every 20 s, idle between: 6 s of CPU in any 10 s at most.
            cpu += (elapsed.components.seconds % 20) < 3 ? beat * 2 : .zero
            XCTAssertNil(watch.record(cpu: cpu, at: start + elapsed), "at \(elapsed)")
            elapsed += beat
        }
    }

    func testTheCPUTimeOfThisProcessIsRead() throws {
        let before = try XCTUnwrap(HostCPUWatch.cpuTime(of: getpid()))
        var spin = 0
        let until = ContinuousClock.now + .milliseconds(100)
        while ContinuousClock.now < until { spin &+= 1 }
        let after = try XCTUnwrap(HostCPUWatch.cpuTime(of: getpid()))
        XCTAssertGreaterThan(after, before, "after \(spin) turns")
        XCTAssertNil(HostCPUWatch.cpuTime(of: 0x3fff_ffff), "no such process")
    }
}
