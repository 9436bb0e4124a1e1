import AdorchLocking
import Dispatch
import Foundation

/// A family of days, each one a DayBenchmark (every policy on that day's own trace): the
/// summary over the days, adorch against each reference, the worst days and the targets.
public struct FamilyBenchmark: Sendable {
    public var runs: [DayBenchmark]
    /// adorch on each day's capped variant (`DayCaps`); nil for a day without slots.
    public var capped: [CappedRuns?]
    /// Wall-clock time for the whole family, its days spread over the cores.
    public var elapsed: Duration

    /// Runs every day, and adorch on its capped variant; the days run in parallel, each with
    /// its own policies and simulator.
    public static func run(_ days: [Workload]) -> FamilyBenchmark {
        let started = ContinuousClock.now
        let done = LockedValue([(DayBenchmark, CappedRuns?)?](repeating: nil, count: days.count))
        DispatchQueue.concurrentPerform(iterations: days.count) { i in
            let run = DayBenchmark.run(days[i]), capped = CappedRuns.run(days[i])
            done.withLock { $0[i] = (run, capped) }
        }
        let all = done.withLock { $0.map { $0! } }
        return FamilyBenchmark(runs: all.map(\.0), capped: all.map(\.1), elapsed: ContinuousClock.now - started)
    }

    public var policies: [String] { runs.first?.results.map(\.policy) ?? [] }

    /// Policy `name`'s result on every day, in day order.
    public func results(_ name: String) -> [DayResult] { runs.compactMap { $0.results.first { $0.policy == name } } }

    /// Days on which adorch's hit rate is at least `reference`'s, its waste at most, and both.
    public func adorchAgainst(_ reference: String) -> (hit: Int, waste: Int, both: Int) {
        let pairs = Array(zip(results("adorch"), results(reference)))
        // Every policy sees the same requests on a day: hits compare exactly.
        let hit = pairs.map { $0.0.hits >= $0.1.hits }, waste = pairs.map { $0.0.waste <= $0.1.waste }
        return (hit.filter { $0 }.count, waste.filter { $0 }.count, zip(hit, waste).filter { $0 && $1 }.count)
    }

    /// The summary table, adorch against the references and the worst days; `file` is where
    /// the family is kept, for the replay hint.
    public func report(file: String) -> String {
        var rows = [["policy", "hit median", "hit p10", "hit min", "waste median", "waste p90", "waste max",
                     "requests/show median", "rate-limit hits median", "rate-limit hits max", "revenue/1,000 median"]]
        for name in policies {
            let r = results(name)
            let hit = r.map(\.hitRate), waste = r.map(\.waste), limited = r.map { Double($0.rateLimitHits) }
            rows.append([name, percent(percentile(hit, 0.5)), percent(percentile(hit, 0.1)), percent(percentile(hit, 0)),
                         percent(percentile(waste, 0.5)), percent(percentile(waste, 0.9)), percent(percentile(waste, 1)),
                         decimal(percentile(r.map(\.requestsPerShow), 0.5)),
                         String(format: "%.0f", percentile(limited, 0.5)), String(format: "%.0f", percentile(limited, 1)),
                         String(format: "%.3f", percentile(r.map(\.revenuePerThousand), 0.5))])
        }
        let n = runs.count
        var out = "Family of \(n) generated days (\(totalRequests) show requests in all), simulated in \(seconds(elapsed)) s on "
            + "\(ProcessInfo.processInfo.activeProcessorCount) cores; percentiles over the days, by nearest rank.\n\n"
        out += markdownTable(rows) + "\n\nadorch vs reference, days out of \(n):\n\n"
        var versus = [["reference", "adorch hit ≥", "adorch waste ≤", "both"]]
        for reference in policies where !reference.hasPrefix("adorch") {
            let days = adorchAgainst(reference)
            versus.append([reference, "\(days.hit)", "\(days.waste)", "\(days.both)"])
        }
        out += markdownTable(versus) + "\n"
        let ceilings = runs.map(\.ceiling)
        out += "\nRevenue: the hybrid auction earns more per 1,000 requests than every reference, at a hit rate not lower, on "
            + "\(auctionDays) of \(n) days; the price oracle's median is \(String(format: "%.3f", percentile(ceilings, 0.5))) per 1,000 requests.\n"
        for (k, run) in runs.enumerated() where run.beatsReferencesOnRevenue(AdorchPolicy.auctionName) == false {
            guard let auction = run.results.first(where: { $0.policy == AdorchPolicy.auctionName }) else { continue }
            // The references it did not beat, and on what: revenue, or hit rate.
            let lost = run.results.filter { DayBenchmark.references.contains($0.policy) }
                .filter { auction.revenuePerThousand <= $0.revenuePerThousand || auction.hits < $0.hits }
                .map { "\($0.policy) \(String(format: "%.3f", $0.revenuePerThousand)) at \(percent($0.hitRate))" }
            out += "- day \(k + 1): the auction \(String(format: "%.3f", auction.revenuePerThousand)) at \(percent(auction.hitRate)), "
                + "\(run.workload.bidders.count) bidder\(run.workload.bidders.count == 1 ? "" : "s"); not beaten: \(lost.joined(separator: ", "))\n"
        }
        out += cappedReport
        let worst = worstDays(5)
        guard !worst.isEmpty else { return out }
        out += "\nadorch's worst days by hit rate (replay one with `adorch-bench day --family-file \(file) --day K`):\n\n"
        for k in worst {
            let run = runs[k - 1]
            guard let adorch = run.results.first(where: { $0.policy == "adorch" }) else { continue }
            let others = run.results.filter { ["buffered", "oracle"].contains($0.policy) }
                .map { "\($0.policy) \(percent($0.hitRate)), \(percent($0.waste))" }
            out += "- day \(k): hit \(percent(adorch.hitRate)), waste \(percent(adorch.waste))"
                + (others.isEmpty ? "" : " (\(others.joined(separator: "; ")))") + "; \(DayFamily.describe(run.workload))\n"
        }
        return out
    }

