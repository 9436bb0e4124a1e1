/// The daemon's core: slots, their ads' state machine and the preload scheduler.
///
/// Pure: every input carries the time it happened at, every output is an `Effect` for the
/// shell to carry out. It enforces the rules of docs/rules.md whatever the plugins do:
/// a fresh object per load, valid only while loaded, unshown and unexpired, completion
/// exactly once, a deadline on every load, and a buffer kept full without hammering.
public struct Engine: Sendable {
    public internal(set) var settings: SchedulerSettings
    var slotOrder: [String] = []
    var slots: [String: SlotState] = [:]
    /// Per privacy class, the Shows of every slot that counted as demand for it: a slot
    /// expects each class in use on the host before its own viewers of it ask (docs/privacy.md, "Inventory").
    var hostClassDemand: [PrivacyClass: DemandEstimate] = [:]
    /// Each slot's place in slotOrder: slots are always looked at in the config's order.
    var slotRank: [String: Int] = [:]
    /// Slots that may be below their buffer, by rank (the table collects them by name).
    var wanting = RankSet()
    var ads = AdTable()
    var retired = RetiredAds()
    var availablePlugins: Set<String>
    /// Available plugins whose host is down (crashed, restarting or disabled): no loads go there.
    var downPlugins: Set<String> = []
    /// Each network's pause and learned rate limit, once it answered rate_limited.
    var paces: [String: NetworkPace] = [:]
    /// Per network, the slots short of their target that only its loads in flight keep from
    /// it, and since when: who its next free loads are kept for (docs/rules.md, "Loads in
    /// flight per network").
    var waitingFor: [String: [String: Moment]] = [:]
    /// Load requests in progress.
    var requests: [RequestID: LoadRequest] = [:]
    /// Show calls waiting for their plugin's answer, by the ad it was asked to present.
    var showing: [AdID: PendingShow] = [:]
    /// Plugin objects of completed Loads whose ads are still out, by the object's id.
    var handedOut: [AdID: HandedOutObject] = [:]
    var nextID: AdID = 1
    var random: SplitMix64
    /// Reports for ids this engine never issued (or forgot): only a broken plugin sends them.
    public internal(set) var unattributedCallbacks = 0
    /// Loads ended, per available network: by outcome, and how long they took (for metrics).
    public internal(set) var networkLoads: [String: NetworkLoads] = [:]
    /// The impressions the frequency rules count (docs/caps.md).
    var history = ImpressionHistory()
    /// Ads handed out in a slot with rules, not counted yet: the rules count them meanwhile.
    var pending = ImpressionHistory()
    var pendingByAd: [AdID: CountedImpression] = [:]
    /// Rewarded ads an earlier run showed whose complete may still come (Engine+PromisedRewards).
    var promised: [AdID: PromisedReward] = [:]

    public init(slots: [SlotConfig], plugins: Set<String>, settings: SchedulerSettings = .init(), seed: UInt64 = 1) {
        self.settings = settings
        self.availablePlugins = plugins
        self.random = SplitMix64(seed: seed)
        for config in slots { addSlot(config) }
        keepHistoryForRules()
    }

    // MARK: Inputs

    /// Time passed: deadlines, expiries and backoffs that are due take effect, and slots
    /// below their buffer start loads.
    public mutating func advance(to now: Moment) -> [Effect] {
        var effects: [Effect] = []
        var dueAds: [AdID] = []
        var unanswered: [AdID] = []
        for timer in ads.timers.popDue(at: now) {
            switch timer {
            case .adState(let id): dueAds.append(id)
            case .adRefresh(let id): if let slot = ads[id]?.slot { ads.wanting.insert(slot) }
            case .backoff(let slot, _): ads.wanting.insert(slot)
            case .pause: break  // the slots waiting for that network are still wanting
            case .forget(let id): retired.forget(id, at: now)
            case .showAnswer(let id): unanswered.append(id)
            case .capLifts(let slot): ads.wanting.insert(slot)
            }
        }
        for id in dueAds.sorted() {
            guard let ad = ads[id] else { continue }
            switch ad.state {
            case .loading(let deadline) where deadline <= now:
                slots[ad.slot]?.counters.timeouts += 1
                noteLoadEnded(ad, outcome: AdErrorCode.timeout.rawValue, now: now)
                if !cutShortByCaller(ad, deadline: deadline) { noteFailure(of: ad, code: .timeout, now: now) }
                effects += end(id, as: .timedOut, now: now)
                effects.append(.emit(EngineEvent(.adTimedOut, slot: ad.slot, adID: id, network: ad.plugin, errorCode: .timeout,
                                                 message: "no answer within \(deadline - ad.startedAt)", holder: eventHolder(of: ad))))
                effects += attemptFailed(ad, code: .timeout, now: now)
            case .ready(let expiresAt) where expiresAt <= now:
                slots[ad.slot]?.counters.expired += 1
                effects += end(id, as: .expired, now: now)
                effects.append(.emit(EngineEvent(.adExpired, slot: ad.slot, adID: id, network: ad.plugin, holder: eventHolder(of: ad))))
            case .shown(let endsAt) where endsAt <= now:
                effects += end(id, as: ad.closedAt == nil ? .ended : .closed, now: now)
            default:
                break
            }
        }
        for id in unanswered.sorted() { effects += showAnswerMissed(id, now: now) }
        history.prune(now: now.capTime)
        return effects + refillWanting(now: now)
    }

