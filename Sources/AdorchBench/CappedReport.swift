import Foundation

/// The capped variant of a day against the day as it is, for adorch. The caps take shows away
/// from one slot, and the scheduler must stop loading ads for them: its waste must not rise
/// because of them. The control, adorch with the caps checked by the app and unknown to the
/// engine, is asked the same requests as adorch with the caps in its engine: between those
/// two lies what the engine's handling of caps changes; between the day as it is and the
/// control, what the smaller demand changes.
public struct CappedDayReport: Sendable {
    public var uncapped: DayBenchmark
    public var capped: DayBenchmark

    /// The capped variant of `uncapped`'s day, every policy on it; nil for a day without slots.
    public init?(uncapped: DayBenchmark) {
        guard let caps = DayCaps(on: uncapped.workload) else { return nil }
        self.uncapped = uncapped
        capped = DayBenchmark.run(uncapped.workload, caps: caps)
    }

    /// The comparison every capped target makes: `capped` wastes no more ads than `than`. Ads,
    /// not the share of fills: the caps take fills away from their slot, so the same ads
    /// wasted elsewhere are a larger share of fewer fills, with nothing wasted more.
    public static func wasteHolds(_ capped: DayResult, than: DayResult) -> Bool { capped.wasted <= than.wasted }

    public var text: String {
        guard let caps = capped.caps, let before = uncapped.adorch, let control = capped.control, let after = capped.adorch else { return "" }
        let slot = capped.workload.slots[caps.slot].id
        var rows = [["adorch", "capped", "hit rate (let in)", "\(slot) misses", "waste", "wasted / fills", "\(slot) wasted / fills",
                     "other slots wasted", "loads"]]
        for (name, r) in [("the day as it is", before), ("capped, caps in the app", control), ("capped, caps in the engine", after)] {
            rows.append([name, "\(r.capped)", percent(r.hitRate), "\(r.slotMisses[caps.slot])", percent(r.waste), "\(r.wasted) / \(r.fills)",
                         "\(r.slotWasted[caps.slot]) / \(r.slotFills[caps.slot])", "\(r.wasted - r.slotWasted[caps.slot])", "\(r.loadCalls)"])
        }
        return """
            The capped day: the same trace with \(caps.describe(capped.workload)), each request's user drawn from an audience of \
            \(Audience.size) (the k-th busiest asking 1/k as often as the busiest). The references, and adorch as the control \
            ("caps in the app"), are asked only the requests the rules let in; adorch with the caps in its engine is asked every \
            request and answers Capped itself. Hit rates are over the requests let in.

            \(capped.table)
            adorch on the day as it is and capped. The control sees the same requests as adorch with the caps in its engine: \
            between them lies what the engine's handling of caps changes. The day's waste share rises when the caps take fills \
            from a slot that wastes less than the others, with no ad more wasted.

            \(markdownTable(rows))

            """
    }

    public var targets: [(String, Bool)] {
        guard let before = uncapped.adorch, let control = capped.control, let after = capped.adorch else { return [] }
        return [
            ("capped day: adorch wastes no more ads than on the day as it is (\(after.wasted) vs \(before.wasted); "
                + "\(percent(after.waste)) vs \(percent(before.waste)) of fills)", Self.wasteHolds(after, than: before)),
            ("capped day: adorch wastes no more ads than the control, caps in the app (\(after.wasted) vs \(control.wasted))",
             Self.wasteHolds(after, than: control)),
        ]
    }
}

/// adorch on one day's capped variant, with the caps in its engine and in the app.
public struct CappedRuns: Sendable {
    /// The capped slot.
    public var slot: Int
    public var engine: DayResult
    public var control: DayResult

    /// Both runs on the day's own trace; nil for a day without slots.
    static func run(_ workload: Workload) -> CappedRuns? {
        guard let caps = DayCaps(on: workload) else { return nil }
        let trace = Trace(workload)
        return CappedRuns(slot: caps.slot, engine: DaySimulator.run(AdorchPolicy(), workload: workload, trace: trace, caps: caps),
                          control: DaySimulator.run(AdorchPolicy(capsInEngine: false), workload: workload, trace: trace, caps: caps))
    }
}

extension DayBenchmark {
    public var adorch: DayResult? { results.first { $0.policy == "adorch" } }
    /// adorch with the caps checked by the app: on a capped day only.
    public var control: DayResult? { results.first { $0.policy == AdorchPolicy.controlName } }
}

