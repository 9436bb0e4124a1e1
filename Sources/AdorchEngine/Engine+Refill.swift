// The preload scheduler: which slot loads next, from which entry, and how failures back off.

extension Engine {
    // MARK: The scheduler

    mutating func addSlot(_ config: SlotConfig) {
        slotRank[config.id] = slotOrder.count
        slotOrder.append(config.id)
        slots[config.id] = SlotState(config: config, entries: EntryState.fresh(for: config))
        ads.wanting.insert(config.id)
    }

    /// docs/rules.md, "Preloading": keep the slot's target of fresh ads (docs/scheduler.md), each
    /// privacy class its target (`classTargets`; docs/privacy.md, "Inventory"), starting at most `maxLoads`
    /// loads. An ad inside its refresh margin still counts as valid for Show but no longer as
    /// fresh, so its replacement is already on the way.
    mutating func refill(_ slotID: String, now: Moment, maxLoads: Int = .max) -> [Effect] {
        guard slots[slotID]?.config.format.isPreloaded == true else {
            if let rank = slotRank[slotID] { wanting.remove(rank) }
            return []
        }
        // An auction's losers end before the slot is counted, so their places load again.
        var effects = slots[slotID]!.config.isHybrid ? progressAuctions(slotID, now: now) : []
        let slot = slots[slotID]!
        let closed = slot.config.hasCaps ? entriesClosedToAll(slot, now: now) : []
        let fresh = ads.countByClass(in: slotID, .ready) { $0.isValid(at: now) && $0.refreshAt > now && !closed.contains($0.entryIndex) }
        let loading = ads.countByClass(in: slotID, .loading) { _ in true }
        let capFill = slot.config.hasCaps ? capHoldOfBuffer(slot, now: now)?.fillFrom : nil
        let shares = classShares(of: slot, now: now)
        // Per class: the ads it still wants, its target less those it holds or awaits.
        var deficits = classTargets(of: slot, total: targetCount(of: slot, capFill: capFill, now: now), now: now)
        var holding: [PrivacyClass: Int] = [:]
        for privacyClass in PrivacyClass.allCases { holding[privacyClass] = fresh[privacyClass, default: 0] + loading[privacyClass, default: 0] }
        for (privacyClass, target) in deficits { deficits[privacyClass] = target - holding[privacyClass]! }
        if slot.config.isHybrid {
            // One auction per class at a time, for all the class still wants.
            for privacyClass in PrivacyClass.preference where deficits[privacyClass, default: 0] > 0 {
                let round = startAuction(slotID, privacyClass, want: deficits[privacyClass]!, now: now)
                if !round.isEmpty || slots[slotID]!.auctions[privacyClass] != nil { deficits[privacyClass] = 0 }
                effects += round
            }
        } else if slot.config.parallel > 1 {
            // One round: the first N usable entries at once, each a distinct network offer.
            for privacyClass in PrivacyClass.preference where deficits[privacyClass, default: 0] > 0 {
                for (entryIndex, privacy) in usableEntries(slot, for: privacyClass, now: now).prefix(max(slot.config.parallel, deficits[privacyClass]!)) {
                    effects.append(startLoad(slotID, entryIndex: entryIndex, privacy: privacy, now: now))
                }
                deficits[privacyClass] = 0
            }
        }
        // The class furthest below its target loads first; one no entry may load for waits.
        var open = slot.config.isHybrid ? [] : Set(deficits.keys)
        while effects.count < maxLoads,
              let privacyClass = PrivacyClass.preference.filter({ open.contains($0) && deficits[$0]! > 0 }).max(by: { deficits[$0]! < deficits[$1]! }) {
            let share = shares[privacyClass, default: 0]
            guard let (entryIndex, privacy) = pickEntry(slot, for: privacyClass, share: share, holding: holding[privacyClass]!, now: now) else {
                open.remove(privacyClass)
                continue
            }
            effects.append(startLoad(slotID, entryIndex: entryIndex, privacy: privacy, now: now))
            deficits[privacyClass]! -= 1
            holding[privacyClass]! += 1
        }
        let short = Set(deficits.filter { $0.value > 0 }.keys)
        let deficit = deficits.values.reduce(0) { $0 + max($1, 0) }
        if fresh.values.reduce(0, +) > 0 || ads.count(in: slotID, .ready, where: { $0.isValid(at: now) }) > 0 { slots[slotID]!.dry = false }
        if deficit > 0 {
            // Short because a network is pacing itself: look again when it admits a load.
            for plugin in Set(slot.config.waterfall.map(\.plugin)) {
                if let at = paces[plugin]?.nextAdmission(at: now) { ads.timers.set(.pause(plugin), at: at) }
            }
            // Or because an entry's per-slot rule holds it: look again when it frees.
            for entry in slot.config.waterfall where entry.caps.contains(where: { $0.scope == .slot }) {
                if let hold = strictestForAll(entry.caps, slot: slotID, network: entry.capNetwork, now: now) {
                    ads.timers.set(.capLifts(slotID), at: min(hold.until, ads.timers.moment(of: .capLifts(slotID)) ?? hold.until))
                }
            }
        } else if let capFill {
            ads.timers.set(.capLifts(slotID), at: capFill)
        }
        // A slot still short (backoffs, pauses, network caps) is looked at again on every input.
        if deficit <= 0, let rank = slotRank[slotID] { wanting.remove(rank) }
        noteWaiting(slots[slotID]!, short: short, now: now)
        return effects
    }

