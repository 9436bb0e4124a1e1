import AdorchEngine

/// The capped variant of a day: its busiest rewarded slot (rw_hot on the standard day; the
/// busiest slot of any format on a day without a rewarded one) under a publisher's per-user
/// rules. The app-side check every policy is run behind: a request the rules refuse never
/// reaches a reference policy, and adorch's engine must answer Capped to exactly those.
public struct DayCaps: Sendable, Equatable {
    /// What a publisher sets on a busy rewarded placement: at most 3 ads a user in 10 minutes,
    /// and a minute between two. Defined here only; the engine's slot gets the same rules.
    public static let publisherRules: [FrequencyRule] = [.cap(3, per: .seconds(600)), .pacing(.seconds(60))]

    public let slot: Int
    public let rules: [FrequencyRule]

    /// nil for a day without slots.
    public init?(on workload: Workload) {
        let rewarded = workload.slots.indices.filter { workload.slots[$0].format == .rewarded }
        let candidates = rewarded.isEmpty ? Array(workload.slots.indices) : rewarded
        guard let busiest = candidates.max(by: { workload.slots[$0].basePerHour < workload.slots[$1].basePerHour }) else { return nil }
        (slot, rules) = (busiest, Self.publisherRules)
    }

    /// Which requests the rules refuse, in the trace's shape. Every let-in request counts as
    /// an impression at its time, whether or not the policy had an ad for it: the simulator
    /// treats a miss as served once an ad is ready (its wait), and every policy must face the
    /// same let-in requests. adorch's engine counts only the impressions it served, so after a
    /// miss on this slot it may let in a request refused here (DayBenchmarkTests checks that
    /// without such a miss the two agree on every request). Times are the engine's
    /// nanoseconds, so a request at a window's very edge is judged as the engine judges it.
    public func refused(in trace: Trace) -> [[Bool]] {
        var refused = trace.requests.map { $0.map { _ in false } }
        // Per user, and every user together (a per-slot rule's count).
        var counted: [Int?: [Int64]] = [:]
        for (i, t) in trace.requests[slot].enumerated() {
            let user = trace.users[slot][i], now = AdorchPolicy.moment(t).capTime
            if rules.contains(where: { $0.freesAt(counted[$0.scope == .user ? user : nil, default: []][...], now: now) != nil }) {
                refused[slot][i] = true
            } else {
                counted[user, default: []].append(now)
                counted[nil, default: []].append(now)
            }
        }
        return refused
    }

    /// How a report names the variant: "rw_hot: 3 per 10m per user, pacing 1m per user".
    public func describe(_ workload: Workload) -> String {
        "\(workload.slots[slot].id): \(rules.map(\.name).joined(separator: ", "))"
    }
}
