/// The impressions the frequency rules count (docs/caps.md), indexed the four ways a rule
/// asks: per slot, per slot and user, per network instance, per network instance and user.
/// Times are kept oldest first and only for as long as the longest window of any rule.
struct ImpressionHistory: Sendable {
    struct Key: Hashable, Sendable {
        var slot: String
        var network: CapNetwork?
        /// nil: every user together (a `per = "slot"` rule).
        var userID: String?
    }

    private var times: [Key: [Int64]] = [:]
    /// How long an impression is kept: the longest window of the rules in force.
    private(set) var keep: Duration = .zero
    /// The next time `prune` walks every key, on the engine's clock.
    private var nextPrune: Int64 = .min

    /// The times one rule counts, oldest first.
    func times(_ key: Key) -> ArraySlice<Int64> { times[key]?[...] ?? [] }

    var isEmpty: Bool { times.isEmpty }

    mutating func add(_ impression: CountedImpression) {
        let slot = impression.slot, user = impression.userID, network = impression.network
        for key in [Key(slot: slot, network: nil, userID: nil), Key(slot: slot, network: nil, userID: user),
                    Key(slot: slot, network: network, userID: nil), Key(slot: slot, network: network, userID: user)] {
            var list = times[key, default: []]
            // In order as impressions come; a restore may not be.
            let at = impression.at
            if let last = list.last, last > at {
                list.insert(at, at: FrequencyRule.firstIndex(in: list[...], after: at))
            } else {
                list.append(at)
            }
            times[key] = list
        }
    }

    /// Drops what no rule can count any more: at most once per minute (or per `keep`, if
    /// shorter), so that a busy slot does not walk its history on every input.
    mutating func prune(now: Int64) {
        guard now >= nextPrune else { return }
        let keepNS = keep.nanosecondsClamped
        nextPrune = now &+ min(keepNS, 60_000_000_000)
        let oldest = now &- keepNS
        for (key, list) in times {
            let first = FrequencyRule.firstIndex(in: list[...], after: oldest)
            if first == list.count {
                times[key] = nil
            } else if first > 0 {
                times[key] = Array(list[first...])
            }
        }
    }

    /// The rules changed: the next input prunes by their longest window.
    mutating func keepFor(_ longest: Duration) {
        keep = longest
        nextPrune = .min
    }
}
