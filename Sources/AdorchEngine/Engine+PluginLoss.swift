// An isolated plugin's host died (docs/isolation.md, "When a plugin crashes"), or a reload
// restarts a plugin: its loads fail as plugin_fault, its ads end, and no load goes to it
// until it is back.

extension Engine {
    /// Every ad of `plugin` ends: loads in flight fail as plugin_fault with `reason` (their
    /// waterfalls go on to the next entry), ready and shown ads end, as its objects died with
    /// its host. No destroy is sent: there is no object left to destroy (a plugin a reload
    /// restarts destroys its own at its shutdown), and its next instance never knew them.
    public mutating func pluginLost(_ plugin: String, reason: String, now: Moment) -> [Effect] {
        downPlugins.insert(plugin)
        var effects: [Effect] = []
        let theirs = ads.records.values.filter { $0.plugin == plugin }.map(\.id).sorted()
        for id in theirs {
            guard let ad = ads[id] else { continue }
            if ad.isLoading {
                effects += pluginReported(.failed(.pluginFault, networkCode: 0, message: reason),
                                          for: id, from: plugin, now: now)
            } else {
                effects += end(id, as: .pluginLost, now: now)
            }
        }
        for (object, handed) in handedOut where handed.plugin == plugin {
            for child in handed.children.sorted() { effects += end(child, as: .pluginLost, now: now) }
            handedOut[object] = nil
        }
        // The objects are gone with the process: nothing to destroy, nothing late to expect.
        return effects.filter { effect in
            guard case .destroy(let id, let owner) = effect, owner == plugin else { return true }
            retired[id]?.destroyConfirmed = true
            return false
        }
    }

    /// Its host is back: loads may go to it again, at once. The backoff its lost loads set
    /// on its entries goes: the crash was not the network's answer, and the supervisor
    /// already paced the restart.
    public mutating func pluginRestored(_ plugin: String, now: Moment) -> [Effect] {
        downPlugins.remove(plugin)
        for slotID in slotOrder {
            for index in slots[slotID]!.entries.indices where slots[slotID]!.config.waterfall[index].plugin == plugin {
                slots[slotID]!.entries[index].backoffUntil = .zero
                ads.timers.remove(.backoff(slot: slotID, entry: index))
            }
        }
        ads.wanting.formUnion(slotOrder)
        return advance(to: now)
    }

    /// A lost plugin that will not come back before a reload (its supervisor disabled it):
    /// no longer available, so a slot it alone fills says it cannot be filled.
    public mutating func pluginDisabled(_ plugin: String, now: Moment) -> [Effect] {
        setAvailablePlugins(availablePlugins.subtracting([plugin]), now: now)
    }

    /// Whether `plugin` is down: lost, and not restored since.
    public func isDown(_ plugin: String) -> Bool { downPlugins.contains(plugin) }

    /// Whether loads may go to `plugin` now: configured, loaded, and its host not down.
    func canLoad(from plugin: String) -> Bool { availablePlugins.contains(plugin) && !downPlugins.contains(plugin) }
}
