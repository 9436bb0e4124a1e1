/// Impressions the frequency rules count (docs/caps.md), indexed the four ways a rule asks:
/// per slot, per slot and user, per network instance, per network instance and user. Times
/// are kept oldest first; `prune` drops those older than the longest window of any rule.
struct ImpressionHistory: Sendable {
    struct Key: Hashable, Sendable {
        var slot: String
        var network: CapNetwork?
        /// nil: every user together (a `per = "slot"` rule).
        var user: CapUser?
    }

    private var times: [Key: [Int64]] = [:]
    /// How long an impression is kept: the longest window of the rules in force.
    private(set) var keep: Duration = .zero
    /// The next time `prune` walks every key, on the engine's clock.
    private var nextPrune: Int64 = .min

    /// The times one rule counts, oldest first.
    func times(_ key: Key) -> ArraySlice<Int64> { times[key]?[...] ?? [] }

    var isEmpty: Bool { times.isEmpty }

    private static func keys(of impression: CountedImpression) -> [Key] {
        let (slot, user, network) = (impression.slot, impression.user, impression.network)
        return [Key(slot: slot, network: nil, user: nil), Key(slot: slot, network: nil, user: user),
                Key(slot: slot, network: network, user: nil), Key(slot: slot, network: network, user: user)]
    }

    mutating func add(_ impression: CountedImpression) {
        let at = impression.at
        for key in Self.keys(of: impression) {
            // In place: a copy of the list per impression made reading a long history back quadratic.
            let before = times[key].flatMap { list in (list.last ?? .min) > at ? FrequencyRule.firstIndex(in: list[...], after: at) : nil }
            if let before { times[key]!.insert(at, at: before) } else { times[key, default: []].append(at) }
        }
    }

    /// Takes back one impression `add` put in (an ad that ended uncounted).
    mutating func remove(_ impression: CountedImpression) {
        for key in Self.keys(of: impression) {
            guard let list = times[key] else { continue }
            let index = FrequencyRule.firstIndex(in: list[...], after: impression.at) - 1
            guard index >= 0, list[index] == impression.at else { continue }
            if list.count == 1 { times[key] = nil } else { times[key]!.remove(at: index) }
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
                times[key]!.removeFirst(first)
            }
        }
    }

    /// The rules changed: the next input prunes by their longest window.
    mutating func keepFor(_ longest: Duration) {
        keep = longest
        nextPrune = .min
    }
}