extension FamilyBenchmark {
    /// Each day with its capped runs, numbered from 1.
    private var cappedDays: [(day: Int, workload: Workload, uncapped: DayResult, capped: CappedRuns)] {
        runs.indices.compactMap { i in
            guard let capped = capped[i], let uncapped = runs[i].adorch else { return nil }
            return (i + 1, runs[i].workload, uncapped, capped)
        }
    }

    /// The capped variants in figures: adorch on each, beside the day as it is.
    public var cappedReport: String {
        let days = cappedDays
        guard !days.isEmpty else { return "" }
        var rows = [["adorch", "capped share median", "capped share max", "hit median", "hit min", "capped slots' misses, all days",
                     "waste median", "waste p90", "waste max", "wasted / fills, all days"]]
        for (name, results) in [("the days as they are", days.map(\.uncapped)), ("capped, caps in the app", days.map(\.capped.control)),
                                ("capped, caps in the engine", days.map(\.capped.engine))] {
            let share = results.map { Double($0.capped) / Double(max(1, $0.requests)) }, hit = results.map(\.hitRate), waste = results.map(\.waste)
            let misses = zip(days, results).map { $1.slotMisses[$0.capped.slot] }.reduce(0, +)
            rows.append([name, percent(percentile(share, 0.5)), percent(percentile(share, 1)), percent(percentile(hit, 0.5)), percent(percentile(hit, 0)),
                         "\(misses)", percent(percentile(waste, 0.5)), percent(percentile(waste, 0.9)), percent(percentile(waste, 1)), pooled(results)])
        }
        var out = "\nThe capped variant of each day (its busiest rewarded slot, or its busiest slot if it has no rewarded one, behind "
            + "\(DayCaps.publisherRules.map(\.name).joined(separator: ", "))), adorch on each; hit rates over the requests let in:\n\n"
            + markdownTable(rows) + "\n"
        let rose = days.filter { !CappedDayReport.wasteHolds($0.capped.engine, than: $0.capped.control) }
        guard !rose.isEmpty else { return out }
        out += "\nDays on which adorch's waste with the caps in its engine is above the control's (day as it is → caps in the app → in the engine):\n\n"
        for day in rose {
            let slot = day.capped.slot
            func figures(_ r: DayResult) -> String { "\(r.wasted) / \(r.fills), \(r.slotWasted[slot]) / \(r.slotFills[slot]) in the slot" }
            out += "- day \(day.day), \(day.workload.slots[slot].id) capped \(day.capped.engine.capped) times: waste \(percent(day.uncapped.waste)) → "
                + "\(percent(day.capped.control.waste)) → \(percent(day.capped.engine.waste)) (\(figures(day.uncapped)) → \(figures(day.capped.control)) → "
                + "\(figures(day.capped.engine))); misses in the slot \(day.capped.control.slotMisses[slot]) → \(day.capped.engine.slotMisses[slot])\n"
        }
        return out
    }

    var cappedTargets: [(String, Bool)] {
        let days = cappedDays
        let belowDay = days.filter { CappedDayReport.wasteHolds($0.capped.engine, than: $0.uncapped) }.count
        let belowControl = days.filter { CappedDayReport.wasteHolds($0.capped.engine, than: $0.capped.control) }.count
        func wasted(_ results: [DayResult]) -> Int { results.map(\.wasted).reduce(0, +) }
        let engine = wasted(days.map(\.capped.engine)), control = wasted(days.map(\.capped.control)), asIs = wasted(days.map(\.uncapped))
        return [
            ("family, capped: adorch wastes no more ads over all days than on the days as they are (\(engine) vs \(asIs); "
                + "day by day on \(belowDay) of \(days.count))", engine <= asIs),
            ("family, capped: adorch wastes no more ads over all days than the control, caps in the app (\(engine) vs \(control); "
                + "day by day on \(belowControl) of \(days.count))", engine <= control),
        ]
    }

    private func pooledWaste(_ results: [DayResult]) -> Double {
        let fills = results.map(\.fills).reduce(0, +)
        return fills == 0 ? 0 : Double(results.map(\.wasted).reduce(0, +)) / Double(fills)
    }

    private func pooled(_ results: [DayResult]) -> String {
        "\(results.map(\.wasted).reduce(0, +)) / \(results.map(\.fills).reduce(0, +)) (\(percent(pooledWaste(results))))"
    }
}

private func percent(_ x: Double) -> String { String(format: "%.2f %%", x * 100) }
