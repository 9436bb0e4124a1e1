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
    /// take theirs; the rest start from the priors.
    public mutating func restore(_ saved: SchedulerEstimates, away: Duration, now: Moment) -> [Effect] {
        for (id, kept) in saved.slots {
            guard var slot = slots[id] else { continue }
            slot.demand = DemandEstimate(restoring: kept.demand, away: away, at: now)
            for (index, entry) in slot.config.waterfall.enumerated() {
                if let match = kept.entries.first(where: {
                    $0.plugin == entry.plugin && $0.adUnitID == entry.adUnitID && $0.serverParameter == entry.serverParameter
                }) {
                    slot.entries[index].estimate = match.estimate
                }
            }
            slots[id] = slot
        }
        for (name, limit) in saved.networkLimits where limit > 0 {
            paces[name] = NetworkPace(limit: limit, at: now)
        }
        return advance(to: now)
    }
}
