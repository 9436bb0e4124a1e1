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
    /// A held slot fills again this much before its hold ends, on top of twice a refill's
    /// expected time: a refill slower than its mean must not make the first Show let in miss.
    public static let capFillMargin: Duration = .seconds(1)

    /// How long the impression history is kept: the longest window of the rules in force.
    public var capHistoryKept: Duration { history.keep }

    // MARK: Show

    /// The rule that holds a Show for `user` in this slot now, the stricter (latest to free)
    /// when several do: what Show answers and ListSlots tells. A network's rules hold the slot
    /// only when every network's do, and then from when the first of them frees; while some
    /// network may still serve the user, a Show skips the held ones' ads instead.
    public func capHold(slot slotID: String, user: CapUser, now: Moment) -> CapHold? {
        guard let slot = slots[slotID], slot.config.hasCaps else { return nil }
        let own = strictest(slot.config.caps, slot: slotID, network: nil, user: user, now: now)
        let held = entryHolds(slot, user: user, now: now)
        let networks = held.count == slot.config.waterfall.count ? held.values.min { ($0.until, $0.ruleName) < ($1.until, $1.ruleName) } : nil
        return [own, networks].compactMap { $0 }.max { $0.until < $1.until }
    }

    /// The entries whose own rules hold `user` now, by index.
    func entryHolds(_ slot: SlotState, user: CapUser, now: Moment) -> [Int: CapHold] {
        var held: [Int: CapHold] = [:]
        for (index, entry) in slot.config.waterfall.enumerated() where !entry.caps.isEmpty {
            held[index] = strictest(entry.caps, slot: slot.config.id, network: entry.capNetwork, user: user, now: now)
        }
        return held
    }

    /// Of `rules`, the one that holds `user` longest now; only those of `scopes`.
    func strictest(_ rules: [FrequencyRule], slot: String, network: CapNetwork?, user: CapUser,
                   scopes: Set<FrequencyRule.Scope> = [.user, .slot], now: Moment) -> CapHold? {
        var latest: (rule: FrequencyRule, at: Int64)?
        for rule in rules where scopes.contains(rule.scope) {
            let key = ImpressionHistory.Key(slot: slot, network: network, user: rule.scope == .user ? user : nil)
            guard let frees = rule.freesAt(counted(key), now: now.capTime), frees > latest?.at ?? .min else { continue }
            latest = (rule, frees)
        }
        return latest.map { hold($0.rule, network: network, frees: $0.at, now: now) }
    }

    /// Of `rules`, the per-slot one that holds everyone longest now.
    func strictestForAll(_ rules: [FrequencyRule], slot: String, network: CapNetwork?, now: Moment) -> CapHold? {
        strictest(rules, slot: slot, network: network, user: CapUser(uid: nil, id: nil), scopes: [.slot], now: now)
    }

    /// What a rule counts: the impressions counted, and the ads handed out that are not yet
    /// (docs/caps.md, "Counting"), at the moment their Show took them.
    private func counted(_ key: ImpressionHistory.Key) -> ArraySlice<Int64> {
        let done = history.times(key), waiting = pending.times(key)
        return waiting.isEmpty ? done : (Array(done) + waiting).sorted()[...]
    }

    private func hold(_ rule: FrequencyRule, network: CapNetwork?, frees: Int64, now: Moment) -> CapHold {
        let waitNS = frees - now.capTime
        let wholeMilliseconds = waitNS / 1_000_000 + (waitNS % 1_000_000 == 0 ? 0 : 1)
        return CapHold(rule: rule, network: network, until: Moment(nanoseconds: UInt64(clamping: frees)),
                       retryAfter: .milliseconds(wholeMilliseconds))
    }

    /// Every rule of the slot and its entries, with what it counts for `user` now: for
    /// `adorchctl caps`. nil for a slot that does not exist.
    public func capUses(slot slotID: String, user: CapUser, now: Moment) -> [CapUse]? {
        guard let slot = slots[slotID] else { return nil }
        let owned = slot.config.caps.map { (rule: $0, network: CapNetwork?.none) }
            + slot.config.waterfall.flatMap { entry in entry.caps.map { (rule: $0, network: Optional(entry.capNetwork)) } }
        return owned.map { rule, network in
            let times = counted(ImpressionHistory.Key(slot: slotID, network: network, user: rule.scope == .user ? user : nil))
            let inWindow = times.count - FrequencyRule.firstIndex(in: times, after: now.capTime &- rule.window.nanosecondsClamped)
            let hold = rule.freesAt(times, now: now.capTime).map { self.hold(rule, network: network, frees: $0, now: now) }
            return CapUse(rule: rule, network: network, counted: inWindow, hold: hold)
        }
    }

    /// A Show's user whose own networks' rules hold every ad ready: a load of their class
    /// from the first network that may serve them, unless one is on its way, so that they
    /// are not left with a buffer full of ads only others may see.
    mutating func loadForHeldUser(_ slotID: String, held: [Int: CapHold], wanted: PrivacyClass?, now: Moment) -> [Effect] {
        guard let slot = slots[slotID], !held.isEmpty, let wanted,
              !ads.inSlot(slotID, .loading).contains(where: { held[$0.entryIndex] == nil && $0.privacy.privacyClass == wanted }),
              let (entry, privacy) = usableEntries(slot, for: wanted, now: now).first(where: { held[$0.0] == nil })
        else { return [] }
        return [startLoad(slotID, entryIndex: entry, privacy: privacy, now: now)]
    }

    // MARK: Counting

    /// A Show took this ad: until it counts, or ends uncounted, the rules count it from now,
    /// so that Shows in flight together cannot all pass one rule.
    mutating func holdUntilCounted(_ id: AdID) {
        guard let ad = ads[id], let impression = capImpression(of: ad) else { return }
        pendingByAd[id] = impression
        pending.add(impression)
    }

    /// The ad's impression counts against its slot's and entry's rules, once ever, at the
    /// moment its Show took it (docs/caps.md, "Counting"): however late it is reported, it
    /// counts where it was counted while in flight. The shell stores it before anyone hears of it.
    mutating func countAgainstCaps(_ id: AdID, now: Moment) -> [Effect] {
        guard let ad = ads[id], !ad.capCounted, let impression = capImpression(of: ad) else { return [] }
        ads[id]!.capCounted = true
        if let waiting = pendingByAd.removeValue(forKey: id) { pending.remove(waiting) }
        history.add(impression)
        // An entry's per-slot rule may hold it from now on: its ready ads no longer fill the buffer.
        let entry = slots[ad.slot]!.config.waterfall[ad.entryIndex]
        return [.recordImpression(impression)] + promiseCounted(id) + (entry.caps.contains { $0.scope == .slot } ? refill(ad.slot, now: now) : [])
    }

    /// The ad ended before it counted (closed unseen, not presented, removed): it holds no
    /// more, and a slot held for its user may fill again at once.
    mutating func dropUncounted(_ id: AdID, slot: String, now: Moment) -> [Effect] {
        guard let impression = pendingByAd.removeValue(forKey: id) else { return [] }
        pending.remove(impression)
        return refill(slot, now: now)
    }

    func capImpression(of ad: AdRecord) -> CountedImpression? {
        guard let slot = slots[ad.slot], slot.config.hasCaps, slot.config.waterfall.indices.contains(ad.entryIndex),
              let takenAt = ad.takenAt
        else { return nil }
        return CountedImpression(slot: ad.slot, network: slot.config.waterfall[ad.entryIndex].capNetwork,
                                 user: CapUser(uid: ad.holder, id: ad.userID), at: takenAt.capTime)
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

    /// A Show asked the slot for `user`'s ad: that user is expected again.
    mutating func noteAsker(_ slotID: String, user: CapUser, now: Moment) {
        guard let slot = slots[slotID], slot.config.caps.contains(where: { $0.scope == .user }) else { return }
        // A user who comes back after a while is one it knows, not a new one.
        guard slot.askers[user] == nil else { return slots[slotID]!.askers[user] = now.capTime }
        slots[slotID]!.newcomers.noteShow(at: now)
        if slot.askers.count >= Self.expectedUsersAtMost, let oldest = slot.askers.min(by: { $0.value < $1.value }) {
            slots[slotID]!.askers[oldest.key] = nil
        }
        slots[slotID]!.askers[user] = now.capTime
    }

    /// Until when no user the slot expects may be shown an ad (docs/caps.md, "The scheduler"):
    /// its per-slot rules hold everyone, or every user who asked within its per-user rules'
    /// longest window is held and a user it does not know is unlikely to ask before then
    /// (less likely than `BufferTarget.useChance`, as for any ad held). nil when someone may
    /// be shown one.
    func everyoneHeldUntil(_ slot: SlotState, now: Moment) -> Moment? {
        let rules = slot.config.caps
        guard !rules.isEmpty else { return nil }
        let slotID = slot.config.id
        let forAll = strictestForAll(rules, slot: slotID, network: nil, now: now)?.until
        guard let longest = rules.filter({ $0.scope == .user }).map(\.window).max() else { return forAll }
        let since = now.capTime &- longest.nanosecondsClamped
        let expected = slot.askers.filter { $0.value > since }.keys
        // A full list that asked wholly within the window may have let go of a user who did too.
        let forgotten = slot.askers.count >= Self.expectedUsersAtMost && expected.count == slot.askers.count
        guard !expected.isEmpty, !forgotten else { return forAll }
        var soonest = Moment(nanoseconds: .max)
        for user in expected {
            guard let until = strictest(rules, slot: slotID, network: nil, user: user, now: now)?.until else { return nil }
            soonest = min(soonest, until)
        }
        let newcomers = max(slot.newcomers.longRate(at: now), slot.newcomers.shortRate(at: now))
        guard 1 - exp(-newcomers * (soonest - now).seconds) < BufferTarget.useChance else { return forAll }
        return soonest
    }

    /// A slot no one it expects may be shown an ad before the ads a refill would bring expire:
    /// until when that holds, and when its buffer fills again: twice a refill's expected time
    /// and `capFillMargin` before, or as soon as an ad would outlive the hold, if earlier. nil
    /// when it is held as usual: an ad that outlives the hold is shown after it, so holding it
    /// wastes nothing, and a user it did not expect finds it meanwhile.
    func capHoldOfBuffer(_ slot: SlotState, now: Moment) -> (until: Moment, fillFrom: Moment)? {
        guard let until = everyoneHeldUntil(slot, now: now) else { return nil }
        let usable = slot.config.waterfall.indices.filter { availablePlugins.contains(slot.config.waterfall[$0].plugin) }
        let (refill, lifetime) = BufferTarget.chain(usable.map { slot.entries[$0].estimate }, ttl: slot.config.ttl)
        let fillFrom = min(until - .saturating(nanoseconds: 2 * refill * 1e9) - Self.capFillMargin, until - .saturating(nanoseconds: lifetime * 1e9))
        return fillFrom > now ? (until, fillFrom) : nil
    }

    /// Whether the waterfall may ask this entry now: its per-slot rules do not hold it.
    func entryOpenToAll(_ slot: SlotState, _ index: Int, now: Moment) -> Bool {
        let entry = slot.config.waterfall[index]
        guard entry.caps.contains(where: { $0.scope == .slot }) else { return true }
        return strictestForAll(entry.caps, slot: slot.config.id, network: entry.capNetwork, now: now) == nil
    }

    /// The entries whose per-slot rules hold them now: their ready ads serve no one, so they
    /// are not part of the slot's buffer.
    func entriesClosedToAll(_ slot: SlotState, now: Moment) -> Set<Int> {
        guard slot.config.waterfall.contains(where: { $0.caps.contains { $0.scope == .slot } }) else { return [] }
        return Set(slot.config.waterfall.indices.filter { !entryOpenToAll(slot, $0, now: now) })
    }
}
