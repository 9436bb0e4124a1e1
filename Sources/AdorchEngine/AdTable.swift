/// What the engine waits for, by kind, so one queue holds every timer.
enum EngineTimer: Hashable, Comparable, Sendable {
    /// An ad's loading deadline, ready expiry or end of its shown life.
    case adState(AdID)
    /// A ready ad enters its refresh margin: its slot wants a replacement.
    case adRefresh(AdID)
    case backoff(slot: String, entry: Int)
    /// A network's rate-limit pause ends.
    case pause(String)
    /// A retired ad's memory can go.
    case forget(AdID)
}

/// The live ads with the indexes the scheduler asks by: per slot, loads in flight per
/// network, and their timers. Every write goes through the subscript, which keeps the
/// indexes right, so no input has to look at ads it is not about.
struct AdTable: Sendable {
    private(set) var records: [AdID: AdRecord] = [:]
    private var bySlot: [String: Set<AdID>] = [:]
    private var loadingByPlugin: [String: Int] = [:]
    var timers = DeadlineQueue<EngineTimer>()
    /// Slots that may be below their buffer: their ads changed, or they were still short when last looked at.
    var wanting: Set<String> = []

    subscript(id: AdID) -> AdRecord? {
        get { records[id] }
        set {
            let old = records[id]
            records[id] = newValue
            reindex(id, from: old, to: newValue)
        }
    }

    @discardableResult
    mutating func removeValue(forKey id: AdID) -> AdRecord? {
        let old = records.removeValue(forKey: id)
        reindex(id, from: old, to: nil)
        return old
    }

    /// A slot's ads, oldest first.
    func inSlot(_ slot: String) -> [AdRecord] {
        (bySlot[slot] ?? []).sorted().map { records[$0]! }
    }

    func loadsInFlight(to plugin: String) -> Int { loadingByPlugin[plugin, default: 0] }

    private mutating func reindex(_ id: AdID, from old: AdRecord?, to new: AdRecord?) {
        if let old {
            wanting.insert(old.slot)
            if old.slot != new?.slot {
                bySlot[old.slot]?.remove(id)
                if bySlot[old.slot]?.isEmpty == true { bySlot[old.slot] = nil }
            }
            if old.isLoading { loadingByPlugin[old.plugin, default: 0] -= 1 }
        }
        if let new {
            wanting.insert(new.slot)
            if old?.slot != new.slot { bySlot[new.slot, default: []].insert(id) }
            if new.isLoading { loadingByPlugin[new.plugin, default: 0] += 1 }
        }
        // Only moments that moved are queued again: a refresh already due stays handled.
        if old?.stateDeadline != new?.stateDeadline {
            if let at = new?.stateDeadline { timers.set(.adState(id), at: at) } else { timers.remove(.adState(id)) }
        }
        if old?.refreshDeadline != new?.refreshDeadline {
            if let at = new?.refreshDeadline { timers.set(.adRefresh(id), at: at) } else { timers.remove(.adRefresh(id)) }
        }
    }
}

extension AdRecord {
    var isLoading: Bool {
        if case .loading = state { true } else { false }
    }

    /// When this ad's state ends on its own.
    var stateDeadline: Moment {
        switch state {
        case .loading(let deadline): deadline
        case .ready(let expiresAt): expiresAt
        case .shown(let endsAt): endsAt
        }
    }

    /// When a ready ad stops counting as fresh.
    var refreshDeadline: Moment? {
        if case .ready = state { refreshAt } else { nil }
    }
}
