// docs/rules.md, "Fair share": one app's uid cannot drain the ready ads of a slot other
// apps share. A greedy uid looping Shows took every ad the moment it loaded, and a polite
// uid asking now and then found the slot empty (12 of its 40 Shows served). So a uid taking
// an ad leaves one ready ad for each other uid that asked the slot within the window and has
// taken fewer ads than it there, and the slot loads those held ads on top of its buffer.

/// One slot's fair share: the uids that asked it within the window, when each last asked,
/// and how many ads each took in the window. Root and callers without a uid are not in it:
/// they are exempt from the budgets per uid (`UIDBudgets.bind`).
struct FairShare: Sendable {
    /// Uids remembered per slot: past it, the one that asked longest ago is dropped, so the
    /// memory a slot's fair share takes is bounded whatever number of uids ask.
    static let uidsAtMost = 256
    /// A uid's takes are counted in at most this many groups a window (each one spans a
    /// tenth of the window from its first take), so the memory is bounded however many ads
    /// it takes; a take stops counting at most a tenth of the window early.
    static let takeGroupsPerWindow = 10

    private struct TakeGroup: Sendable {
        /// The first take of the group: every take in it came at or after.
        var since: Moment
        var count: Int
    }

    private struct Asker: Sendable {
        var lastAsked: Moment
        /// Oldest first.
        var takes: [TakeGroup] = []

        func taken(at now: Moment, window: Duration) -> Int {
            takes.reduce(0) { $0 + ($1.since + window > now ? $1.count : 0) }
        }
    }

    private var askers: [UInt32: Asker] = [:]

    /// `uid` asked the slot for an ad (a Show, whatever its answer).
    mutating func asked(_ uid: UInt32, at now: Moment, window: Duration) {
        // Forgetting here keeps the list to the uids that asked within the window.
        askers = askers.filter { $0.key == uid || $0.value.lastAsked + window > now }
        if askers[uid] == nil, askers.count >= Self.uidsAtMost,
           let oldest = askers.min(by: { ($0.value.lastAsked, $0.key) < ($1.value.lastAsked, $1.key) }) {
            askers[oldest.key] = nil
        }
        askers[uid, default: Asker(lastAsked: now)].lastAsked = now
    }

    /// `uid` took an ad of the slot.
    mutating func took(_ uid: UInt32, at now: Moment, window: Duration) {
        var asker = askers[uid] ?? Asker(lastAsked: now)
        asker.takes.removeAll { $0.since + window <= now }
        let span = window / Self.takeGroupsPerWindow
        if let last = asker.takes.last, now < last.since + span {
            asker.takes[asker.takes.count - 1].count += 1
        } else {
            // A shorter window after a reload could leave more groups than it has tenths.
            if asker.takes.count >= Self.takeGroupsPerWindow { asker.takes.removeFirst() }
            asker.takes.append(TakeGroup(since: now, count: 1))
        }
        askers[uid] = asker
    }

    /// Ready ads `uid` must leave in the slot: one for each other uid that asked within the
    /// window and has taken fewer ads than `uid` in it.
    func held(from uid: UInt32, at now: Moment, window: Duration) -> Int {
        let mine = askers[uid]?.taken(at: now, window: window) ?? 0
        return askers.reduce(0) { held, entry in
            let (other, asker) = entry
            guard other != uid, asker.lastAsked + window > now else { return held }
            return held + (asker.taken(at: now, window: window) < mine ? 1 : 0)
        }
    }

    /// The most ads any uid must leave now: what the slot loads on top of its buffer, so
    /// that the uid that took the most is still served at the buffer's rate.
    func mostHeld(at now: Moment, window: Duration) -> Int {
        let taken = askers.values.filter { $0.lastAsked + window > now }.map { $0.taken(at: now, window: window) }
        guard let most = taken.max() else { return 0 }
        return taken.reduce(0) { $0 + ($1 < most ? 1 : 0) }
    }
}

extension Engine {
    /// A Show of `holder` asked the slot: it counts for the fair share from now. The slot
    /// looks at its buffer again when that changes what it holds for others.
    mutating func noteFairShareAsk(_ slotID: String, holder: UInt32?, now: Moment) {
        guard let uid = holder, UIDBudgets.bind(uid), slots[slotID] != nil else { return }
        let window = settings.budgets.fairShareWindow
        let before = slots[slotID]!.fairShare.mostHeld(at: now, window: window)
        slots[slotID]!.fairShare.asked(uid, at: now, window: window)
        if slots[slotID]!.fairShare.mostHeld(at: now, window: window) != before { ads.wanting.insert(slotID) }
    }

    /// A Show took an ad of the slot for `holder`.
    mutating func noteFairShareTake(_ slotID: String, holder: UInt32?, now: Moment) {
        guard let uid = holder, UIDBudgets.bind(uid), slots[slotID] != nil else { return }
        slots[slotID]!.fairShare.took(uid, at: now, window: settings.budgets.fairShareWindow)
    }

    /// Whether taking one of the slot's `ready` valid ads would leave fewer than the fair
    /// share holds for other uids.
    func fairShareRefuses(_ slotID: String, holder: UInt32?, ready: Int, now: Moment) -> Bool {
        guard let uid = holder, UIDBudgets.bind(uid), let slot = slots[slotID] else { return false }
        return ready - 1 < min(slot.fairShare.held(from: uid, at: now, window: settings.budgets.fairShareWindow), Self.fairShareHeldAtMost(slot))
    }

    /// Ads the slot loads on top of its buffer target: those held for other uids.
    func fairShareHeld(_ slot: SlotState, now: Moment) -> Int {
        min(slot.fairShare.mostHeld(at: now, window: settings.budgets.fairShareWindow), Self.fairShareHeldAtMost(slot))
    }

    /// The most ads a slot holds for other uids, and so loads on top of its buffer: its
    /// buffer's bound. Uids that asked once and never came back (an outside attack: ten of
    /// them) would otherwise have it load one more ad each, to expire unseen.
    static func fairShareHeldAtMost(_ slot: SlotState) -> Int { slot.config.bufferMax }
}
