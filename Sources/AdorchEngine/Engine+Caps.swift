import Glibc

// Frequency caps and pacing (docs/caps.md): which Shows a slot's and its networks' rules
// let in, what they count, and how the scheduler stops holding ads nobody may be shown.

extension Moment {
    /// The moment as the impression history keeps time: signed, so that an impression from
    /// before the clock's origin (a reboot ago) still has its place.
    public var capTime: Int64 { Int64(clamping: nanoseconds) }
}

extension Engine {
    /// The most users per slot the scheduler keeps track of: past that many, some user is
    /// taken to be free to see an ad, and the slot's buffer is held as usual.
    public static let expectedUsersAtMost = 256

    // MARK: Show

    /// Why a Show for `userID` in this slot is refused now, if a rule holds it: the slot's
    /// own rules, or the entry rules of every network whose ads it could take.
    func capRefusal(_ slotID: String, userID: String?, now: Moment) -> ShowError? {
        capHold(slot: slotID, userID: userID, now: now).map {
            .capped(slot: slotID, rule: $0.ruleName, retryAfter: $0.retryAfter)
        }
    }

    /// The rule that holds a Show for `userID` (nil: one without a user id) in this slot now,
    /// the stricter (latest to free) when several do: what Show answers and ListSlots tells.
    /// The entries' rules hold the slot when every entry's do: then the one that frees first.
    /// While some network may still serve the user, a Show skips the held ones' ads instead.
    public func capHold(slot slotID: String, userID: String?, now: Moment) -> CapHold? {
        guard let slot = slots[slotID], slot.config.hasCaps else { return nil }
        let user = userID ?? ""
        if let hold = strictest(slot.config.caps, slot: slotID, network: nil, user: user, now: now) { return hold }
        let held = entryHolds(slot, user: user, now: now)
        guard held.count == slot.config.waterfall.count else { return nil }
        return held.values.min { ($0.until, $0.ruleName) < ($1.until, $1.ruleName) }
    }

    /// The entries whose own rules hold `user` now, by index.
    func entryHolds(_ slot: SlotState, user: String, now: Moment) -> [Int: CapHold] {
        var held: [Int: CapHold] = [:]
        for (index, entry) in slot.config.waterfall.enumerated() where !entry.caps.isEmpty {
            held[index] = strictest(entry.caps, slot: slot.config.id, network: entry.capNetwork, user: user, now: now)
        }
        return held
    }

    /// Of `rules`, the one that holds `user` longest now; only those of `scopes`. The rules of
    /// the scopes in `expecting` count one impression more, now: the one of an ad being shown.
    func strictest(_ rules: [FrequencyRule], slot: String, network: CapNetwork?, user: String,
                   scopes: Set<FrequencyRule.Scope> = [.user, .slot], expecting: Set<FrequencyRule.Scope> = [],
                   now: Moment) -> CapHold? {
        var latest: (rule: FrequencyRule, at: Int64)?
        for rule in rules where scopes.contains(rule.scope) {
            let key = ImpressionHistory.Key(slot: slot, network: network, userID: rule.scope == .user ? user : nil)
            let times = expecting.contains(rule.scope) ? (Array(history.times(key)) + [now.capTime])[...] : history.times(key)
            guard let frees = rule.freesAt(times, now: now.capTime), frees > latest?.at ?? .min else { continue }
            latest = (rule, frees)
        }
        return latest.map { hold($0.rule, network: network, frees: $0.at, now: now) }
    }

    private func hold(_ rule: FrequencyRule, network: CapNetwork?, frees: Int64, now: Moment) -> CapHold {
        let waitNS = frees - now.capTime
        let wholeMilliseconds = waitNS / 1_000_000 + (waitNS % 1_000_000 == 0 ? 0 : 1)
        return CapHold(rule: rule, network: network, until: Moment(nanoseconds: UInt64(clamping: frees)),
                       retryAfter: .milliseconds(wholeMilliseconds))
    }

    /// Every rule of the slot and its entries, with what it counts for `userID` now: for
    /// `adorchctl caps`. nil for a slot that does not exist.
    public func capUses(slot slotID: String, userID: String?, now: Moment) -> [CapUse]? {
        guard let slot = slots[slotID] else { return nil }
        let user = userID ?? ""
        let owned = slot.config.caps.map { (rule: $0, network: CapNetwork?.none) }
            + slot.config.waterfall.flatMap { entry in entry.caps.map { (rule: $0, network: Optional(entry.capNetwork)) } }
        return owned.map { rule, network in
            let key = ImpressionHistory.Key(slot: slotID, network: network, userID: rule.scope == .user ? user : nil)
            let times = history.times(key)
            let counted = times.count - FrequencyRule.firstIndex(in: times, after: now.capTime &- rule.window.nanosecondsClamped)
            let hold = rule.freesAt(times, now: now.capTime).map { self.hold(rule, network: network, frees: $0, now: now) }
            return CapUse(rule: rule, network: network, counted: counted, hold: hold)
        }
    }

    // MARK: Counting

    /// The ad's impression counts against its slot's and entry's rules, once ever
    /// (docs/caps.md, "Counting"). The shell stores it before anyone hears of it.
    mutating func countAgainstCaps(_ id: AdID, now: Moment) -> [Effect] {
        guard let ad = ads[id], !ad.capCounted, let slot = slots[ad.slot], slot.config.hasCaps,
              slot.config.waterfall.indices.contains(ad.entryIndex)
        else { return [] }
        ads[id]!.capCounted = true
        let impression = CountedImpression(slot: ad.slot, network: slot.config.waterfall[ad.entryIndex].capNetwork,
                                           userID: ad.userID ?? "", at: now.capTime)
        history.add(impression)
        // An entry's per-slot rule may hold it from now on: its ready ads no longer fill the buffer.
        let refilled = slot.config.waterfall[ad.entryIndex].caps.contains { $0.scope == .slot } ? refill(ad.slot, now: now) : []
        return [.recordImpression(impression)] + refilled
    }

