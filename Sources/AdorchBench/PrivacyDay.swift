import AdorchEngine
import AdorchLocking
import Dispatch
import Foundation

/// The privacy day: adorch alone on a day whose viewers set their privacy (`AudiencePrivacy`)
/// and whose networks declare what they serve, so its inventory is partitioned by class
/// (docs/privacy.md, "Inventory"). The reference policies know nothing of privacy: they are
/// not run on it.
public struct PrivacyDay: Sendable {
    public var workload: Workload
    public var privacy: DayPrivacy
    public var result: DayResult

    /// Each group of viewers must be served on the standard day as well as readiness allows
    /// any viewer, and the classes must not cost more than a few ads wasted.
    public static let groupHitTarget = 0.99
    public static let wasteTarget = 0.01

    public static func run(_ workload: Workload, mix: AudiencePrivacy = .standard) -> PrivacyDay {
        let privacy = DayPrivacy(mix, for: workload)
        let started = ContinuousClock.now
        var result = DaySimulator.run(AdorchPolicy(), workload: workload, trace: Trace(workload), privacy: privacy)
        result.elapsed = ContinuousClock.now - started
        return PrivacyDay(workload: workload, privacy: privacy, result: result)
    }

    public var groups: [AudiencePrivacy.Group] { privacy.mix.groups }

    /// Per group: its users, requests and their share, hits, and where it missed; then the
    /// day's waste. `baseline` is adorch on the same day without the mix, for comparison.
    public func table(baseline: DayResult?) -> String {
        let r = result
        var rows = [["viewers", "signals", "users", "requests", "share of requests", "hits", "hit rate", "misses by slot"]]
        for (g, group) in groups.enumerated() {
            let misses = zip(workload.slots, r.groupSlotMisses[g]).filter { $0.1 > 0 }.map { "\($0.0.id) \($0.1)" }
            rows.append([group.name, describe(group.signals), "\(privacy.group.filter { $0 == g }.count)", "\(r.groupRequests[g])",
                         percent(Double(r.groupRequests[g]) / Double(max(1, r.requests))), "\(r.groupHits[g])",
                         r.groupHitRate(g).map(percent) ?? "—", misses.isEmpty ? "none" : misses.joined(separator: ", ")])
        }
        rows.append(["all", "", "\(Audience.size)", "\(r.requests)", percent(1), "\(r.hits)", percent(r.hitRate), "\(r.requests - r.hits)"])
        let children = workload.networks.indices.filter { privacy.networks[$0].servesChildren }.map { workload.networks[$0].name }
        return """
            Day of traffic: \(String(format: "%g", workload.hours)) h, seed \(workload.seed), \(r.requests) show requests, \
            \(workload.slots.count) slots; networks serving children: \(children.joined(separator: ", ")) (every network serves \
            non-personalised ads).

            \(markdownTable(rows))

            Waste \(percent(r.waste)) (\(r.wasted) of \(r.fills) fills), \(r.loadCalls) loads, \(r.rateLimitHits) rate-limit hits, \
            \(r.wrongClass) ads handed to a viewer their class is not allowed for\
            \(baseline.map { "; on the same day without the mix: hit rate \(percent($0.hitRate)), waste \(percent($0.waste)) (\($0.wasted) of \($0.fills)), \($0.loadCalls) loads" } ?? "").

            """
    }

    public var targets: [(String, Bool)] {
        let r = result
        return groups.indices.map { g in
            let rate = r.groupHitRate(g)
            return ("privacy day, \(groups[g].name): hit rate ≥ \(whole(Self.groupHitTarget)) (\(rate.map(percent) ?? "no request"))",
                    (rate ?? 1) >= Self.groupHitTarget)
        } + [
            ("privacy day: waste ≤ \(whole(Self.wasteTarget)) (\(percent(r.waste)))", r.waste <= Self.wasteTarget),
            ("privacy day: no ad handed to a viewer its class is not allowed for (\(r.wrongClass))", r.wrongClass == 0),
        ]
    }

    /// What a group's app says, in the Privacy type's field names.
    private func describe(_ s: PrivacySignals) -> String {
        var fields = ["gdpr_applies: \(s.gdprApplies == .yes ? "true" : s.gdprApplies == .no ? "false" : "unknown")"]
        if s.nonPersonalized { fields.append("non_personalized") }
        if s.childDirected { fields.append("child_directed") }
        if s.underAgeOfConsent { fields.append("under_age_of_consent") }
        if s.tcString != nil { fields.append("tc_string") }
        if s.usPrivacy != nil { fields.append("us_privacy") }
        if s.gpp != nil { fields.append("gpp") }
        return fields.joined(separator: ", ")
    }
}

