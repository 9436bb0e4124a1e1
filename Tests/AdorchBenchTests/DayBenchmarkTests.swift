import AdorchBench
import Foundation
import XCTest

/// The day benchmark's smoke run (a few simulated hours, well under a second), so it cannot
/// rot; and the simulator's own rules on small cases. The figures themselves are printed by
/// `make bench`, never asserted.
final class DayBenchmarkTests: XCTestCase {
    private let workloadPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("bench/workload.toml").path

    func testASmokeDayRunsEveryPolicyOnTheSameTraceAndRepeatsExactly() throws {
        var workload = try Workload.load(path: workloadPath)
        workload.hours = 3
        let first = DayBenchmark.run(workload), second = DayBenchmark.run(workload)
        XCTAssertEqual(first.results.map(\.policy), ["adorch", "classic", "buffered", "smart", "oracle"])
        let requests = Trace(workload).requests.map(\.count).reduce(0, +)
        XCTAssertGreaterThan(requests, 100)
        for (a, b) in zip(first.results, second.results) {
            XCTAssertEqual(a.requests, requests, "\(a.policy) saw the whole trace")
            XCTAssertLessThanOrEqual(a.hits, a.fills, "\(a.policy): every hit is a loaded ad")
            XCTAssertLessThanOrEqual(a.wasted, a.fills)
            XCTAssertGreaterThanOrEqual(a.loadCalls, a.fills)
            XCTAssertEqual(a.waits.count, a.requests - a.hits, "one wait per miss")
            XCTAssertEqual([a.hits, a.fills, a.wasted, a.loadCalls, a.rateLimitHits], [b.hits, b.fills, b.wasted, b.loadCalls, b.rateLimitHits],
                           "\(a.policy): the same seed gives the same day")
        }
        XCTAssertTrue(first.table.contains("| adorch "), first.table)
        XCTAssertEqual(first.targets.count, 5, "hit, waste, rate limit, requests per show, engine cost")
    }

    /// A policy that never loads misses everything; one that hammers network B trips its limit.
    func testTheSimulatorCountsMissesAndTheRateLimit() throws {
        var workload = try Workload.load(path: workloadPath)
        workload.hours = 1
        let trace = Trace(workload)
        let idle = DaySimulator.run(Idle(), workload: workload, trace: trace)
        XCTAssertEqual(idle.hits, 0)
        XCTAssertEqual(idle.loadCalls, 0)
        XCTAssertEqual(idle.waits.count, idle.requests)
        let hammer = DaySimulator.run(Hammer(), workload: workload, trace: trace)
        XCTAssertEqual(hammer.loadCalls, 100)
        XCTAssertEqual(hammer.rateLimitHits, 70, "B allows 30 loads in 60 s, then answers rate_limited")
    }

    private final class Idle: PreloadPolicy {
        let name = "idle"
        func start(_ sim: DaySimulator) {}
        func show(slot: Int, _ sim: DaySimulator) -> Int? { nil }
        func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {}
        func wake(_ sim: DaySimulator) {}
    }

    private final class Hammer: PreloadPolicy {
        let name = "hammer"
        func start(_ sim: DaySimulator) { for _ in 0..<100 { sim.load(slot: 0, network: 1) } }
        func show(slot: Int, _ sim: DaySimulator) -> Int? { nil }
        func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {}
        func wake(_ sim: DaySimulator) {}
    }
}
