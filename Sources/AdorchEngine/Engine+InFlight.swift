// docs/rules.md, "Loads in flight per network": every slot of a network shares its limit of
// loads in flight, so a load it frees goes first to the slots waiting for it that hold fewest.

extension Engine {
    /// Whether `slotID` may start one more load to `plugin`, `planned` being the loads to it
    /// the slot is already about to start. One free load is kept for each slot waiting for the
    /// network that comes before this one: it holds fewer of the network's loads, or as many
    /// and waited longer (then the config's order). A slot that is not waiting comes after
    /// every waiting slot that holds as many, so an app's Loads, which never wait, cannot take
    /// a load a preloaded slot is waiting for.
    func mayStartLoad(to plugin: String, for slotID: String, planned: Int = 0) -> Bool {
        let free = settings.maxLoadsInFlightPerNetwork - loadsInFlight(to: plugin) - planned
        guard free > 0 else { return false }
        // Uncontended (the common case): more free loads than other slots waiting.
        guard let waiting = waitingFor[plugin], free <= waiting.count - (waiting[slotID] == nil ? 0 : 1) else { return true }
        let mine = place(of: slotID, to: plugin, since: waiting[slotID], planned: planned)
        let ahead = waiting.count(where: { $0.key != slotID && place(of: $0.key, to: plugin, since: $0.value) < mine })
        return free > ahead
    }

    /// A slot's place in the queue for a network's free loads: fewest loads held first, then
    /// the longest waiting (a slot that does not wait comes last), then the config's order.
    private func place(of slotID: String, to plugin: String, since: Moment?, planned: Int = 0) -> (Int, UInt64, Int) {
        let held = ads.count(in: slotID, .loading) { $0.plugin == plugin } + planned
        return (held, since?.nanoseconds ?? .max, slotRank[slotID] ?? .max)
    }

    /// After a refill: the networks this slot waits for are those that only the rule above
    /// keeps it from while the `short` privacy classes are, each since when it first did. A
    /// slot no longer short waits for nothing, so it holds no free load back; nor for a
    /// network that may not load a class it is short of.
    mutating func noteWaiting(_ slot: SlotState, short: Set<PrivacyClass>, now: Moment) {
        let slotID = slot.config.id
        var heldBack: Set<String> = []
        if !short.isEmpty {
            for (index, entry) in slot.config.waterfall.enumerated()
            where mayAsk(slot, index, now: now) && !mayStartLoad(to: entry.plugin, for: slotID)
                && short.contains(where: { loadPrivacy(slot, index, $0, now: now) != nil }) {
                heldBack.insert(entry.plugin)
            }
        }
        for plugin in heldBack.union(waitingFor.keys) {
            if heldBack.contains(plugin) {
                waitingFor[plugin, default: [:]][slotID] = waitingFor[plugin]?[slotID] ?? now
            } else if waitingFor[plugin]?.removeValue(forKey: slotID) != nil, waitingFor[plugin]!.isEmpty {
                waitingFor[plugin] = nil
            }
        }
    }
}