    /// The days (from 1) with adorch's lowest hit rates, lowest first.
    public func worstDays(_ count: Int) -> [Int] {
        Array(results("adorch").enumerated().sorted { ($0.element.hitRate, $0.offset) < ($1.element.hitRate, $1.offset) }
            .prefix(count).map { $0.offset + 1 })
    }

    /// Days on which the hybrid auction beats every reference on revenue, at a hit rate not lower.
    public var auctionDays: Int { runs.filter { $0.beatsReferencesOnRevenue(AdorchPolicy.auctionName) == true }.count }

    /// The family's hit-rate targets for adorch, over its days: the median and the 10th percentile.
    public static let medianHitTarget = 0.99
    public static let p10HitTarget = 0.97

    /// The family's targets for adorch (BenchSection prints them).
    public var targets: [(String, Bool)] {
        let hits = results("adorch").map(\.hitRate), n = runs.count
        let buffered = adorchAgainst("buffered"), wasteDays = Int((0.9 * Double(n)).rounded(.up))
        let (median, p10) = (Self.medianHitTarget, Self.p10HitTarget)
        return [
            ("family: median hit rate ≥ \(whole(median)) (\(percent(percentile(hits, 0.5))))", percentile(hits, 0.5) >= median),
            ("family: 10th percentile hit rate ≥ \(whole(p10)) (\(percent(percentile(hits, 0.1))))", percentile(hits, 0.1) >= p10),
            ("family: hit rate ≥ buffered's on every day (\(buffered.hit) of \(n))", buffered.hit == n),
            ("family: waste ≤ buffered's on at least \(wasteDays) of \(n) days (\(buffered.waste))", buffered.waste >= wasteDays),
            ("family: the hybrid auction earns more per 1,000 requests than every reference, at a hit rate not lower, on at least "
                + "\(wasteDays) of \(n) days (\(auctionDays))", auctionDays >= wasteDays),
        ] + cappedTargets
    }

    private var totalRequests: Int { runs.map { $0.results.first?.requests ?? 0 }.reduce(0, +) }
}

/// The value at rank ⌈p·n⌉ of the sorted values (the smallest for p = 0): nearest rank.
func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
}

private func percent(_ x: Double) -> String { String(format: "%.2f %%", x * 100) }

private func decimal(_ x: Double) -> String { x.isFinite ? String(format: "%.2f", x) : "∞" }

func seconds(_ d: Duration) -> String {
    String(format: "%.2f", Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
}

extension DayFamily {
    /// One line on a day: its slots and their rates, the curve, the bursts and the waterfall.
    public static func describe(_ w: Workload) -> String {
        let slots = w.slots.map { "\($0.id) \(String(format: "%.3g", $0.basePerHour))/h" }.joined(separator: ", ")
        let networks = w.networks.map { n in
            "\(n.name) \(Int((n.fill * 100).rounded())) % \(String(format: "%.3g", n.medianSeconds)) s (p99 \(String(format: "%.3g", n.p99Seconds)) s, "
                + "timeout \(String(format: "%g", n.timeoutSeconds)) s) ttl \(String(format: "%g", n.ttlSeconds / 60)) min"
                + (n.rateLimit.map { " limit \($0.loads)/\(String(format: "%g", $0.window)) s pause \(String(format: "%g", $0.pause / 60)) min" } ?? "")
        }.joined(separator: ", ")
        return "\(w.slots.count) slots (\(slots)); curve ±\(String(format: "%g", w.dayAmplitude * 100)) % peak \(String(format: "%g", w.peakHour)) h; "
            + (w.burstsPerDay == 0 ? "no bursts; "
                : "\(w.burstsPerDay) burst\(w.burstsPerDay == 1 ? "" : "s") a day ×\(String(format: "%g", w.burstFactor)) for \(String(format: "%g", w.burstSeconds / 60)) min; ")
            + "networks \(networks)"
            + (w.networks.contains { $0.ecpm > 0 } ? "; eCPM " + w.networks.map { "\($0.name) \(String(format: "%.3g", $0.ecpm))" }.joined(separator: ", ") : "")
            + (w.bidders.isEmpty ? "" : "; bidders " + w.bidders.map { b in
                "\(b.name) \(Int((b.fill * 100).rounded())) % \(String(format: "%.3g", b.medianSeconds)) s bid \(String(format: "%.3g", b.ecpm))"
            }.joined(separator: ", "))
    }
}
