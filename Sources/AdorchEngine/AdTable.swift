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
    /// A Show call stops waiting for its plugin's answer on this ad.
    case showAnswer(AdID)
    /// A slot every expected user was capped on is about to be let in again: its buffer fills.
    case capLifts(String)
}

/// The live ads with the indexes the scheduler asks by: per slot, loads in flight per
/// network, and their timers. Every write goes through the subscript, which keeps the
/// indexes right, so no input has to look at ads it is not about.
struct AdTable: Sendable {
    private(set) var records: [AdID: AdRecord] = [:]
    /// Per slot and state: a Show looks only at the slot's ready ads, never at the shown ones
    /// still open for reports (thousands, on a busy slot).
    private var bySlot: [String: [AdRecord.Phase: Set<AdID>]] = [:]
    private var loadingByPlugin: [String: Int] = [:]
    /// Ads handed to each uid and not ended yet: its open-ads budget, asked on every Show and Load.
    private var heldByUID: [UInt32: Int] = [:]
    /// Payload bytes of each plugin's ready and shown ads: its payload budget, asked on every load.
    private var payloadBytesByPlugin: [String: Int] = [:]
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

    /// A slot's ads in one state, oldest first.
    func inSlot(_ slot: String, _ phase: AdRecord.Phase) -> [AdRecord] {
        (bySlot[slot]?[phase] ?? []).sorted().map { records[$0]! }
    }

    /// How many of a slot's ads in one state pass `test`, without sorting or collecting them
    /// (Show and refill ask on every call, of slots that may hold a hundred ads).
    func count(in slot: String, _ phase: AdRecord.Phase, where test: (AdRecord) -> Bool) -> Int {
        var n = 0
        for id in bySlot[slot]?[phase] ?? [] where test(records[id]!) { n += 1 }
        return n
    }

    /// `count(in:_:where:)` per privacy class, in one pass: counted in place, not in a
    /// dictionary, since refill asks on every input of slots that may hold a hundred ads.
    func countByClass(in slot: String, _ phase: AdRecord.Phase, where test: (AdRecord) -> Bool) -> [PrivacyClass: Int] {
        var (personalized, nonPersonalized, childDirected) = (0, 0, 0)
        for id in bySlot[slot]?[phase] ?? [] {
            let ad = records[id]!
            guard test(ad) else { continue }
            switch ad.privacy.privacyClass {
            case .personalized: personalized += 1
            case .nonPersonalized: nonPersonalized += 1
            case .childDirected: childDirected += 1
            }
        }
        return [.personalized: personalized, .nonPersonalized: nonPersonalized, .childDirected: childDirected]
    }

    /// The slot's ad in one state that passes `test` and comes first by `isBefore`.
    func first(in slot: String, _ phase: AdRecord.Phase, where test: (AdRecord) -> Bool,
               by isBefore: (AdRecord, AdRecord) -> Bool) -> AdRecord? {
        var best: AdRecord?
        for id in bySlot[slot]?[phase] ?? [] {
            let ad = records[id]!
            if test(ad), best.map({ isBefore(ad, $0) }) ?? true { best = ad }
        }
        return best
    }

    /// All of a slot's ads, oldest first.
    func inSlot(_ slot: String) -> [AdRecord] {
        (bySlot[slot]?.values.flatMap { $0 } ?? []).sorted().map { records[$0]! }
    }

    func count(in slot: String, _ phase: AdRecord.Phase) -> Int { bySlot[slot]?[phase]?.count ?? 0 }

    func loadsInFlight(to plugin: String) -> Int { loadingByPlugin[plugin, default: 0] }

    /// Ads handed to `uid` that have not ended.
    func held(by uid: UInt32) -> Int { heldByUID[uid, default: 0] }

    /// Bytes of the payloads of `plugin`'s ads the engine holds (ready, and shown still open).
    func payloadBytes(of plugin: String) -> Int { payloadBytesByPlugin[plugin, default: 0] }

    private mutating func reindex(_ id: AdID, from old: AdRecord?, to new: AdRecord?) {
        if let old {
            wanting.insert(old.slot)
            if old.slot != new?.slot || old.phase != new?.phase {
                bySlot[old.slot]?[old.phase]?.remove(id)
                if bySlot[old.slot]?.values.allSatisfy(\.isEmpty) == true { bySlot[old.slot] = nil }
            }
            if old.isLoading { loadingByPlugin[old.plugin, default: 0] -= 1 }
        }
        if old?.holder != new?.holder {
            if let uid = old?.holder {
                heldByUID[uid]! -= 1
                if heldByUID[uid] == 0 { heldByUID[uid] = nil }
            }
            if let uid = new?.holder { heldByUID[uid, default: 0] += 1 }
        }
        // utf8.count is O(1) on the native strings payloads arrive as.
        let (oldBytes, newBytes) = (old?.payloadJSON.utf8.count ?? 0, new?.payloadJSON.utf8.count ?? 0)
        if old?.plugin != new?.plugin || oldBytes != newBytes {
            if let old, oldBytes > 0 {
                payloadBytesByPlugin[old.plugin]! -= oldBytes
                if payloadBytesByPlugin[old.plugin] == 0 { payloadBytesByPlugin[old.plugin] = nil }
            }
            if let new, newBytes > 0 { payloadBytesByPlugin[new.plugin, default: 0] += newBytes }
        }
        if let new {
            wanting.insert(new.slot)
            if old?.slot != new.slot || old?.phase != new.phase { bySlot[new.slot, default: [:]][new.phase, default: []].insert(id) }
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
    enum Phase: Hashable, Sendable { case loading, ready, shown }

    var phase: Phase {
        switch state {
        case .loading: .loading
        case .ready: .ready
        case .shown: .shown
        }
    }

    var isLoading: Bool { phase == .loading }

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

/// Small integers (slot ranks) in a bitset, visited in increasing order: the scheduler
/// walks its short slots in the config's order without sorting them on every input.
struct RankSet: Sendable {
    private var words: [UInt64] = []

    mutating func insert(_ rank: Int) {
        let (word, bit) = rank.quotientAndRemainder(dividingBy: 64)
        if word >= words.count { words += Array(repeating: 0, count: word - words.count + 1) }
        words[word] |= 1 << UInt64(bit)
    }

    mutating func remove(_ rank: Int) {
        let (word, bit) = rank.quotientAndRemainder(dividingBy: 64)
        if word < words.count { words[word] &= ~(1 << UInt64(bit)) }
    }

    mutating func removeAll() { words = [] }

    /// The smallest member at or above `rank`.
    func next(from rank: Int) -> Int? {
        var (word, bit) = rank.quotientAndRemainder(dividingBy: 64)
        while word < words.count {
            let rest = bit >= 64 ? 0 : words[word] & (~0 << UInt64(bit))
            if rest != 0 { return word * 64 + rest.trailingZeroBitCount }
            (word, bit) = (word + 1, 0)
        }
        return nil
    }
}
