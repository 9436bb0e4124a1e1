import AdorchBench
import Foundation
import XCTest

/// The capped variant of a day: which requests the app's check refuses, that adorch's engine
/// refuses exactly those, and what the caps do to adorch's waste. Behaviour, not figures:
/// `make bench` prints those.
final class CappedDayTests: XCTestCase {
    private static let bench = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("bench")
    private let workloadPath = bench.appendingPathComponent("workload.toml").path
    private let familyPath = bench.appendingPathComponent("family.toml").path

    /// 3 per 10 minutes and a minute between two, for one user; another user is not held.
    func testTheCheckRefusesByTheRulesToTheWindowsEdge() throws {
        let workload = try Workload.load(path: workloadPath)
        let caps = try XCTUnwrap(DayCaps(on: workload))
        XCTAssertEqual(workload.slots[caps.slot].id, "rw_hot", "the standard day's busiest rewarded slot")
        var trace = Trace(workload)
        trace.requests = workload.slots.map { _ in [] }
        trace.users = trace.requests.map { _ in [] }
        trace.requests[caps.slot] = [0, 30, 30, 60, 120, 180, 600, 601]
        trace.users[caps.slot] = [0, 0, 1, 0, 0, 0, 0, 0]
        // 30: pacing; 30 for user 1: not held; 60: the first impression's pacing just over;
        // 180: three in 10 minutes; 600: the first left the window; 601: pacing again.
        XCTAssertEqual(caps.refused(in: trace)[caps.slot], [false, true, false, false, false, true, false, true])
    }

    /// The standard day capped on rw_hot: requests are refused, the engine answers Capped to
    /// exactly those, every policy is asked the same others, and the caps waste no ad in
    /// rw_hot nor more than the control (the caps checked by the app, the engine unaware).
    /// The day's waste share is not compared with the uncapped day's: the caps take fills from
    /// the slot that wastes least, which raises the share with no ad more wasted.
    func testTheCappedStandardDayIsRefusedAsTheEngineRefusesAndWastesNoMoreThanTheControl() throws {
        let workload = try Workload.load(path: workloadPath)
        let caps = try XCTUnwrap(DayCaps(on: workload))
        let (uncapped, runs, policy) = run(workload, caps)
        let refused = caps.refused(in: Trace(workload))
        XCTAssertGreaterThan(runs.engine.capped, 0)
        XCTAssertEqual(runs.engine.capped, refused[caps.slot].filter { $0 }.count)
        // Exactly: rw_hot's one miss that day changes no answer.
        assertEngineAgrees(policy, runs.engine, refused, Trace(workload), exactly: true)
        XCTAssertLessThanOrEqual(runs.engine.slotWasted[caps.slot], uncapped.slotWasted[caps.slot])
        XCTAssertLessThanOrEqual(runs.engine.wasted, runs.control.wasted)

        let day = DayBenchmark.run(workload, caps: caps)
        XCTAssertEqual(day.results.map(\.policy), ["adorch", AdorchPolicy.controlName, "classic", "buffered", "smart", "oracle"])
        for r in day.results {
            XCTAssertEqual(r.capped, runs.engine.capped, "\(r.policy) is asked the requests let in")
            XCTAssertEqual(r.waits.count, r.letIn - r.hits, "\(r.policy): one wait per miss, none for a capped request")
        }
    }

    /// The first days of the family, capped on their busiest rewarded slot: the same, with the
    /// waste over the days together (one day's few ads go either way as the caps shift the
    /// engine's shared random stream and the networks' limits).
    func testTheCappedFamilyDaysAreRefusedAsTheEngineRefusesAndWasteNoMoreThanTheControl() throws {
        var family = try DayFamily.load(path: familyPath)
        family.count = 3
        var engine: [DayResult] = [], control: [DayResult] = []
        for workload in family.days() {
            let caps = try XCTUnwrap(DayCaps(on: workload))
            let (_, runs, policy) = run(workload, caps)
            XCTAssertGreaterThan(runs.engine.capped, 0, "day seed \(workload.seed)")
            assertEngineAgrees(policy, runs.engine, caps.refused(in: Trace(workload)), Trace(workload), exactly: false)
            engine.append(runs.engine)
            control.append(runs.control)
        }
        XCTAssertLessThanOrEqual(engine.map(\.wasted).reduce(0, +), control.map(\.wasted).reduce(0, +))
    }

    private func run(_ workload: Workload, _ caps: DayCaps) -> (uncapped: DayResult, runs: (engine: DayResult, control: DayResult), policy: AdorchPolicy) {
        let trace = Trace(workload), policy = AdorchPolicy()
        let uncapped = DaySimulator.run(AdorchPolicy(), workload: workload, trace: trace)
        let engine = DaySimulator.run(policy, workload: workload, trace: trace, caps: caps)
        let control = DaySimulator.run(AdorchPolicy(capsInEngine: false), workload: workload, trace: trace, caps: caps)
        return (uncapped, (engine, control), policy)
    }

    /// The engine answered Capped only to requests the check refused, and to every one of them
    /// if `exactly` or the slot had no miss: the check counts a let-in request the engine had
    /// no ad for, and may then refuse a later one the engine lets in.
    private func assertEngineAgrees(_ policy: AdorchPolicy, _ result: DayResult, _ refused: [[Bool]], _ trace: Trace, exactly: Bool,
                                    file: StaticString = #filePath, line: UInt = #line) {
        for slot in trace.requests.indices {
            let times = zip(trace.requests[slot], refused[slot]).filter(\.1).map(\.0)
            if exactly || result.slotMisses[slot] == 0 {
                XCTAssertEqual(policy.cappedAt[slot], times, "slot \(slot)", file: file, line: line)
            } else {
                XCTAssertTrue(Set(policy.cappedAt[slot]).isSubset(of: times), "slot \(slot)", file: file, line: line)
            }
        }
    }
}