    /// Impressions read back from the state directory at start.
    public mutating func restoreImpressions(_ impressions: [CountedImpression]) {
        for impression in impressions { history.add(impression) }
    }

    /// History is kept for the longest window of the rules in force.
    mutating func keepHistoryForRules() {
        history.keepFor(slots.values.flatMap(\.config.allCaps).map(\.window).max() ?? .zero)
    }

    // MARK: The scheduler

    /// A Show asked the slot for `userID`'s ad: that user is expected again.
    mutating func noteAsker(_ slotID: String, userID: String?, now: Moment) {
        guard let slot = slots[slotID], slot.config.caps.contains(where: { $0.scope == .user }) else { return }
        // A user who comes back after a while is one it knows, not a new one.
        if slot.askers[userID ?? ""] == nil { slots[slotID]!.newcomers.noteShow(at: now) }
        if slot.askers[userID ?? ""] == nil, slot.askers.count >= Self.expectedUsersAtMost,
           let oldest = slot.askers.min(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            slots[slotID]!.askers[oldest.key] = nil
        }
        slots[slotID]!.askers[userID ?? "", default: .min] = now.capTime
    }

    /// Until when no user the slot expects may be shown an ad (docs/caps.md, "The scheduler"):
    /// its per-slot rules hold everyone, or every user who asked within its per-user rules'
    /// longest window is held and a user it does not know is unlikely to ask before then
    /// (less likely than `BufferTarget.useChance`, as for any ad held). nil when someone may
    /// be shown one. `expecting`: the user of an ad a Show is taking, whose impression is
    /// about to count.
    func everyoneHeldUntil(_ slot: SlotState, expecting: String? = nil, now: Moment) -> Moment? {
        let rules = slot.config.caps
        guard !rules.isEmpty else { return nil }
        let slotID = slot.config.id
        let pending: Set<FrequencyRule.Scope> = expecting == nil ? [] : [.slot]
        let forAll = strictest(rules, slot: slotID, network: nil, user: "", scopes: [.slot], expecting: pending, now: now)?.until
        let perUser = rules.filter { $0.scope == .user }
        guard let longest = perUser.map(\.window).max() else { return forAll }
        let since = now.capTime &- longest.nanosecondsClamped
        let expected = slot.askers.filter { $0.value > since }.keys
        // A full list that asked wholly within the window may have let go of a user who did too.
        let forgotten = slot.askers.count >= Self.expectedUsersAtMost && expected.count == slot.askers.count
        guard !expected.isEmpty, !forgotten else { return forAll }
        var soonest = Moment(nanoseconds: .max)
        for user in expected {
            let counts = user == expecting ? pending.union([.user]) : pending
            guard let until = strictest(rules, slot: slotID, network: nil, user: user, expecting: counts, now: now)?.until else { return nil }
            soonest = min(soonest, until)
        }
        let newcomers = max(slot.newcomers.longRate(at: now), slot.newcomers.shortRate(at: now))
        guard 1 - exp(-newcomers * (soonest - now).seconds) < BufferTarget.useChance else { return forAll }
        return soonest
    }

    /// A held slot fills again this much before its hold ends, on top of twice a refill's
    /// expected time: a refill slower than its mean must not make the first Show let in miss.
    public static let capFillMargin: Duration = .seconds(1)

    /// When the slot's buffer fills again if no one it expects may be shown an ad before a
    /// refill started later would have one ready: nil when it is held as usual.
    func capFillFrom(_ slot: SlotState, expecting: String? = nil, now: Moment) -> Moment? {
        guard let until = everyoneHeldUntil(slot, expecting: expecting, now: now) else { return nil }
        let usable = slot.config.waterfall.indices.filter { availablePlugins.contains(slot.config.waterfall[$0].plugin) }
        let refill = BufferTarget.chain(usable.map { slot.entries[$0].estimate }, ttl: slot.config.ttl).refill
        let fillFrom = until - .saturating(nanoseconds: 2 * refill * 1e9) - Self.capFillMargin
        return fillFrom > now ? fillFrom : nil
    }

    /// Whether the waterfall may ask this entry now: its per-slot rules do not hold it.
    func entryOpenToAll(_ slot: SlotState, _ index: Int, now: Moment) -> Bool {
        let entry = slot.config.waterfall[index]
        guard entry.caps.contains(where: { $0.scope == .slot }) else { return true }
        return strictest(entry.caps, slot: slot.config.id, network: entry.capNetwork, user: "", scopes: [.slot], now: now) == nil
    }

    /// The entries whose per-slot rules hold them now: their ready ads serve no one, so they
    /// are not part of the slot's buffer.
    func entriesClosedToAll(_ slot: SlotState, now: Moment) -> Set<Int> {
        guard slot.config.waterfall.contains(where: { $0.caps.contains { $0.scope == .slot } }) else { return [] }
        return Set(slot.config.waterfall.indices.filter { !entryOpenToAll(slot, $0, now: now) })
    }
}

extension Engine {
    /// How long the impression history is kept: the longest window of the rules in force.
    public var capHistoryKept: Duration { history.keep }
}
