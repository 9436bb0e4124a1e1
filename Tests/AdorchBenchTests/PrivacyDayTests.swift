import AdorchBench
import AdorchEngine
import Foundation
import XCTest

/// The privacy day's mix and its simulator's counts; and that a day without the mix is the day
/// as it was before the privacy day existed. The figures themselves are printed by `make
/// bench`, never asserted.
final class PrivacyDayTests: XCTestCase {
    private let workloadPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("bench/workload.toml").path

    func testTheMixDealsItsSharesOfTheUsersByTheDaysSeed() {
        let seeds: [UInt64] = [1, 2, 20_261_122, 0xDEAD_BEEF]
        let dealt = seeds.map { AudiencePrivacy.standard.groupOfUser(seed: $0) }
        for (seed, groups) in zip(seeds, dealt) {
            XCTAssertEqual(groups.count, Audience.size, "seed \(seed): one group per user")
            // 60, 30 and 10 % of 40 users.
            XCTAssertEqual([0, 1, 2].map { g in groups.filter { $0 == g }.count }, [24, 12, 4], "seed \(seed)")
            XCTAssertEqual(AudiencePrivacy.standard.groupOfUser(seed: seed), groups, "seed \(seed): the same seed deals the same")
        }
        XCTAssertEqual(Set(dealt).count, seeds.count, "each seed deals the users otherwise")
        let uneven = AudiencePrivacy(groups: [0.5, 0.25, 0.125, 0.125].map {
            AudiencePrivacy.Group(name: "", share: $0, signals: PrivacySignals())
        })
        // 20, 10, 5 and 5 exactly; 1/3 each of 40 is 13.33: the largest remainders, first first.
        XCTAssertEqual([0, 1, 2, 3].map { g in uneven.groupOfUser(seed: 7).filter { $0 == g }.count }, [20, 10, 5, 5])
        let thirds = AudiencePrivacy(groups: (0..<3).map { _ in AudiencePrivacy.Group(name: "", share: 1, signals: PrivacySignals()) })
        XCTAssertEqual([0, 1, 2].map { g in thirds.groupOfUser(seed: 7).filter { $0 == g }.count }, [14, 13, 13])
    }

    func testEveryOtherNetworkFromTheFirstServesChildrenAndEveryOneNonPersonalised() {
        XCTAssertEqual((0..<4).map { AudiencePrivacy.network($0).servesChildren }, [true, false, true, false])
        XCTAssertTrue((0..<4).allSatisfy { AudiencePrivacy.network($0).servesNonPersonalized })
    }

    /// Without a mix the simulator counts no group and adorch's engine is handed no privacy:
    /// the 3-hour standard day gives, to the ad, what it gave before the privacy day existed
    /// (commit 557ed4c: 205 of 205 shown, 460 loads, 6 of 223 fills wasted, no rate limit).
    func testADayWithoutTheMixIsTheDayAsItWas() throws {
        var workload = try Workload.load(path: workloadPath)
        workload.hours = 3
        let r = DaySimulator.run(AdorchPolicy(), workload: workload, trace: Trace(workload))
        XCTAssertEqual([r.requests, r.hits, r.loadCalls, r.wasted, r.fills, r.rateLimitHits], [205, 205, 460, 6, 223, 0])
        XCTAssertEqual([r.groupRequests, r.groupHits], [[], []])
        XCTAssertEqual(r.wrongClass, 0)
    }

    /// With the mix, every request is counted in its user's group, and the simulator, checking
    /// each hand-out by the rules, finds no ad given to a viewer its class is not allowed for;
    /// the child-directed viewers are served, so the engine loaded for them.
    func testThePrivacyDayCountsEveryRequestInItsGroupAndEveryAdGoesToAViewerItsClassAllows() throws {
        var workload = try Workload.load(path: workloadPath)
        workload.hours = 3
        let day = PrivacyDay.run(workload)
        let r = day.result
        XCTAssertEqual(r.groupRequests.reduce(0, +), r.requests)
        XCTAssertEqual(r.groupHits.reduce(0, +), r.hits)
        XCTAssertEqual(r.groupSlotMisses.flatMap { $0 }.reduce(0, +), r.requests - r.hits)
        let trace = Trace(workload), group = AudiencePrivacy.standard.groupOfUser(seed: workload.seed)
        XCTAssertEqual(r.groupRequests, [0, 1, 2].map { g in trace.users.joined().filter { group[$0] == g }.count },
                       "each request counted in its user's group")
        XCTAssertEqual(r.wrongClass, 0)
        XCTAssertGreaterThan(r.groupHits[2], 0, "child-directed viewers were shown ads")
        XCTAssertEqual(day.targets.count, 5, "each group's hit rate, the waste, no ad to a viewer not allowed it")
        XCTAssertTrue(day.table(baseline: nil).contains("| child-directed "), day.table(baseline: nil))
    }
}
