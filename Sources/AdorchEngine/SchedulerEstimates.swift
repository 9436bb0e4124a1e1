/// What the scheduler has learned, as the state directory keeps it across restarts and
/// reloads (docs/scheduler.md, "Across restarts"): each slot's demand, each waterfall
/// entry's load time, fill rate and ad lifetime, and each network's learned rate limit.
public struct SchedulerEstimates: Sendable, Equatable, Codable {
    public struct Slot: Sendable, Equatable, Codable {
        public var demand: SavedDemand
        public var entries: [Entry]
    }

    /// An entry is known by what it asks for, so a reordered waterfall keeps its estimates.
    public struct Entry: Sendable, Equatable, Codable {
        public var plugin: String
        public var adUnitID: String
        public var serverParameter: String
        public var estimate: EntryEstimate
    }

    public var slots: [String: Slot] = [:]
    /// Loads per `NetworkPace.window`, by network.
    public var networkLimits: [String: Int] = [:]

    public init() {}
}

extension Engine {
    /// Everything learned so far, to be kept.
    public func estimates(at now: Moment) -> SchedulerEstimates {
        var saved = SchedulerEstimates()
        for (id, slot) in slots {
            saved.slots[id] = .init(demand: slot.demand.saved(at: now), entries: zip(slot.config.waterfall, slot.entries).map { entry, state in
                .init(plugin: entry.plugin, adUnitID: entry.adUnitID, serverParameter: entry.serverParameter, estimate: state.estimate)
            })
        }
        for (name, pace) in paces {
            if let limit = pace.limit(at: now) { saved.networkLimits[name] = limit }
        }
        return saved
    }

    /// Estimates kept by an earlier run, saved `away` ago: slots and entries that still exist
    /// take theirs; the rest start from the priors. A value no run could have produced
    /// (negative, not finite, out of its range) is not taken: the second result counts them.
    public mutating func restore(_ saved: SchedulerEstimates, away: Duration, now: Moment) -> ([Effect], refused: Int) {
        var refused = 0
        for (id, kept) in saved.slots {
            guard var slot = slots[id] else { continue }
            if kept.demand.isSane {
                slot.demand = DemandEstimate(restoring: kept.demand, away: away, at: now)
            } else {
                refused += 1
            }
            for (index, entry) in slot.config.waterfall.enumerated() {
                guard let match = kept.entries.first(where: {
                    $0.plugin == entry.plugin && $0.adUnitID == entry.adUnitID && $0.serverParameter == entry.serverParameter
                }) else { continue }
                if match.estimate.isSane { slot.entries[index].estimate = match.estimate } else { refused += 1 }
            }
            slots[id] = slot
        }
        for (name, limit) in saved.networkLimits {
            if (1...NetworkPace.highestLimit).contains(limit) { paces[name] = NetworkPace(limit: limit, at: now) } else { refused += 1 }
        }
        return (advance(to: now), refused)
    }
}