    /// The waterfall, for a load of `privacyClass`: the first entry whose plugin is there, that
    /// is not backing off and may load the class; for a demand-aware slot, the first whose ad
    /// is likely to be shown before it expires, the class having `share` of the slot's demand.
    func pickEntry(_ slot: SlotState, for privacyClass: PrivacyClass, share: Double, holding: Int, now: Moment) -> (Int, LoadPrivacy)? {
        let usable = usableEntries(slot, for: privacyClass, now: now)
        guard slot.config.isDemandAware else { return usable.first }
        let index = lastingEntry(of: slot, share: share, among: usable.map(\.0), holding: holding, now: now)
        return usable.first { $0.0 == index }
    }

    /// Entries in waterfall order that may be asked now for a load of `privacyClass`, with
    /// the privacy it carries, and whose network may take one more load from this slot
    /// (docs/rules.md, "Loads in flight per network").
    func usableEntries(_ slot: SlotState, for privacyClass: PrivacyClass, now: Moment) -> [(Int, LoadPrivacy)] {
        var planned: [String: Int] = [:]
        return slot.config.waterfall.indices.compactMap { index in
            let plugin = slot.config.waterfall[index].plugin
            guard mayAsk(slot, index, now: now), let privacy = loadPrivacy(slot, index, privacyClass, now: now),
                  mayStartLoad(to: plugin, for: slot.config.id, planned: planned[plugin, default: 0])
            else { return nil }
            planned[plugin, default: 0] += 1
            return (index, privacy)
        }
    }

    /// Whether an entry may be asked now, its network's loads in flight aside: its plugin is
    /// there, it is not backing off, its network is not paused or at its pace, and no
    /// frequency rule closes it to every user.
    func mayAsk(_ slot: SlotState, _ index: Int, now: Moment) -> Bool {
        let plugin = slot.config.waterfall[index].plugin
        return canLoad(from: plugin) && slot.entries[index].backoffUntil <= now
            && (paces[plugin]?.admits(at: now) ?? true) && entryOpenToAll(slot, index, now: now)
    }

    func loadsInFlight(to plugin: String) -> Int { ads.loadsInFlight(to: plugin) }

