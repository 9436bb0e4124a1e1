import Foundation

/// The day benchmark: every policy on the same trace, the table and adorch's targets.
public struct DayBenchmark: Sendable {
    public var workload: Workload
    /// The app-side caps the day ran behind; nil for the day as it is.
    public var caps: DayCaps?
    public var results: [DayResult]
    /// The price oracle's revenue per 1,000 requests (`PriceCeiling`).
    public var ceiling: Double

    /// The references: waterfall-only policies modelled on the mediation SDKs (Policies.swift).
    public static let references = ["classic", "buffered", "smart"]

    /// adorch first (on a capped day, then adorch with the caps in the app; on any other day,
    /// then adorch's hybrid auction), then the references, then the oracle.
    public static func run(_ workload: Workload, caps: DayCaps? = nil) -> DayBenchmark {
        let trace = Trace(workload)
        let control: [PreloadPolicy] = caps == nil ? [AdorchPolicy(auction: true)] : [AdorchPolicy(capsInEngine: false)]
        let policies = [AdorchPolicy()] + control + [ClassicPolicy(), BufferedPolicy(), SmartPolicy(), OraclePolicy()]
        let letIn = caps.map { caps in zip(trace.requests, caps.refused(in: trace)).map { zip($0, $1).filter { !$0.1 }.map(\.0) } } ?? trace.requests
        return DayBenchmark(workload: workload, caps: caps, results: policies.map { policy in
            let started = ContinuousClock.now
            var result = DaySimulator.run(policy, workload: workload, trace: trace, caps: caps)
            result.elapsed = ContinuousClock.now - started
            return result
        }, ceiling: PriceCeiling.revenuePerThousand(workload, letIn: letIn))
    }

    /// Whether `policy` earned more per 1,000 requests than every reference with a hit rate
    /// at least each one's; nil when it did not run.
    public func beatsReferencesOnRevenue(_ policy: String) -> Bool? {
        guard let p = results.first(where: { $0.policy == policy }) else { return nil }
        return results.filter { Self.references.contains($0.policy) }.allSatisfy { p.revenuePerThousand > $0.revenuePerThousand && p.hits >= $0.hits }
    }

    public var table: String {
        let requests = results.first?.requests ?? 0
        // A capped day's hit rate is over the requests let in: "shows" says of how many.
        var rows = [["policy", "hit rate", "waste", "requests/show", "rate-limit hits", "wait p99 (s)", "shows", "loads"] + (caps == nil ? [] : ["capped"])]
        for r in results {
            rows.append([r.policy, percent(r.hitRate), percent(r.waste), String(format: "%.2f", r.requestsPerShow), "\(r.rateLimitHits)",
                         String(format: "%.1f", r.waitPercentile(0.99)), "\(r.hits)/\(r.letIn)", "\(r.loadCalls)"] + (caps == nil ? [] : ["\(r.capped)"]))
        }
        var out = "Day of traffic: \(String(format: "%g", workload.hours)) h, seed \(workload.seed), \(requests) show requests, \(workload.slots.count) slots"
            + (caps.map { ", capped on \($0.describe(workload))" } ?? "") + "\n\n"
        out += markdownTable(rows) + "\n"
        guard let adorch = results.first(where: { $0.policy == "adorch" }) else { return out }
        out += "\nadorch / reference (same trace):\n\n"
        var ratios = [["reference", "hit rate ×", "waste ×", "requests/show ×"]]
        for r in results where r.policy != "adorch" {
            ratios.append([r.policy, ratio(adorch.hitRate, r.hitRate), ratio(adorch.waste, r.waste), ratio(adorch.requestsPerShow, r.requestsPerShow)])
        }
        out += markdownTable(ratios) + "\n"
        out += "\nRevenue per 1,000 show requests (prices per 1,000 impressions; the references and \"adorch\" walk the waterfall "
            + "without prices, the hybrid auction also asks \(workload.bidders.count) bidder\(workload.bidders.count == 1 ? "" : "s")):\n\n"
        var revenue = [["policy", "revenue / 1,000 requests", "of the ceiling", "hit rate"]]
        for r in results {
            revenue.append([r.policy, String(format: "%.3f", r.revenuePerThousand),
                            ceiling > 0 ? percent(r.revenuePerThousand / ceiling) : "—", percent(r.hitRate)])
        }
        revenue.append(["price oracle (ceiling)", String(format: "%.3f", ceiling), ceiling > 0 ? "100.00 %" : "—", "100.00 %"])
        out += markdownTable(revenue) + "\n"
        return out
    }

    /// The standard day's targets for adorch (BenchSection prints them): near-perfect readiness, almost no waste, no
    /// rate limit tripped, and no more network requests per show than the oracle; and the
    /// engine's cost, its run of the day in under a second.
    public var targets: [(String, Bool)] {
        guard let adorch = results.first(where: { $0.policy == "adorch" }) else { return [] }
        let oracle = results.first { $0.policy == "oracle" }
        let auction = results.first { $0.policy == AdorchPolicy.auctionName }
        let bestReference = results.filter { Self.references.contains($0.policy) }.max { $0.revenuePerThousand < $1.revenuePerThousand }
        let seconds = Double(adorch.elapsed.components.seconds) + Double(adorch.elapsed.components.attoseconds) / 1e18
        return [
            ("standard day: hit rate ≥ 99.9 % (\(percent(adorch.hitRate)))", adorch.hitRate >= 0.999),
            ("standard day: waste ≤ 0.5 % (\(percent(adorch.waste)))", adorch.waste <= 0.005),
            ("standard day: no rate-limit hits (\(adorch.rateLimitHits))", adorch.rateLimitHits == 0),
            ("standard day: requests per show ≤ the oracle's (\(String(format: "%.2f", adorch.requestsPerShow)) vs \(String(format: "%.2f", oracle?.requestsPerShow ?? 0)))",
                   adorch.requestsPerShow <= (oracle?.requestsPerShow ?? 0)),
            ("standard day: the hybrid auction earns more per 1,000 requests than every reference, at a hit rate not lower "
                + "(\(String(format: "%.3f", auction?.revenuePerThousand ?? 0)) vs \(bestReference?.policy ?? "?")'s \(String(format: "%.3f", bestReference?.revenuePerThousand ?? 0)))",
                   beatsReferencesOnRevenue(AdorchPolicy.auctionName) == true),
            ("engine cost: adorch simulates the \(String(format: "%g", workload.hours)) h standard day in under a second (\(String(format: "%.3f", seconds)) s)",
                   seconds < 1),
        ]
    }

    private func percent(_ x: Double) -> String { String(format: "%.2f %%", x * 100) }

    private func ratio(_ a: Double, _ b: Double) -> String { b == 0 ? (a == 0 ? "1.00" : "∞") : String(format: "%.2f", a / b) }
}

/// A GitHub-flavoured Markdown table, columns padded so it also reads as plain text.
public func markdownTable(_ rows: [[String]]) -> String {
    guard let header = rows.first else { return "" }
    let widths = header.indices.map { i in rows.map { $0[i].count }.max() ?? 0 }
    func line(_ row: [String]) -> String {
        "| " + row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: " | ") + " |"
    }
    return ([line(header), "|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|"] + rows.dropFirst().map(line))
        .joined(separator: "\n")
}
