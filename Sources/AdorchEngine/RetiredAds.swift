/// Ended ads, remembered a while to attribute late plugin reports and explain an app's
/// report on an ad that is gone: for `retiredMemory` at most, and never more than a set
/// number at once, the oldest forgotten first. Without the cap, memory would grow with the
/// rate of ads (a million shows in ten minutes is a million entries).
struct RetiredAds: Sendable {
    private var entries: [AdID: RetiredAd] = [:]
    /// Ids in the order they retired; ids already forgotten are skipped when they reach the front.
    private var order: [AdID] = []
    private var head = 0

    var count: Int { entries.count }

    subscript(id: AdID) -> RetiredAd? {
        get { entries[id] }
        set { entries[id] = newValue }
    }

    /// Remembers `id`; returns the ids forgotten to stay within `limit`.
    mutating func remember(_ id: AdID, _ memory: RetiredAd, limit: Int) -> [AdID] {
        if entries.updateValue(memory, forKey: id) == nil { order.append(id) }
        var dropped: [AdID] = []
        while entries.count > limit, head < order.count {
            let oldest = order[head]
            head += 1
            if entries.removeValue(forKey: oldest) != nil { dropped.append(oldest) }
        }
        compact()
        return dropped
    }

    /// The id's memory ran out (its forget timer fired).
    mutating func forget(_ id: AdID, at now: Moment) {
        guard let memory = entries[id], memory.forgetAt <= now else { return }
        entries[id] = nil
        compact()
    }

    /// Drops forgotten ids from the front, and the consumed part of `order` once it is
    /// the larger half, so `order` stays within twice the entries remembered.
    private mutating func compact() {
        while head < order.count, entries[order[head]] == nil { head += 1 }
        if head > 64, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}

struct RetiredAd: Sendable {
    enum Reason: String, Sendable {
        case failed, timedOut = "timed out", expired, replaced, closed, ended = "shown and done", removed
        case failedToDisplay = "failed to display"
        /// Its auction went to higher prices (docs/bidding.md, "The auction").
        case outbid = "lost to a higher bid"
        /// Its price was under the slot's floor.
        case belowFloor = "priced under the floor"

        /// What a bidder is told of an ad that ended so, unshown; nil for ends that are not a loss.
        var loss: AuctionLoss? {
            switch self {
            case .expired, .replaced: .expired
            case .outbid: .lostToHigherBid
            case .belowFloor: .belowFloor
            case .failed, .timedOut, .closed, .ended, .removed, .failedToDisplay, .pluginLost: nil
            }
        }
        /// Its plugin stopped under it: its host process died (PluginProcess), or a reload restarted it.
        case pluginLost = "its plugin stopped"
    }

    var slot: String
    var plugin: String
    var reason: Reason
    var forgetAt: Moment
    /// Whose it was (`Engine.eventHolder`): a late report on it is that uid's event too, and
    /// only that app is told it has ended (`Engine.report`).
    var holder: UInt32?
    /// The plugin's ad_destroy has returned: from now on any report is its fault.
    var destroyConfirmed = false
}