    /// Slots that may be below their buffer: those whose ads changed and those still short,
    /// since a load that ended may have freed a network's cap. Round by round, one load per
    /// slot a round in the config's order, so a burst on one slot cannot take every load a
    /// network admits before the other slots had theirs.
    mutating func refillWanting(now: Moment) -> [Effect] {
        for slot in ads.wanting {
            if let rank = slotRank[slot] { wanting.insert(rank) }
        }
        ads.wanting.removeAll(keepingCapacity: true)
        var effects: [Effect] = []
        var started = true
        while started {
            started = false
            var cursor = 0
            while let rank = wanting.next(from: cursor) {
                cursor = rank + 1
                let round = refill(slotOrder[rank], now: now, maxLoads: 1)
                started = started || !round.isEmpty
                effects += round
                // Every network at its cap: no other slot can start a load either. Those left
                // short stay wanting until a load ends.
                if round.isEmpty, !availablePlugins.contains(where: { canLoad(from: $0) && loadsInFlight(to: $0) < settings.maxLoadsInFlightPerNetwork }) {
                    return effects
                }
            }
        }
        return effects
    }

    /// An entry's backoff moments as timers, after its slot's entries were rebuilt.
    mutating func setBackoffTimers(of slotID: String, to entries: [EntryState]) {
        for index in slots[slotID]?.entries.indices ?? 0..<0 { ads.timers.remove(.backoff(slot: slotID, entry: index)) }
        for (index, entry) in entries.enumerated() where entry.backoffUntil > .zero {
            ads.timers.set(.backoff(slot: slotID, entry: index), at: entry.backoffUntil)
        }
    }

    /// A load filled with an ad that lives `lifetime`.
    mutating func entrySucceeded(_ ad: AdRecord, lifetime: Duration, now: Moment) {
        slots[ad.slot]?.entries[ad.entryIndex].succeeded()
        noteLoadEnded(ad, outcome: NetworkLoads.filled, now: now)
        slots[ad.slot]?.entries[ad.entryIndex].estimate.note(attempt: now - ad.startedAt, lifetime: lifetime)
        ads.timers.remove(.backoff(slot: ad.slot, entry: ad.entryIndex))
    }

    /// docs/rules.md, "Fresh object per load": every load is a new object with a new id, loaded
    /// once; and "Deadlines": every load has one.
    mutating func startLoad(_ slotID: String, entryIndex: Int, privacy: LoadPrivacy, now: Moment) -> Effect {
        let config = slots[slotID]!.config
        let entry = config.waterfall[entryIndex]
        let id = nextID
        nextID += 1
        let deadline = now + entry.timeout
        ads[id] = AdRecord(
            id: id, slot: slotID, format: config.format, plugin: entry.plugin, entryIndex: entryIndex,
            ttl: config.ttl, state: .loading(deadline: deadline), privacy: privacy, startedAt: now
        )
        slots[slotID]!.counters.loads += 1
        slots[slotID]!.entries[entryIndex].loads += 1
        paces[entry.plugin, default: NetworkPace()].noteStart(at: now)
        var order = LoadOrder(
            adID: id, plugin: entry.plugin, slotID: slotID, format: config.format, entry: entry,
            deadline: deadline, reward: config.format == .rewarded ? config.reward : nil,
            testMode: config.testMode, targetingJSON: config.targetingJSON
        )
        order.privacy = privacy
        order.floor = config.floor
        return .load(order)
    }

    /// A replacement of `privacyClass` arrived while the ad it replaces is still valid: the
    /// class now holds one more than its target, so its ad closest to expiry goes.
    mutating func retireSurplus(in slotID: String, of privacyClass: PrivacyClass, now: Moment) -> [Effect] {
        guard let slot = slots[slotID] else { return [] }
        let buffer = classTargets(of: slot, total: targetCount(of: slot, now: now), now: now)[privacyClass, default: 0]
        func counts(_ ad: AdRecord) -> Bool { ad.isValid(at: now) && ad.privacy.privacyClass == privacyClass }
        // Every loaded ad passes here: count first, collect only when there is a surplus.
        guard ads.count(in: slotID, .ready, where: counts) > buffer else { return [] }
        let valid = ads.inSlot(slotID, .ready).filter(counts)
        let doomed = valid.filter { $0.refreshAt <= now }.sorted { ($0.expiresAt!, $0.id) < ($1.expiresAt!, $1.id) }
        var effects: [Effect] = []
        for ad in doomed.prefix(valid.count - buffer) {
            slots[slotID]!.counters.replaced += 1
            effects += end(ad.id, as: .replaced, now: now)
            effects.append(.emit(EngineEvent(.adReplaced, slot: slotID, adID: ad.id, network: ad.plugin)))
        }
        return effects
    }