    /// A plugin reported on one of its ads. A report naming another plugin's ad is ignored

    // MARK: Outputs

    /// A fresh id from the same never-reused sequence as the ads' (interactive sessions take
    /// theirs here, so a plugin report names one thing only).
    public mutating func issueID() -> AdID {
        defer { nextID += 1 }
        return nextID
    }

    /// The next moment at which `advance` has something to do: `now` if a moment fell due
    /// since the last advance. (Skipping those once left shown ads alive until some unrelated
    /// wakeup: after a burst, hundreds stayed with the plugin. advance pops every due moment,
    /// so a shell that sleeps until this never spins.)
    public func nextWakeup(after now: Moment) -> Moment? {
        ads.timers.first.map { max($0.at, now) }
    }

    /// Every slot as operators and apps see it; `capHold` is what a Show for `user` would meet.
    public func slotStatuses(at now: Moment, capsFor user: CapUser = CapUser(uid: nil, id: nil)) -> [SlotStatus] {
        slotOrder.compactMap { id in
            guard let slot = slots[id] else { return nil }
            let valid = ads.inSlot(id, .ready).filter { $0.isValid(at: now) }
            return SlotStatus(
                config: slot.config,
                ready: valid.count,
                readyAds: valid.map(\.id),
                readyByClass: valid.reduce(into: [:]) { $0[$1.privacy.privacyClass, default: 0] += 1 },
                loading: ads.count(in: id, .loading),
                shownOpen: ads.count(in: id, .shown),
                counters: slot.counters,
                entries: slot.entries.map { entry in
                    EntryStatus(loads: entry.loads, fills: entry.fills, failuresInRow: entry.failuresInRow,
                                lastError: entry.lastError,
                                backoff: entry.backoffUntil > now ? entry.backoffUntil - now : .zero,
                                estimate: entry.estimate, learnedECPM: entry.paid.value)
                },
                target: target(of: id, now: now),
                missingPlugins: missingPlugins(of: id),
                capHold: capHold(slot: id, user: user, now: now)
            )
        }
    }

    /// Every available network: loads in flight and any rate-limit pause.
    public func networkStatuses(at now: Moment) -> [NetworkStatus] {
        availablePlugins.sorted().map { name in
            let pace = paces[name] ?? NetworkPace()
            return NetworkStatus(name: name, loadsInFlight: loadsInFlight(to: name),
                                 paused: pace.pausedUntil > now ? pace.pausedUntil - now : .zero, learnedLimit: pace.limit(at: now))
        }
    }

    /// Whether this id is a shown ad still open for reports.
    public func isShown(_ id: AdID) -> Bool {
        if case .shown = ads[id]?.state { true } else { false }
    }

    // MARK: Ads ending

    /// Ends an ad: its object is destroyed and only its memory is kept, for late callbacks.
    mutating func end(_ id: AdID, as reason: RetiredAd.Reason, now: Moment) -> [Effect] {
        guard let ad = ads.removeValue(forKey: id) else { return [] }
        let promise = settlePromise(of: ad, endingAs: reason)
        retire(id, RetiredAd(slot: ad.slot, plugin: ad.plugin, reason: reason, forgetAt: now + settings.retiredMemory, holder: eventHolder(of: ad)))
        var effects = interruptShow(of: id, plugin: ad.plugin, slot: ad.slot, .interrupted(slot: ad.slot, reason: reason.rawValue))
        if let object = ad.objectID {
            // One of a Load's ads: the plugin's object goes with the last of them.
            handedOut[object]?.children.remove(id)
            if handedOut[object]?.children.isEmpty == true {
                handedOut[object] = nil
                retire(object, RetiredAd(slot: ad.slot, plugin: ad.plugin, reason: reason, forgetAt: now + settings.retiredMemory, holder: ad.holder))
                effects.append(.destroy(object, plugin: ad.plugin))
            }
        } else {
            if let loss = reason.loss, slots[ad.slot].map({ isBidder($0, ad.entryIndex) }) == true {
                effects.append(.lose(id, plugin: ad.plugin, reason: loss))
            }
            effects.append(.destroy(id, plugin: ad.plugin))
        }
        // An ad no viewer was handed lost, whyever it ended: expired unless the auction says otherwise.
        switch ad.notices {
        case .held: effects.append(.notice(id, plugin: ad.plugin, .loss(reason.loss ?? .expired)))
        case .won: effects.append(.notice(id, plugin: ad.plugin, .settle))
        case nil: break
        }
        if reason == .expired { effects += markDryIfEmpty(ad.slot, now: now) }
        return promise + effects + dropUncounted(id, slot: ad.slot, now: now)
    }

    mutating func retire(_ id: AdID, _ memory: RetiredAd) {
        for dropped in retired.remember(id, memory, limit: settings.retiredMemoryLimit) { ads.timers.remove(.forget(dropped)) }
        ads.timers.set(.forget(id), at: memory.forgetAt)
    }

}