/// adorch on every day of the family with the same mix: per day, each group's hit rate and
/// the waste.
public struct PrivacyFamily: Sendable {
    public var days: [PrivacyDay]
    public var elapsed: Duration

    /// The days in parallel, each with its own simulator and engine.
    public static func run(_ workloads: [Workload], mix: AudiencePrivacy = .standard) -> PrivacyFamily {
        let started = ContinuousClock.now
        let done = LockedValue([PrivacyDay?](repeating: nil, count: workloads.count))
        DispatchQueue.concurrentPerform(iterations: workloads.count) { i in
            let day = PrivacyDay.run(workloads[i], mix: mix)
            done.withLock { $0[i] = day }
        }
        return PrivacyFamily(days: done.withLock { $0.map { $0! } }, elapsed: ContinuousClock.now - started)
    }

    private var groups: [AudiencePrivacy.Group] { days.first?.groups ?? [] }

    /// Group `g`'s hit rate on each day it asked anything.
    func hitRates(_ g: Int) -> [Double] { days.compactMap { $0.result.groupHitRate(g) } }

    /// `baseline`: adorch on each day without the mix (the day section's runs), when at hand.
    public func report(baseline: [DayResult]?) -> String {
        let without: [String] = baseline == nil ? [] : ["without the mix: hit, waste"]
        var rows = [["day", "requests"] + groups.map { "\($0.name) hit (requests)" } + ["waste", "wasted / fills", "waste ≤ \(whole(PrivacyDay.wasteTarget))"] + without]
        for (k, day) in days.enumerated() {
            let r = day.result
            let hits: [String] = groups.indices.map { g in r.groupHitRate(g).map { "\(percent($0)) (\(r.groupRequests[g]))" } ?? "— (0)" }
            let waste: [String] = [percent(r.waste), "\(r.wasted) / \(r.fills)", r.waste <= PrivacyDay.wasteTarget ? "met" : "MISSED"]
            let before: [String] = baseline.map { ["\(percent($0[k].hitRate)), \(percent($0[k].waste))"] } ?? []
            rows.append(["\(k + 1)", "\(r.requests)"] + hits + waste + before)
        }
        var summary = [["viewers", "hit median", "hit p10", "hit min", "days with requests"]]
        for g in groups.indices {
            let rates = hitRates(g)
            summary.append([groups[g].name, percent(percentile(rates, 0.5)), percent(percentile(rates, 0.1)), percent(percentile(rates, 0)),
                            "\(rates.count)"])
        }
        return """
            The family with the same mix: \(days.count) days, adorch alone, simulated in \(seconds(elapsed)) s; each day's users \
            dealt to the groups by its own seed, its networks declared by the same rule.

            \(markdownTable(summary))

            \(markdownTable(rows))

            """
    }

    /// Each group held to the family's own hit-rate targets, and every day to the waste target.
    public var targets: [(String, Bool)] {
        let median = FamilyBenchmark.medianHitTarget, p10 = FamilyBenchmark.p10HitTarget
        let over = days.indices.filter { days[$0].result.waste > PrivacyDay.wasteTarget }.map { "\($0 + 1)" }
        let wrong = days.map(\.result.wrongClass).reduce(0, +)
        return groups.indices.flatMap { g -> [(String, Bool)] in
            let rates = hitRates(g)
            return [
                ("privacy family, \(groups[g].name): median hit rate ≥ \(whole(median)) (\(percent(percentile(rates, 0.5))))",
                 percentile(rates, 0.5) >= median),
                ("privacy family, \(groups[g].name): 10th percentile hit rate ≥ \(whole(p10)) (\(percent(percentile(rates, 0.1))))",
                 percentile(rates, 0.1) >= p10),
            ]
        } + [
            ("privacy family: waste ≤ \(whole(PrivacyDay.wasteTarget)) on every day (\(days.count - over.count) of \(days.count)"
                + (over.isEmpty ? ")" : "; over on days \(over.joined(separator: ", ")))"), over.isEmpty),
            ("privacy family: no ad handed to a viewer its class is not allowed for (\(wrong))", wrong == 0),
        ]
    }
}

private func percent(_ x: Double) -> String { x.isNaN ? "—" : String(format: "%.2f %%", x * 100) }

/// A target share as the targets print it: "99 %".
func whole(_ x: Double) -> String { String(format: "%g %%", x * 100) }