    /// Whether a Load's own timeout_ms ended this attempt before the entry's timeout would
    /// have: the app's choice, not the network's failure. Counting it would let one app that
    /// asks for 1 ms back off, for every app, an entry they all share (docs/rules.md,
    /// "Budgets per uid").
    func cutShortByCaller(_ ad: AdRecord, deadline: Moment) -> Bool {
        guard ad.requestID != nil, let waterfall = slots[ad.slot]?.config.waterfall, waterfall.indices.contains(ad.entryIndex) else { return false }
        return deadline - ad.startedAt < waterfall[ad.entryIndex].timeout
    }

    /// Every load's end, once, whatever ended it: the network's counts and latency.
    /// A network no longer available (removed at a reload) has no series: its late ends are not counted.
    mutating func noteLoadEnded(_ ad: AdRecord, outcome: String, now: Moment) {
        guard availablePlugins.contains(ad.plugin) else { return }
        networkLoads[ad.plugin, default: NetworkLoads()].ended[outcome, default: 0] += 1
        networkLoads[ad.plugin, default: NetworkLoads()].latency.observe(now - ad.startedAt)
    }

    mutating func noteFailure(of ad: AdRecord, code: AdErrorCode, now: Moment) {
        guard slots[ad.slot]?.entries.indices.contains(ad.entryIndex) == true else { return }
        slots[ad.slot]!.entries[ad.entryIndex].lastError = code
        // A rate_limited answer says nothing of the network's fill: its pace deals with it.
        if code != .rateLimited { slots[ad.slot]!.entries[ad.entryIndex].estimate.note(attempt: now - ad.startedAt, lifetime: nil) }
        let failures = slots[ad.slot]!.entries[ad.entryIndex].failuresInRow + 1
        // A demand-aware slot does not start doubling until the run of failures is longer
        // than the entry's learned fill rate explains (docs/scheduler.md, "Networks"): a
        // low-fill network's ordinary runs are not a failing network. Fixed-buffer slots, and
        // rate_limited answers, double from the first.
        var excess = failures - 1
        if code != .rateLimited, let slot = slots[ad.slot], slot.config.isDemandAware {
            excess = max(0, failures - slot.entries[ad.entryIndex].estimate.expectedNoFillRun)
        }
        let backoff = settings.backoff(doublings: excess, spread: 2 * random.nextUnit() - 1)
        slots[ad.slot]!.entries[ad.entryIndex].failuresInRow = failures
        slots[ad.slot]!.entries[ad.entryIndex].backoffUntil = now + backoff
        ads.timers.set(.backoff(slot: ad.slot, entry: ad.entryIndex), at: slots[ad.slot]!.entries[ad.entryIndex].backoffUntil)
    }

    /// A slot runs dry when its last valid ad goes (shown or expired) or a Show finds none.
    mutating func markDryIfEmpty(_ slotID: String, now: Moment) -> [Effect] {
        ads.count(in: slotID, .ready, where: { $0.isValid(at: now) }) > 0 ? [] : markDry(slotID)
    }

    mutating func markDry(_ slotID: String) -> [Effect] {
        guard slots[slotID]?.dry == false else { return [] }
        slots[slotID]!.dry = true
        slots[slotID]!.counters.ranDry += 1
        return [.emit(EngineEvent(.slotEmpty, slot: slotID, message: "no valid ad ready"))]
    }
}
