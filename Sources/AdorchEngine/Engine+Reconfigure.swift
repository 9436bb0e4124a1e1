// Plugins and slots changing under the engine (start, reload) and its stop.

extension Engine {
    /// Plugins came or went (load, refusal, reload): entries of missing plugins are skipped.
    public mutating func setAvailablePlugins(_ plugins: Set<String>, now: Moment) -> [Effect] {
        availablePlugins = plugins
        downPlugins.formIntersection(plugins)
        // A network's load series go with it (docs/metrics.md): names from every config
        // ever loaded must not pile up in the metrics.
        networkLoads = networkLoads.filter { plugins.contains($0.key) }
        ads.wanting.formUnion(slotOrder)
        return advance(to: now)
    }

    /// A new slot list (reload). Nothing still valid is lost: a slot that stays keeps its
    /// counters and every ad that is valid under its new settings: its entry (plugin, ad
    /// unit, parameter) is still in the waterfall, it is within the new TTL, and it fits the
    /// new buffer. A slot whose format changed starts over; removed slots end their ads.
    public mutating func reconfigure(slots configs: [SlotConfig], settings: SchedulerSettings, now: Moment) -> [Effect] {
        self.settings = settings
        var effects: [Effect] = []
        let newIDs = Set(configs.map(\.id))
        for old in slotOrder where !newIDs.contains(old) {
            effects += endAll(in: old, now: now)
            setBackoffTimers(of: old, to: [])
            slots[old] = nil
        }
        slotOrder = []
        for config in configs {
            guard let existing = slots[config.id] else {
                addSlot(config)
                continue
            }
            slotOrder.append(config.id)
            if existing.config.format != config.format {
                effects += endAll(in: config.id, now: now)
                slots[config.id] = SlotState(config: config, entries: EntryState.fresh(for: config),
                                             counters: existing.counters, demand: existing.demand)
                continue
            }
            // Entries are matched by what they are, so a reordered waterfall keeps its backoffs.
            let oldEntries = existing.config.waterfall
            slots[config.id]!.entries = config.waterfall.map { entry in
                oldEntries.firstIndex(where: { $0.loadsLike(entry) }).map { existing.entries[$0] } ?? EntryState(entry, of: config)
            }
            setBackoffTimers(of: config.id, to: slots[config.id]!.entries)
            slots[config.id]!.config = config
            // An auction under way was for the old entries: its ads stay ready, the next refill starts afresh.
            slots[config.id]!.auctions = [:]
            for ad in ads.inSlot(config.id) {
                let entry = oldEntries[ad.entryIndex]
                guard let newIndex = config.waterfall.firstIndex(where: { $0.plugin == entry.plugin && $0.adUnitID == entry.adUnitID && $0.serverParameter == entry.serverParameter }) else {
                    if case .shown = ad.state { continue }  // already the app's; it ends on its own
                    effects += end(ad.id, as: .removed, now: now)
                    continue
                }
                ads[ad.id]!.entryIndex = newIndex
                ads[ad.id]!.ttl = config.ttl
                if case .ready(let expiresAt) = ad.state, let loadedAt = ad.loadedAt, loadedAt + config.ttl < expiresAt {
                    let shorter = loadedAt + config.ttl
                    ads[ad.id]!.state = .ready(expiresAt: shorter)
                    ads[ad.id]!.refreshAt = min(ad.refreshAt, shorter - min(settings.refreshAhead, config.ttl / 5))
                }
            }
            // A network that no longer serves an ad's class: no viewer may be shown it.
            effects += endUnservedClasses(in: config.id, now: now)
            // A smaller buffer: the ads closest to expiry go first (a demand-aware slot keeps
            // what it holds up to its new maximum, to be shown as demand comes).
            let valid = ads.inSlot(config.id, .ready).filter { $0.isValid(at: now) }
                .sorted { ($0.expiresAt!, $0.id) < ($1.expiresAt!, $1.id) }
            for ad in valid.prefix(max(0, valid.count - config.bufferMax)) { effects += end(ad.id, as: .removed, now: now) }
        }
        // The history stays whatever the rules now are (docs/caps.md, "Durable"); only how long it is kept follows them.
        keepHistoryForRules()
        slotRank = Dictionary(uniqueKeysWithValues: slotOrder.enumerated().map { ($1, $0) })
        wanting.removeAll()  // ranks changed: every slot is looked at again by name
        waitingFor.removeAll()  // and says again what it waits for: a removed slot holds nothing back
        ads.wanting.formUnion(slotOrder)
        return effects + advance(to: now)
    }

    /// The daemon stops: pending Loads fail, every live ad ends and its object is destroyed.
    public mutating func shutdown(now: Moment) -> [Effect] {
        let pending = requests.keys.sorted().flatMap { rid in
            finish(rid, .failure(LoadFailure(code: .internal, message: "the daemon is stopping", attempts: requests[rid]?.attempts ?? [])))
        }
        // Shows waiting on a plugin are answered first, so ending their ads cannot answer them otherwise.
        let shows = showing.keys.sorted().flatMap { id in
            interruptShow(of: id, plugin: showing[id]!.ad.network, slot: showing[id]!.ad.slot, .shuttingDown)
        }
        return pending + shows + slotOrder.flatMap { endAll(in: $0, now: now) }
    }


    mutating func endAll(in slotID: String, now: Moment) -> [Effect] {
        let pending = requests.filter { $0.value.slot == slotID }.keys.sorted().flatMap { rid in
            finish(rid, .failure(LoadFailure(code: .internal, message: "slot \(slotID) was removed", attempts: requests[rid]?.attempts ?? [])))
        }
        return pending + ads.inSlot(slotID).flatMap { end($0.id, as: .removed, now: now) }
    }
}
