/// The scheduler's demand-aware choices (docs/scheduler.md): how many ads a slot keeps and
/// which waterfall entry a preload asks.
extension Engine {
    /// A demand-aware slot's target now; a fixed slot's buffer (with its demand, for operators).
    /// A slot no one it expects may be shown an ad holds none until shortly before that
    /// changes (docs/caps.md, "The scheduler").
    func target(of slotID: String, now: Moment) -> BufferTarget {
        let slot = slots[slotID]!
        var target = demandTarget(of: slot, now: now)
        if slot.config.hasCaps, let hold = capHoldOfBuffer(slot, now: now) {
            target.count = 0
            target.reason = "capped: no expected user may see an ad for \(Int((hold.until - now).seconds.rounded(.up))) s more, "
                + "refills in \(Int((hold.fillFrom - now).seconds.rounded(.up))) s"
            return target
        }
        // What the refill keeps (targetCount): the fair share's held ads come on top.
        let held = fairShareHeld(slot, now: now)
        if held > 0 {
            target.count += held
            target.reason += ", plus ads held for other apps by the fair share"
        }
        return target
    }

    func demandTarget(of slot: SlotState, now: Moment) -> BufferTarget {
        let usable = slot.config.waterfall.indices.filter { availablePlugins.contains(slot.config.waterfall[$0].plugin) }
        return .of(slot.config, demand: slot.demand, entries: usable.map { slot.entries[$0].estimate }, now: now)
    }

    /// The count alone, on the Show path: a fixed slot's is its buffer, with no estimate to
    /// read. `capFill`: the slot's `capFillFrom`, which the caller worked out.
    /// The ads held for other uids by the fair share come on top (docs/rules.md, "Fair
    /// share"), so the uid they are held from is still served at the buffer's rate.
    func targetCount(of slot: SlotState, capFill: Moment?, now: Moment) -> Int {
        guard capFill == nil else { return 0 }
        return (slot.config.isDemandAware ? demandTarget(of: slot, now: now).count : slot.config.bufferMin) + fairShareHeld(slot, now: now)
    }

    func targetCount(of slot: SlotState, now: Moment) -> Int {
        targetCount(of: slot, capFill: slot.config.hasCaps ? capHoldOfBuffer(slot, now: now)?.fillFrom : nil, now: now)
    }

    /// Of the usable entries (in waterfall order), the first whose ad is likely to be shown
    /// before it expires, given the `holding` ads of its class the slot has or awaits
    /// already, the class having `share` of the slot's demand: a slot with rare demand is not
    /// filled from a network whose ads would expire unseen. If such an entry exists but rests
    /// now (backoff, pause), nil: the slot waits for it, since its demand is low; but only for
    /// an entry whose ads were seen to live that long, and never while the slot is below
    /// buffer_min. Otherwise the longest-lived usable one.
    func lastingEntry(of slot: SlotState, share: Double, among usable: [Int], holding: Int, now: Moment) -> Int? {
        let rate = max(slot.demand.longRate(at: now), slot.demand.shortRate(at: now)) * share
        func lifetime(_ index: Int) -> Double { min(slot.entries[index].estimate.lifetimeSeconds, slot.config.ttl.seconds) }
        func lasts(_ index: Int) -> Bool {
            BufferTarget.largestCount(mean: rate * lifetime(index), tailAtLeast: BufferTarget.useChance, upTo: holding + 1) > holding
        }
        if let lasting = usable.first(where: lasts) { return lasting }
        let present = slot.config.waterfall.indices.filter { availablePlugins.contains(slot.config.waterfall[$0].plugin) }
        if holding >= slot.config.bufferMin, present.contains(where: { slot.entries[$0].estimate.fillSamples > 0 && lasts($0) }) { return nil }
        return usable.max { lifetime($0) < lifetime($1) }
    }
}
