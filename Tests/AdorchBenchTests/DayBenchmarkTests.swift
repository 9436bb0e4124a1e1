import AdorchBench
import Foundation
import XCTest

/// The day benchmark's smoke run (a few simulated hours, well under a second), so it cannot
/// rot; and the simulator's own rules on small cases. The figures themselves are printed by
/// `make bench`, never asserted.
final class DayBenchmarkTests: XCTestCase {
    private static let bench = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("bench")
    private let workloadPath = bench.appendingPathComponent("workload.toml").path
    private let familyPath = bench.appendingPathComponent("family.toml").path

    func testASmokeDayRunsEveryPolicyOnTheSameTraceAndRepeatsExactly() throws {
        var workload = try Workload.load(path: workloadPath)
        workload.hours = 3
        let first = DayBenchmark.run(workload), second = DayBenchmark.run(workload)
        XCTAssertEqual(first.results.map(\.policy), ["adorch", AdorchPolicy.auctionName, "classic", "buffered", "smart", "oracle"])
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
            XCTAssertEqual(a.revenue, b.revenue, "\(a.policy): the same prices")
            XCTAssertGreaterThan(a.revenue, 0, "\(a.policy) showed ads that pay")
            XCTAssertLessThan(a.revenuePerThousand, first.ceiling, "\(a.policy) under the price oracle's ceiling")
        }
        XCTAssertTrue(first.table.contains("| adorch "), first.table)
        XCTAssertTrue(first.table.contains("| price oracle (ceiling) "), first.table)
        XCTAssertEqual(first.targets.count, 6, "hit, waste, rate limit, requests per show, revenue, engine cost")
    }

    /// Prices come from streams of their own: a day without prices has every other figure of
    /// the day with them, and earns nothing (but for the auction, which decides by price); the
    /// references never ask a bidder.
    func testPricesMoveNoFigureButRevenueAndReferencesAskNoBidder() throws {
        var priced = try Workload.load(path: workloadPath)
        priced.hours = 3
        XCTAssertFalse(priced.bidders.isEmpty, "the standard day has bidders")
        var unpriced = priced
        for i in unpriced.networks.indices { unpriced.networks[i].ecpm = 0 }
        for i in unpriced.bidders.indices { unpriced.bidders[i].ecpm = 0 }
        let a = DayBenchmark.run(priced), b = DayBenchmark.run(unpriced)
        for (x, y) in zip(a.results, b.results) {
            XCTAssertEqual(y.revenue, 0, y.policy)
            guard x.policy != AdorchPolicy.auctionName else { continue }
            XCTAssertEqual([x.hits, x.fills, x.wasted, x.loadCalls, x.rateLimitHits], [y.hits, y.fills, y.wasted, y.loadCalls, y.rateLimitHits],
                           "\(x.policy): prices changed another figure")
        }
        XCTAssertEqual(b.ceiling, 0)
        var noBidders = priced
        noBidders.bidders = []
        let c = DayBenchmark.run(noBidders)
        for (x, y) in zip(a.results, c.results) where x.policy != AdorchPolicy.auctionName {
            XCTAssertEqual([x.hits, x.loadCalls], [y.hits, y.loadCalls], "\(x.policy) asked a bidder")
            XCTAssertEqual(x.revenue, y.revenue, x.policy)
        }
    }

    /// A small family (3 days of 3 hours) from bench/family.toml: the same seed draws the same
    /// days and figures, another seed other days; the family file reads back to the same
    /// days; every policy sees every request of every day.
    func testASmallFamilyIsReproducibleKeptExactlyAndSeenWholeByEveryPolicy() throws {
        var family = try DayFamily.load(path: familyPath)
        (family.count, family.hours) = (3, 3)
        let days = family.days()
        XCTAssertEqual(days.count, 3)
        XCTAssertEqual(days, family.days(), "the same seed draws the same days")
        var reseeded = family
        reseeded.seed &+= 1
        XCTAssertNotEqual(reseeded.days(), days, "another seed draws other days")
        XCTAssertEqual(Set(days.map(\.seed)).count, 3, "each day has its own trace")
        var larger = family
        larger.count = 5
        XCTAssertEqual(Array(larger.days().prefix(3)), days, "a smaller family is the start of a larger one")

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-family-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("family.toml").path, single = folder.appendingPathComponent("day.toml").path
        try Workload.familyTOML(days, comment: "a test family\nthree days").write(toFile: file, atomically: true, encoding: .utf8)
        XCTAssertEqual(try Workload.loadDays(path: file), days, "the family file reads back to the same days, to the bit")
        XCTAssertEqual(try Workload.load(path: file, day: 2), days[1])
        XCTAssertThrowsError(try Workload.load(path: file), "a family of three needs a day picked")
        XCTAssertThrowsError(try Workload.load(path: file, day: 4))
        try days[2].toml().write(toFile: single, atomically: true, encoding: .utf8)
        XCTAssertEqual(try Workload.load(path: single), days[2], "a day alone is a workload file")
        let standard = try Workload.load(path: workloadPath)
        try standard.toml().write(toFile: single, atomically: true, encoding: .utf8)
        XCTAssertEqual(try Workload.load(path: single), standard, "the standard day written out reads back the same")

        let first = FamilyBenchmark.run(days), second = FamilyBenchmark.run(days)
        XCTAssertEqual(first.policies, ["adorch", AdorchPolicy.auctionName, "classic", "buffered", "smart", "oracle"])
        for (day, (a, b)) in zip(days, zip(first.runs, second.runs)) {
            let requests = Trace(day).requests.map(\.count).reduce(0, +)
            XCTAssertEqual(a.workload, day)
            for (x, y) in zip(a.results, b.results) {
                XCTAssertEqual(x.requests, requests, "\(x.policy) saw every request of day seed \(day.seed)")
                XCTAssertEqual([x.hits, x.fills, x.wasted, x.loadCalls, x.rateLimitHits], [y.hits, y.fills, y.wasted, y.loadCalls, y.rateLimitHits],
                               "\(x.policy): the same day gives the same figures, in parallel too")
            }
        }
        XCTAssertEqual(first.targets.count, 7, "5, and the capped variants' 2")
        XCTAssertTrue(first.report(file: file).contains("Revenue: the hybrid auction earns more"))
        XCTAssertEqual(first.capped.compactMap { $0?.engine.requests }, first.results("adorch").map(\.requests), "each day has its capped variant")
        let report = first.report(file: file)
        for policy in first.policies { XCTAssertTrue(report.contains("| \(policy) "), report) }
        XCTAssertTrue(report.contains("| capped, caps in the engine "), report)
        XCTAssertTrue(report.contains("--family-file \(file) --day K"), report)
    }

    /// Every value of 50 drawn days lies within bench/family.toml's ranges, and the draws
    /// spread over them (no range is stuck at one end).
    func testEveryDrawnValueLiesWithinTheRangesOfFamilyToml() throws {
        let family = try DayFamily.load(path: familyPath)
        XCTAssertEqual(family.count, 50)
        var generated = family
        generated.count = 50
        let days = generated.days()
        var seen: [String: [Double]] = [:]
        // Derived values (a rate per hour from one per day, p99 from the median) to rounding.
        func check(_ name: String, _ x: Double, _ r: DayFamily.Range, slack: Double = 0) {
            XCTAssertTrue(x >= r.min * (1 - slack) && x <= r.max * (1 + slack), "\(name) = \(x) outside \(r.min)...\(r.max)")
            seen[name, default: []].append((x - r.min) / (r.max - r.min))
        }
        func check(_ name: String, _ x: Int, _ c: DayFamily.Count) {
            XCTAssertTrue(c.contains(x), "\(name) = \(x) outside \(c.min)...\(c.max)")
            seen[name, default: []].append(c.max == c.min ? 0 : Double(x - c.min) / Double(c.max - c.min))
        }
        var limited = 0, networks = 0
        for day in days {
            XCTAssertEqual(day.hours, family.hours)
            check("amplitude", day.dayAmplitude, family.amplitude)
            check("peak_hour", day.peakHour, family.peakHour)
            check("bursts", day.burstsPerDay, family.bursts)
            check("factor", day.burstFactor, family.burstFactor)
            check("minutes", day.burstSeconds / 60, family.burstMinutes)
            check("slots", day.slots.count, family.slots)
            XCTAssertEqual(Set(day.slots.map(\.id)).count, day.slots.count, "slot ids are unique")
            for slot in day.slots {
                XCTAssertTrue(family.formats.contains(slot.format))
                check("base_per_day", slot.basePerHour * 24, family.basePerDay, slack: 1e-12)
                check("buffer", slot.buffer, family.buffer)
            }
            check("networks", day.networks.count, family.networks)
            XCTAssertEqual(Set(day.networks.map(\.name)).count, day.networks.count, "network names are unique")
            for n in day.networks {
                check("fill", n.fill, family.fill)
                check("median_s", n.medianSeconds, family.medianSeconds)
                check("p99_over_median", n.p99Seconds / n.medianSeconds, family.p99OverMedian, slack: 1e-12)
                check("errors", n.errors, family.errors)
                check("ttl_minutes", n.ttlSeconds / 60, family.ttlMinutes)
                check("timeout_s", n.timeoutSeconds, family.timeoutSeconds)
                networks += 1
                guard let limit = n.rateLimit else { continue }
                limited += 1
                check("loads", limit.loads, family.rateLimitLoads)
                check("window_s", limit.window, family.rateLimitWindowSeconds)
                check("pause_minutes", limit.pause / 60, family.rateLimitPauseMinutes)
            }
        }
        for day in days {
            check("bidders", day.bidders.count, family.bidderCount)
            for n in day.networks + day.bidders {
                check("ecpm", n.ecpm, family.ecpm)
                check("spread", n.priceSpread, family.priceSpread)
            }
            for b in day.bidders {
                check("bidder fill", b.fill, family.bidderFill)
                check("bidder median_s", b.medianSeconds, family.bidderMedianSeconds)
                check("bidder ttl_minutes", b.ttlSeconds / 60, family.bidderTTLMinutes)
                check("bidder timeout_s", b.timeoutSeconds, family.bidderTimeoutSeconds)
            }
        }
        XCTAssertEqual(Set(days.flatMap { $0.slots.map(\.format) }), Set(family.formats), "every format is drawn")
        XCTAssertGreaterThan(limited, networks / 4, "about half the networks limit")
        XCTAssertLessThan(limited, networks * 3 / 4)
        for (name, spots) in seen {
            XCTAssertLessThan(spots.min()!, 0.25, "\(name) never drawn near its minimum")
            XCTAssertGreaterThan(spots.max()!, 0.75, "\(name) never drawn near its maximum")
        }
    }

    /// Users come from their own stream: a skewed mix, one per request.
    func testEveryRequestHasAUserAndAFewUsersMakeMostRequests() throws {
        let trace = Trace(try Workload.load(path: workloadPath))
        XCTAssertEqual(trace.users.map(\.count), trace.requests.map(\.count))
        let all = trace.users.flatMap { $0 }
        XCTAssertTrue(all.allSatisfy { (0..<Audience.size).contains($0) })
        let share = Double(all.filter { $0 == 0 }.count) / Double(all.count)
        XCTAssertEqual(share, 0.234, accuracy: 0.03, "the busiest user makes 1 / H(40) of the requests")
        XCTAssertEqual(Set(all).count, Audience.size, "over a day, every user asks")
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
        func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? { nil }
        func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {}
        func wake(_ sim: DaySimulator) {}
    }

    private final class Hammer: PreloadPolicy {
        let name = "hammer"
        func start(_ sim: DaySimulator) { for _ in 0..<100 { sim.load(slot: 0, network: 1) } }
        func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? { nil }
        func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {}
        func wake(_ sim: DaySimulator) {}
    }
}
