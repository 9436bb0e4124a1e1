/// The daemon's core: slots, their ads' state machine and the preload scheduler.
///
/// Pure: every input carries the time it happened at, every output is an `Effect` for the
/// shell to carry out. It enforces the rules of docs/rules.md whatever the plugins do:
/// a fresh object per load, valid only while loaded, unshown and unexpired, completion
/// exactly once, a deadline on every load, and a buffer kept full without hammering.
public struct Engine: Sendable {
    public private(set) var settings: SchedulerSettings
    private var slotOrder: [String] = []
    var slots: [String: SlotState] = [:]
    /// Each slot's place in slotOrder: slots are always looked at in the config's order.
    private var slotRank: [String: Int] = [:]
    /// Slots that may be below their buffer, by rank (the table collects them by name).
    private var wanting = RankSet()
    private var ads = AdTable()
    private var retired = RetiredAds()
    private(set) var availablePlugins: Set<String>
    /// Each network's pause and learned rate limit, once it answered rate_limited.
    var paces: [String: NetworkPace] = [:]
    /// Load requests in progress.
    private var requests: [RequestID: LoadRequest] = [:]
    /// Plugin objects of completed Loads whose ads are still out, by the object's id.
    private var handedOut: [AdID: HandedOutObject] = [:]
    private var nextID: AdID = 1
    private var random: SplitMix64
    /// Reports for ids this engine never issued (or forgot): only a broken plugin sends them.
    public private(set) var unattributedCallbacks = 0

    public init(slots: [SlotConfig], plugins: Set<String>, settings: SchedulerSettings = .init(), seed: UInt64 = 1) {
        self.settings = settings
        self.availablePlugins = plugins
        self.random = SplitMix64(seed: seed)
        for config in slots { addSlot(config) }
    }

    // MARK: Inputs

    /// Time passed: deadlines, expiries and backoffs that are due take effect, and slots
    /// below their buffer start loads.
    public mutating func advance(to now: Moment) -> [Effect] {
        var effects: [Effect] = []
        var dueAds: [AdID] = []
        for timer in ads.timers.popDue(at: now) {
            switch timer {
            case .adState(let id): dueAds.append(id)
            case .adRefresh(let id): if let slot = ads[id]?.slot { ads.wanting.insert(slot) }
            case .backoff(let slot, _): ads.wanting.insert(slot)
            case .pause: break  // the slots waiting for that network are still wanting
            case .forget(let id): retired.forget(id, at: now)
            }
        }
        for id in dueAds.sorted() {
            guard let ad = ads[id] else { continue }
            switch ad.state {
            case .loading(let deadline) where deadline <= now:
                slots[ad.slot]?.counters.timeouts += 1
                noteFailure(of: ad, code: .timeout, now: now)
                effects += end(id, as: .timedOut, now: now)
                effects.append(.emit(EngineEvent(.adTimedOut, slot: ad.slot, adID: id, network: ad.plugin,
                                                 errorCode: .timeout, message: "no answer within \(deadline - ad.startedAt)")))
                effects += attemptFailed(ad, code: .timeout, now: now)
            case .ready(let expiresAt) where expiresAt <= now:
                slots[ad.slot]?.counters.expired += 1
                effects += end(id, as: .expired, now: now)
                effects.append(.emit(EngineEvent(.adExpired, slot: ad.slot, adID: id, network: ad.plugin)))
            case .shown(let endsAt) where endsAt <= now:
                effects += end(id, as: .ended, now: now)
            default:
                break
            }
        }
        return effects + refillWanting(now: now)
    }

    /// A plugin reported on one of its ads. A report naming another plugin's ad is ignored
    /// like one for an ad that does not exist.
    public mutating func pluginReported(_ report: PluginReport, for id: AdID, from plugin: String, now: Moment) -> [Effect] {
        if report == .destroyed {
            retired[id]?.destroyConfirmed = true
            return []
        }
        if let object = handedOut[id], object.plugin == plugin {
            switch report {
            case .mediaCached, .other:
                // The object's ads are with the app: its events are theirs.
                let kind: EngineEvent.Kind = report == .mediaCached ? .mediaCached : .adEvent
                var event = EngineEvent(kind, slot: object.slot, adID: id, network: plugin)
                if case .other(let name, let detail) = report { (event.message, event.detailJSON) = (name, detail) }
                return [.emit(event)]
            default:
                return ignored(report, for: id, from: plugin)
            }
        }
        guard let ad = ads[id], ad.plugin == plugin else { return ignored(report, for: id, from: plugin) }
        switch (report, ad.state) {
        case (.loaded(_, let expiresIn, let price, let tracksItself, let items, _), .loading) where ad.requestID != nil:
            return loadRequestFilled(ad, items: items, expiresIn: expiresIn, price: price, tracksItself: tracksItself, now: now)

        case (.loaded(let payload, let expiresIn, let price, let tracksItself, _, let rewardByNetwork), .loading):
            let lifetime = min(expiresIn ?? ad.ttl, ad.ttl)
            let expiresAt = now + lifetime
            let margin = min(settings.refreshAhead, lifetime / 5)
            ads[id]!.state = .ready(expiresAt: expiresAt)
            ads[id]!.loadedAt = now
            ads[id]!.payloadJSON = payload
            ads[id]!.price = price ?? 0
            ads[id]!.tracksItself = tracksItself
            ads[id]!.rewardByNetwork = rewardByNetwork
            ads[id]!.refreshAt = expiresAt - margin
            slots[ad.slot]?.counters.fills += 1
            entrySucceeded(ad, lifetime: lifetime, now: now)
            var effects: [Effect] = [.emit(EngineEvent(.adLoaded, slot: ad.slot, adID: id, network: ad.plugin))]
            effects += retireSurplus(in: ad.slot, now: now)
            return effects + refillWanting(now: now)

        case (.loadedInvalid(let reason), .loading):
            slots[ad.slot]?.counters.errors += 1
            slots[ad.slot]?.counters.contractViolations += 1
            noteFailure(of: ad, code: .pluginFault, now: now)
            var effects = end(id, as: .failed, now: now)
            effects.append(.emit(EngineEvent(.contractViolation, slot: ad.slot, adID: id, network: ad.plugin,
                                             errorCode: .pluginFault, message: reason)))
            effects += attemptFailed(ad, code: .pluginFault, now: now)
            return effects + refillWanting(now: now)

        case (.failed(let code, let networkCode, let message), .loading):
            switch code {
            case .noFill: slots[ad.slot]?.counters.noFills += 1
            case .timeout: slots[ad.slot]?.counters.timeouts += 1
            default: slots[ad.slot]?.counters.errors += 1
            }
            noteFailure(of: ad, code: code, now: now)
            var effects = end(id, as: .failed, now: now)
            effects.append(.emit(EngineEvent(.adFailed, slot: ad.slot, adID: id, network: ad.plugin,
                                             errorCode: code, networkCode: networkCode, message: message)))
            if code == .rateLimited,
               paces[ad.plugin, default: NetworkPace()].rateLimited(loadStartedAt: ad.startedAt, at: now, pause: settings.rateLimitPause) {
                // The network asked us to slow down: no load to it from any slot for a while,
                // then no more than it took before it said so.
                let pace = paces[ad.plugin]!
                ads.timers.set(.pause(ad.plugin), at: pace.pausedUntil)
                let limit = pace.limit(at: now).map { ", then at most \($0) loads per \(NetworkPace.window)" } ?? ""
                effects.append(.emit(EngineEvent(.networkPaused, slot: ad.slot, network: ad.plugin, errorCode: code,
                                                 networkCode: networkCode, message: "paused for \(pace.pausedUntil - now)\(limit)")))
            }
            effects += attemptFailed(ad, code: code, now: now)
            return effects + refillWanting(now: now)

        case (.loaded, _), (.loadedInvalid, _), (.failed, _):
            // docs/rules.md, "Completion exactly once": this object already did.
            return ignored(report, for: id, from: plugin)

        case (.mediaCached, _):
            ads[id]!.mediaCached = true
            return [.emit(EngineEvent(.mediaCached, slot: ad.slot, adID: id, network: ad.plugin))]

        case (.reward(let transID), _):
            return grant(id, networkTransID: transID)

        case (.other(let name, let detail), _):
            var event = EngineEvent(.adEvent, slot: ad.slot, adID: id, network: ad.plugin, message: name)
            event.detailJSON = detail
            return [.emit(event)]

        case (.destroyed, _):
            return []  // handled above: a live ad is never destroyed
        }
    }

    /// An app asks for an ad to show now.
    public mutating func show(slot slotID: String, userID: String?, reward: RewardModel? = nil, now: Moment) -> (Result<ShownAd, ShowError>, [Effect]) {
        guard let slot = slots[slotID] else { return (.failure(.slotNotFound(slotID)), []) }
        guard slot.config.format.isPreloaded else {
            return (.failure(.invalidParameter(name: "slot", reason: "\(slotID) is a \(slot.config.format.rawValue) slot: \(slot.config.format.howToUse)")), [])
        }
        if slot.config.format == .rewarded, (userID ?? "").isEmpty {
            // docs/rules.md, "Show": the user id is required for a rewarded ad and is never empty.
            return (.failure(.invalidParameter(name: "user_id", reason: "a rewarded slot needs a non-empty user_id")), [])
        }
        // Demand is every Show asked, found or not.
        slots[slotID]!.demand.noteShow(at: now)
        var effects = advance(to: now)
        let candidates = ads.inSlot(slotID, .ready).filter { $0.isValid(at: now) }
        // The highest price, then the earliest expiry (the one that would be wasted first).
        guard let pick = candidates.min(by: { a, b in
            (-a.price, a.expiresAt!, a.id) < (-b.price, b.expiresAt!, b.id)
        }) else {
            effects += markDry(slotID)
            // The Show raised the slot's demand: its target may have risen with it.
            return (.failure(.noAdReady(slot: slotID)), effects + refill(slotID, now: now))
        }
        // docs/rules.md, "adValid": out of validity at once, before anything else can pick it again.
        ads[pick.id]!.state = .shown(endsAt: now + settings.shownLifetime)
        ads[pick.id]!.userID = userID
        ads[pick.id]!.rewardOverride = reward
        slots[slotID]!.counters.shows += 1
        let shown = ShownAd(
            id: pick.id, slot: slotID, network: pick.plugin, format: pick.format,
            payloadJSON: pick.payloadJSON, expiresAt: pick.expiresAt!, price: pick.price
        )
        effects.append(.show(pick.id, plugin: pick.plugin, userID: userID))
        effects.append(.emit(EngineEvent(.adShown, slot: slotID, adID: pick.id, network: pick.plugin, userID: userID)))
        effects += markDryIfEmpty(slotID, now: now)
        effects += refill(slotID, now: now)
        return (.success(shown), effects)
    }

    /// An app reports what its viewer did with a shown ad.
    public mutating func report(_ event: ViewerEvent, for id: AdID, now: Moment) -> (Result<Void, ReportError>, [Effect]) {
        guard let ad = ads[id] else {
            let reason = retired[id].map { "ad \(id) has ended (\($0.reason.rawValue))" } ?? "no ad \(id) is known"
            return (.failure(.adNotValid(reason: reason)), [])
        }
        guard case .shown = ad.state else {
            return (.failure(.adNotValid(reason: "ad \(id) has not been shown")), [])
        }
        if event.once, ad.reported.contains(event) {
            return (.failure(.adNotValid(reason: "ad \(id) already reported \(event.rawValue)")), [])
        }
        if event == .click, ad.reported.contains(.click) {
            // One click per ad is billed; later ones are accepted and dropped.
            slots[ad.slot]?.counters.duplicateReports += 1
            return (.success(()), [])
        }
        ads[id]!.reported.insert(event)
        switch event {
        case .impression: slots[ad.slot]?.counters.impressions += 1
        case .click: slots[ad.slot]?.counters.clicks += 1
        default: break
        }
        var effects: [Effect] = [.emit(EngineEvent(.adEvent, slot: ad.slot, adID: id, network: ad.plugin, viewerEvent: event))]
        // A plugin that tracks impressions and clicks itself is not told again: never both.
        if !(ad.tracksItself && (event == .impression || event == .click)) {
            effects.insert(.notify(ad.objectID ?? id, plugin: ad.plugin, event: event), at: 0)
        }
        // A network that leaves the reward to the host: the viewer finishing the video earns it.
        if event == .complete, ad.format == .rewarded, !ad.rewardByNetwork { effects += grant(id, networkTransID: nil) }
        if event == .close { effects += end(id, as: .closed, now: now) }
        return (.success(()), effects)
    }

    /// An app asks for ads of an on-demand slot (banner, splash, native). The waterfall is
    /// tried entry by entry, each with its own timeout, within the request's overall
    /// deadline; the outcome comes later as a `.completeLoad` effect.
    public mutating func load(slot slotID: String, _ asked: LoadParameters, request: RequestID, now: Moment) -> (Result<Void, ShowError>, [Effect]) {
        guard let slot = slots[slotID] else { return (.failure(.slotNotFound(slotID)), []) }
        let config = slot.config
        guard config.format.isOnDemand else {
            return (.failure(.invalidParameter(name: "slot", reason: "\(slotID) is a \(config.format.rawValue) slot: \(config.format.howToUse)")), [])
        }
        let count = asked.count ?? config.count
        if config.format == .native {
            guard (1...10).contains(count) else {
                return (.failure(.invalidParameter(name: "count", reason: "a native load takes 1 to 10 ads (3 recommended), got \(count)")), [])
            }
        } else if count != 1 {
            return (.failure(.invalidParameter(name: "count", reason: "only native slots load several ads at once")), [])
        }
        let (width, height) = (asked.width ?? config.width, asked.height ?? config.height)
        guard width >= 0, height >= 0, width <= 10_000, height <= 10_000 else {
            return (.failure(.invalidParameter(name: width < 0 || width > 10_000 ? "width" : "height", reason: "sizes are 0 to 10000 points")), [])
        }
        if config.format == .banner, width == 0 || height == 0 {
            return (.failure(.invalidParameter(name: "width", reason: "a banner needs a width and a height (none in the request or the slot)")), [])
        }
        let timeout = asked.timeout ?? config.loadTimeout
        guard timeout > .zero, timeout <= .seconds(60) else {
            return (.failure(.invalidParameter(name: "timeout_ms", reason: "1 ms to 60 s")), [])
        }
        requests[request] = LoadRequest(slot: slotID, count: count, width: width, height: height, deadline: now + timeout,
                                        targetingJSON: asked.targetingJSON)
        return (.success(()), attempt(request, now: now))
    }

    /// The plugin could not present an ad a Show just took (docs/rules.md, "Show"): the ad ends,
    /// and the shell asks for the next valid one in the same call.
    public mutating func displayFailed(_ id: AdID, reason: String, now: Moment) -> [Effect] {
        guard let ad = ads[id], case .shown = ad.state else { return [] }
        slots[ad.slot]?.counters.displayFailures += 1
        var effects = end(id, as: .failedToDisplay, now: now)
        effects.append(.emit(EngineEvent(.adEvent, slot: ad.slot, adID: id, network: ad.plugin, message: "failed_to_display")))
        effects.append(.emit(EngineEvent(.adFailed, slot: ad.slot, adID: id, network: ad.plugin, errorCode: .notReady, message: reason)))
        return effects + refill(ad.slot, now: now)
    }

    /// Plugins came or went (load, refusal, reload): entries of missing plugins are skipped.
    public mutating func setAvailablePlugins(_ plugins: Set<String>, now: Moment) -> [Effect] {
        availablePlugins = plugins
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
                oldEntries.firstIndex(of: entry).map { existing.entries[$0] } ?? EntryState(entry, of: config)
            }
            setBackoffTimers(of: config.id, to: slots[config.id]!.entries)
            slots[config.id]!.config = config
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
            // A smaller buffer: the ads closest to expiry go first (a demand-aware slot keeps
            // what it holds up to its new maximum, to be shown as demand comes).
            let valid = ads.inSlot(config.id, .ready).filter { $0.isValid(at: now) }
                .sorted { ($0.expiresAt!, $0.id) < ($1.expiresAt!, $1.id) }
            for ad in valid.prefix(max(0, valid.count - config.bufferMax)) { effects += end(ad.id, as: .removed, now: now) }
        }
        slotRank = Dictionary(uniqueKeysWithValues: slotOrder.enumerated().map { ($1, $0) })
        wanting.removeAll()  // ranks changed: every slot is looked at again by name
        ads.wanting.formUnion(slotOrder)
        return effects + advance(to: now)
    }

    /// The daemon stops: pending Loads fail, every live ad ends and its object is destroyed.
    public mutating func shutdown(now: Moment) -> [Effect] {
        let pending = requests.keys.sorted().flatMap { rid in
            finish(rid, .failure(LoadFailure(code: .internal, message: "the daemon is stopping", attempts: requests[rid]?.attempts ?? [])))
        }
        return pending + slotOrder.flatMap { endAll(in: $0, now: now) }
    }

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

    /// Every slot as operators and apps see it.
    public func slotStatuses(at now: Moment) -> [SlotStatus] {
        slotOrder.compactMap { id in
            guard let slot = slots[id] else { return nil }
            let valid = ads.inSlot(id, .ready).filter { $0.isValid(at: now) }
            return SlotStatus(
                config: slot.config,
                ready: valid.count,
                readyAds: valid.map(\.id),
                loading: ads.count(in: id, .loading),
                shownOpen: ads.count(in: id, .shown),
                counters: slot.counters,
                entries: slot.entries.map { entry in
                    EntryStatus(loads: entry.loads, fills: entry.fills, failuresInRow: entry.failuresInRow,
                                lastError: entry.lastError,
                                backoff: entry.backoffUntil > now ? entry.backoffUntil - now : .zero,
                                estimate: entry.estimate)
                },
                target: target(of: id, now: now)
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

    /// The slot an ad belongs (or belonged) to, for the shell's logs.
    public func slot(of id: AdID) -> String? { ads[id]?.slot ?? retired[id]?.slot }

    /// Whether this id is a shown ad still open for reports.
    public func isShown(_ id: AdID) -> Bool {
        if case .shown = ads[id]?.state { true } else { false }
    }

    // MARK: The scheduler

    private mutating func addSlot(_ config: SlotConfig) {
        slotRank[config.id] = slotOrder.count
        slotOrder.append(config.id)
        slots[config.id] = SlotState(config: config, entries: EntryState.fresh(for: config))
        ads.wanting.insert(config.id)
    }

    /// docs/rules.md, "Preloading": keep the slot's target of fresh ads (docs/scheduler.md), starting at most
    /// `maxLoads` loads. An ad inside its refresh margin still counts as valid for Show but
    /// no longer as fresh, so its replacement is already on the way.
    private mutating func refill(_ slotID: String, now: Moment, maxLoads: Int = .max) -> [Effect] {
        guard let slot = slots[slotID], slot.config.format.isPreloaded else {
            if let rank = slotRank[slotID] { wanting.remove(rank) }
            return []
        }
        let ready = ads.inSlot(slotID, .ready)
        let fresh = ready.filter { $0.isValid(at: now) && $0.refreshAt > now }.count
        let loading = ads.count(in: slotID, .loading)
        var deficit = targetCount(of: slot, now: now) - fresh - loading
        var effects: [Effect] = []
        if deficit > 0, slot.config.parallel > 1 {
            // One round: the first N usable entries at once, each a distinct network offer.
            for entryIndex in usableEntries(slot, now: now).prefix(max(slot.config.parallel, deficit)) {
                effects.append(startLoad(slotID, entryIndex: entryIndex, now: now))
            }
            deficit = 0
        }
        while deficit > 0, effects.count < maxLoads,
              let entryIndex = pickEntry(slot, holding: fresh + loading + effects.count, now: now) {
            effects.append(startLoad(slotID, entryIndex: entryIndex, now: now))
            deficit -= 1
        }
        if ready.contains(where: { $0.isValid(at: now) }) { slots[slotID]!.dry = false }
        if deficit > 0 {
            // Short because a network is pacing itself: look again when it admits a load.
            for plugin in Set(slot.config.waterfall.map(\.plugin)) {
                if let at = paces[plugin]?.nextAdmission(at: now) { ads.timers.set(.pause(plugin), at: at) }
            }
        }
        // A slot still short (backoffs, pauses, network caps) is looked at again on every input.
        if deficit <= 0, let rank = slotRank[slotID] { wanting.remove(rank) }
        return effects
    }

    /// The waterfall: the first entry whose plugin is there and that is not backing off; for
    /// a demand-aware slot, the first whose ad is likely to be shown before it expires.
    private func pickEntry(_ slot: SlotState, holding: Int, now: Moment) -> Int? {
        let usable = usableEntries(slot, now: now)
        return slot.config.isDemandAware ? lastingEntry(of: slot, among: usable, holding: holding, now: now) : usable.first
    }

    /// Entries in waterfall order whose plugin is there, not backing off, not paused and not
    /// at its cap of loads in flight.
    func usableEntries(_ slot: SlotState, now: Moment) -> [Int] {
        var inFlight: [String: Int] = [:]
        return slot.config.waterfall.indices.filter { index in
            let plugin = slot.config.waterfall[index].plugin
            let load = inFlight[plugin, default: loadsInFlight(to: plugin)]
            guard availablePlugins.contains(plugin), slot.entries[index].backoffUntil <= now,
                  paces[plugin]?.admits(at: now) ?? true, load < settings.maxLoadsInFlightPerNetwork
            else { return false }
            inFlight[plugin] = load + 1
            return true
        }
    }

    private func loadsInFlight(to plugin: String) -> Int { ads.loadsInFlight(to: plugin) }

    /// Slots that may be below their buffer: those whose ads changed and those still short,
    /// since a load that ended may have freed a network's cap. Round by round, one load per
    /// slot a round in the config's order, so a burst on one slot cannot take every load a
    /// network admits before the other slots had theirs.
    private mutating func refillWanting(now: Moment) -> [Effect] {
        for slot in ads.wanting {
            if let rank = slotRank[slot] { wanting.insert(rank) }
        }
        ads.wanting.removeAll(keepingCapacity: true)
        var effects: [Effect] = []
        var started = true
        while started {
            started = false
            var cursor = 0
            while let rank = wanting.next(from: cursor) {
                cursor = rank + 1
                let round = refill(slotOrder[rank], now: now, maxLoads: 1)
                started = started || !round.isEmpty
                effects += round
                // Every network at its cap: no other slot can start a load either. Those left
                // short stay wanting until a load ends.
                if round.isEmpty, !availablePlugins.contains(where: { loadsInFlight(to: $0) < settings.maxLoadsInFlightPerNetwork }) {
                    return effects
                }
            }
        }
        return effects
    }

    /// An entry's backoff moments as timers, after its slot's entries were rebuilt.
    private mutating func setBackoffTimers(of slotID: String, to entries: [EntryState]) {
        for index in slots[slotID]?.entries.indices ?? 0..<0 { ads.timers.remove(.backoff(slot: slotID, entry: index)) }
        for (index, entry) in entries.enumerated() where entry.backoffUntil > .zero {
            ads.timers.set(.backoff(slot: slotID, entry: index), at: entry.backoffUntil)
        }
    }

    /// A load filled with an ad that lives `lifetime`.
    private mutating func entrySucceeded(_ ad: AdRecord, lifetime: Duration, now: Moment) {
        slots[ad.slot]?.entries[ad.entryIndex].succeeded()
        slots[ad.slot]?.entries[ad.entryIndex].estimate.note(attempt: now - ad.startedAt, lifetime: lifetime)
        ads.timers.remove(.backoff(slot: ad.slot, entry: ad.entryIndex))
    }

    /// docs/rules.md, "Fresh object per load": every load is a new object with a new id, loaded
    /// once; and "Deadlines": every load has one.
    private mutating func startLoad(_ slotID: String, entryIndex: Int, now: Moment) -> Effect {
        let config = slots[slotID]!.config
        let entry = config.waterfall[entryIndex]
        let id = nextID
        nextID += 1
        let deadline = now + entry.timeout
        ads[id] = AdRecord(
            id: id, slot: slotID, format: config.format, plugin: entry.plugin, entryIndex: entryIndex,
            ttl: config.ttl, timeout: entry.timeout, state: .loading(deadline: deadline), startedAt: now
        )
        slots[slotID]!.counters.loads += 1
        slots[slotID]!.entries[entryIndex].loads += 1
        paces[entry.plugin, default: NetworkPace()].noteStart(at: now)
        return .load(LoadOrder(
            adID: id, plugin: entry.plugin, slotID: slotID, format: config.format, entry: entry,
            deadline: deadline, reward: config.format == .rewarded ? config.reward : nil,
            testMode: config.testMode, targetingJSON: config.targetingJSON
        ))
    }

    /// A replacement arrived while the ad it replaces is still valid: the slot now holds one
    /// more than its buffer, so the one closest to expiry goes.
    private mutating func retireSurplus(in slotID: String, now: Moment) -> [Effect] {
        guard let slot = slots[slotID] else { return [] }
        let buffer = targetCount(of: slot, now: now)
        let valid = ads.inSlot(slotID, .ready).filter { $0.isValid(at: now) }
        guard valid.count > buffer else { return [] }
        let doomed = valid.filter { $0.refreshAt <= now }.sorted { ($0.expiresAt!, $0.id) < ($1.expiresAt!, $1.id) }
        var effects: [Effect] = []
        for ad in doomed.prefix(valid.count - buffer) {
            slots[slotID]!.counters.replaced += 1
            effects += end(ad.id, as: .replaced, now: now)
            effects.append(.emit(EngineEvent(.adReplaced, slot: slotID, adID: ad.id, network: ad.plugin)))
        }
        return effects
    }

    // MARK: Rewards

    /// The reward of a shown rewarded ad, once: the first of the network's reward event and
    /// the app's complete wins; any later one is refused and counted.
    private mutating func grant(_ id: AdID, networkTransID: String?) -> [Effect] {
        guard let ad = ads[id], ad.format == .rewarded, case .shown = ad.state else { return [] }
        guard !ad.rewarded else {
            slots[ad.slot]?.counters.duplicateRewards += 1
            return []
        }
        ads[id]!.rewarded = true
        slots[ad.slot]?.counters.rewards += 1
        let model = ad.rewardOverride ?? slots[ad.slot]?.config.reward ?? RewardModel()
        return [.grantReward(RewardGrant(adID: id, slot: ad.slot, network: ad.plugin, userID: ad.userID ?? "",
                                         reward: model, networkTransID: networkTransID))]
    }

    // MARK: Load requests

    /// Starts the request's next usable entry, or ends the request if none is left in time.
    private mutating func attempt(_ rid: RequestID, now: Moment) -> [Effect] {
        guard var request = requests[rid], let slot = slots[request.slot] else { return [] }
        if now >= request.deadline {
            return finish(rid, .failure(LoadFailure(code: .timeout, message: "no ad within the load's deadline", attempts: request.attempts)))
        }
        while request.nextEntry < slot.config.waterfall.count {
            let index = request.nextEntry
            request.nextEntry += 1
            let entry = slot.config.waterfall[index]
            // Entries known to be failing or paused are passed over, as for preloading.
            guard availablePlugins.contains(entry.plugin), slot.entries[index].backoffUntil <= now,
                  paces[entry.plugin]?.admits(at: now) ?? true, loadsInFlight(to: entry.plugin) < settings.maxLoadsInFlightPerNetwork
            else { continue }
            requests[rid] = request
            guard case .load(var order) = startLoad(request.slot, entryIndex: index, now: now) else { return [] }
            // This attempt may not outlive the request.
            order.deadline = min(order.deadline, request.deadline)
            ads[order.adID]!.state = .loading(deadline: order.deadline)
            ads[order.adID]!.requestID = rid
            (order.count, order.width, order.height) = (request.count, request.width, request.height)
            (order.variant, order.imageOptionsJSON) = (slot.config.variant, slot.config.imageOptionsJSON)
            if let targeting = request.targetingJSON { order.targetingJSON = targeting }
            return [.load(order)]
        }
        requests[rid] = request
        let failure = request.attempts.isEmpty
            ? LoadFailure(code: .noFill, message: "no waterfall entry could be asked (unavailable, paused or backing off)", attempts: [])
            : LoadFailure(code: request.attempts.last!.code, message: "every waterfall entry failed", attempts: request.attempts)
        return finish(rid, .failure(failure))
    }

    /// A request's attempt ended without ads: note it, then the next entry.
    private mutating func attemptFailed(_ ad: AdRecord, code: AdErrorCode, now: Moment) -> [Effect] {
        guard let rid = ad.requestID, requests[rid] != nil else { return [] }
        let entry = slots[ad.slot]?.config.waterfall[ad.entryIndex]
        requests[rid]!.attempts.append(.init(plugin: ad.plugin, adUnitID: entry?.adUnitID ?? "", code: code))
        return attempt(rid, now: now)
    }

    /// A request's attempt loaded: its ads go to the app at once, each with an id of its own.
    private mutating func loadRequestFilled(_ ad: AdRecord, items: [PayloadItem], expiresIn: Duration?, price: Double?,
                                           tracksItself: Bool, now: Moment) -> [Effect] {
        guard let rid = ad.requestID, let request = requests[rid] else { return [] }
        if ad.format == .native, items.isEmpty || items.contains(where: { !$0.hasHeadline }) {
            // A native ad without a headline is the plugin's fault, not something for an app.
            return pluginReported(.loadedInvalid(reason: "a native ad without a headline"), for: ad.id, from: ad.plugin, now: now)
        }
        slots[ad.slot]?.counters.fills += 1
        entrySucceeded(ad, lifetime: min(expiresIn ?? ad.ttl, ad.ttl), now: now)
        ads[ad.id] = nil
        let expiresAt = now + min(expiresIn ?? ad.ttl, ad.ttl)
        var shown: [ShownAd] = []
        var effects: [Effect] = [.emit(EngineEvent(.adLoaded, slot: ad.slot, adID: ad.id, network: ad.plugin))]
        var children: Set<AdID> = []
        for item in items.prefix(request.count) {
            let child = nextID
            nextID += 1
            var record = ad
            record.id = child
            record.objectID = ad.id
            record.requestID = nil
            record.state = .shown(endsAt: min(expiresAt, now + settings.shownLifetime))
            record.payloadJSON = item.json
            record.price = price ?? 0
            record.tracksItself = tracksItself
            ads[child] = record
            children.insert(child)
            shown.append(ShownAd(id: child, slot: ad.slot, network: ad.plugin, format: ad.format, payloadJSON: item.json,
                                 expiresAt: expiresAt, price: price ?? 0))
            effects.append(.emit(EngineEvent(.adShown, slot: ad.slot, adID: child, network: ad.plugin)))
        }
        slots[ad.slot]?.counters.shows += shown.count
        handedOut[ad.id] = HandedOutObject(slot: ad.slot, plugin: ad.plugin, children: children)
        effects.insert(.show(ad.id, plugin: ad.plugin, userID: nil), at: 0)
        return effects + finish(rid, .success(shown))
    }

    private mutating func finish(_ rid: RequestID, _ result: Result<[ShownAd], LoadFailure>) -> [Effect] {
        guard requests.removeValue(forKey: rid) != nil else { return [] }
        return [.completeLoad(rid, result)]
    }

    private mutating func noteFailure(of ad: AdRecord, code: AdErrorCode, now: Moment) {
        guard slots[ad.slot]?.entries.indices.contains(ad.entryIndex) == true else { return }
        slots[ad.slot]!.entries[ad.entryIndex].lastError = code
        // A rate_limited answer says nothing of the network's fill: its pace deals with it.
        if code != .rateLimited { slots[ad.slot]!.entries[ad.entryIndex].estimate.note(attempt: now - ad.startedAt, lifetime: nil) }
        let failures = slots[ad.slot]!.entries[ad.entryIndex].failuresInRow + 1
        // A demand-aware slot does not start doubling until the run of failures is longer
        // than the entry's learned fill rate explains (docs/scheduler.md, "Networks"): a
        // low-fill network's ordinary runs are not a failing network. Fixed-buffer slots, and
        // rate_limited answers, double from the first.
        var excess = failures - 1
        if code != .rateLimited, let slot = slots[ad.slot], slot.config.isDemandAware {
            excess = max(0, failures - slot.entries[ad.entryIndex].estimate.expectedNoFillRun)
        }
        let doubling = Double(UInt64(1) << UInt64(min(excess, 30)))
        let raw = min(settings.backoffMax.seconds, settings.backoffBase.seconds * doubling)
        let spread = 1 + settings.backoffJitter * (2 * random.nextUnit() - 1)
        slots[ad.slot]!.entries[ad.entryIndex].failuresInRow = failures
        slots[ad.slot]!.entries[ad.entryIndex].backoffUntil = now + .nanoseconds(Int64(raw * spread * 1e9))
        ads.timers.set(.backoff(slot: ad.slot, entry: ad.entryIndex), at: slots[ad.slot]!.entries[ad.entryIndex].backoffUntil)
    }

    /// A slot runs dry when its last valid ad goes (shown or expired) or a Show finds none.
    private mutating func markDryIfEmpty(_ slotID: String, now: Moment) -> [Effect] {
        ads.inSlot(slotID, .ready).contains { $0.isValid(at: now) } ? [] : markDry(slotID)
    }

    private mutating func markDry(_ slotID: String) -> [Effect] {
        guard slots[slotID]?.dry == false else { return [] }
        slots[slotID]!.dry = true
        slots[slotID]!.counters.ranDry += 1
        return [.emit(EngineEvent(.slotEmpty, slot: slotID, message: "no valid ad ready"))]
    }

    /// Ends an ad: its object is destroyed and only its memory is kept, for late callbacks.
    private mutating func end(_ id: AdID, as reason: RetiredAd.Reason, now: Moment) -> [Effect] {
        guard let ad = ads.removeValue(forKey: id) else { return [] }
        retire(id, RetiredAd(slot: ad.slot, plugin: ad.plugin, reason: reason, forgetAt: now + settings.retiredMemory))
        var effects: [Effect] = []
        if let object = ad.objectID {
            // One of a Load's ads: the plugin's object goes with the last of them.
            handedOut[object]?.children.remove(id)
            if handedOut[object]?.children.isEmpty == true {
                handedOut[object] = nil
                retire(object, RetiredAd(slot: ad.slot, plugin: ad.plugin, reason: reason, forgetAt: now + settings.retiredMemory))
                effects.append(.destroy(object, plugin: ad.plugin))
            }
        } else {
            effects.append(.destroy(id, plugin: ad.plugin))
        }
        if reason == .expired { effects += markDryIfEmpty(ad.slot, now: now) }
        return effects
    }

    private mutating func retire(_ id: AdID, _ memory: RetiredAd) {
        for dropped in retired.remember(id, memory, limit: settings.retiredMemoryLimit) { ads.timers.remove(.forget(dropped)) }
        ads.timers.set(.forget(id), at: memory.forgetAt)
    }

    private mutating func endAll(in slotID: String, now: Moment) -> [Effect] {
        let pending = requests.filter { $0.value.slot == slotID }.keys.sorted().flatMap { rid in
            finish(rid, .failure(LoadFailure(code: .internal, message: "slot \(slotID) was removed", attempts: requests[rid]?.attempts ?? [])))
        }
        return pending + ads.inSlot(slotID).flatMap { end($0.id, as: .removed, now: now) }
    }

    private mutating func ignored(_ report: PluginReport, for id: AdID, from plugin: String) -> [Effect] {
        let what: String
        switch report {
        case .loaded, .loadedInvalid: what = "loaded"
        case .failed: what = "failed"
        case .mediaCached: what = "media cached"
        case .other(let name, _): what = name
        case .reward: what = "reward"
        case .destroyed: what = "destroyed"
        }
        if let ad = ads[id], ad.plugin == plugin {
            slots[ad.slot]?.counters.ignoredCallbacks += 1
            return [.emit(EngineEvent(.callbackIgnored, slot: ad.slot, adID: id, network: plugin,
                                      message: "second completion (\(what)) ignored"))]
        }
        if let memory = retired[id], memory.plugin == plugin {
            // The host ended the ad but the plugin's ad_destroy has not returned yet: this
            // report crossed it on the way, which the contract allows. After a deadline,
            // though, an answer is late whenever it comes (docs/rules.md, "Completion exactly once").
            if !memory.destroyConfirmed, memory.reason != .timedOut { return [] }
            slots[memory.slot]?.counters.ignoredCallbacks += 1
            return [.emit(EngineEvent(.callbackIgnored, slot: memory.slot, adID: id, network: plugin,
                                      message: "\(what) after the ad ended (\(memory.reason.rawValue)) ignored"))]
        }
        unattributedCallbacks += 1
        return [.emit(EngineEvent(.callbackIgnored, adID: id, network: plugin,
                                  message: "\(what) for ad \(id), which is not one of this plugin's, ignored"))]
    }
}

/// An ad handed to an app.
public struct ShownAd: Sendable, Equatable {
    public var id: AdID
    public var slot: String
    public var network: String
    public var format: AdFormat
    public var payloadJSON: String
    public var expiresAt: Moment
    public var price: Double
}

/// One slot's state as reported to operators and apps.
public struct SlotStatus: Sendable, Equatable {
    public var config: SlotConfig
    /// Valid ads: loaded, unshown, unexpired.
    public var ready: Int
    /// Their ids, oldest first.
    public var readyAds: [AdID]
    public var loading: Int
    /// Shown ads still open for viewer reports.
    public var shownOpen: Int
    public var counters: SlotCounters
    /// Per waterfall entry, in order.
    public var entries: [EntryStatus]
    /// How many valid ads the scheduler keeps ready now, and why.
    public var target: BufferTarget
}

/// One waterfall entry as operators see it: what it was asked, what it gave, how long it rests.
public struct EntryStatus: Sendable, Equatable {
    public var loads: Int
    public var fills: Int
    public var failuresInRow: Int
    public var lastError: AdErrorCode?
    public var backoff: Duration
    /// What its loads have shown: time per load, fill rate, ad lifetime.
    public var estimate: EntryEstimate
}

/// A network (plugin) as the scheduler sees it.
public struct NetworkStatus: Sendable, Equatable {
    public var name: String
    public var loadsInFlight: Int
    /// How long it is still paused after a rate_limited answer.
    public var paused: Duration
    /// Loads per `NetworkPace.window` it is kept under, learned from its rate_limited answers.
    public var learnedLimit: Int?
}

/// What happened in a slot since the daemon started.
public struct SlotCounters: Sendable, Equatable {
    public var loads = 0
    public var fills = 0
    public var noFills = 0
    public var errors = 0
    public var timeouts = 0
    public var shows = 0
    public var expired = 0
    public var replaced = 0
    public var ranDry = 0
    public var ignoredCallbacks = 0
    public var contractViolations = 0
    public var impressions = 0
    public var clicks = 0
    /// Viewer reports dropped as repeats (a second click).
    public var duplicateReports = 0
    /// Shows whose plugin could not present the ad (another was handed out instead).
    public var displayFailures = 0
    public var rewards = 0
    /// Second grants for one ad, refused.
    public var duplicateRewards = 0
    public init() {}
}

struct SlotState: Sendable {
    var config: SlotConfig
    var entries: [EntryState]
    var counters = SlotCounters()
    var dry = false
    var demand = DemandEstimate()
}

struct EntryState: Sendable {
    var failuresInRow = 0
    var backoffUntil = Moment.zero
    var loads = 0
    var fills = 0
    var lastError: AdErrorCode?
    var estimate: EntryEstimate

    init(_ entry: WaterfallEntry, of config: SlotConfig) {
        estimate = EntryEstimate(timeout: entry.timeout, ttl: config.ttl)
    }

    static func fresh(for config: SlotConfig) -> [EntryState] { config.waterfall.map { EntryState($0, of: config) } }

    mutating func succeeded() {
        failuresInRow = 0
        backoffUntil = .zero
        fills += 1
    }
}

struct AdRecord: Sendable {
    enum State: Sendable {
        case loading(deadline: Moment)
        case ready(expiresAt: Moment)
        case shown(endsAt: Moment)
    }

    var id: AdID
    var slot: String
    var format: AdFormat
    var plugin: String
    var entryIndex: Int
    var ttl: Duration
    var timeout: Duration
    var state: State
    var payloadJSON = ""
    var price = 0.0
    var refreshAt = Moment.zero
    var loadedAt: Moment?
    var mediaCached = false
    var tracksItself = false
    /// The network decides the reward itself (its reward event), not the app's complete.
    var rewardByNetwork = false
    var rewarded = false
    var rewardOverride: RewardModel?
    var userID: String?
    var startedAt = Moment.zero
    /// The Load request this load serves, if any.
    var requestID: RequestID?
    /// For one of a Load's ads: the plugin object it came from.
    var objectID: AdID?
    var reported: Set<ViewerEvent> = []

    var expiresAt: Moment? {
        if case .ready(let expiresAt) = state { expiresAt } else { nil }
    }

    /// docs/rules.md, "adValid": loaded with data, not yet shown, not expired.
    func isValid(at now: Moment) -> Bool {
        if case .ready(let expiresAt) = state { expiresAt > now } else { false }
    }
}

private struct LoadRequest: Sendable {
    var slot: String
    var count: Int
    var width: Int
    var height: Int
    var deadline: Moment
    var targetingJSON: String?
    var nextEntry = 0
    var attempts: [LoadFailure.Attempt] = []
}

/// A loaded object whose ads an app holds; destroyed when the last of them ends.
private struct HandedOutObject: Sendable {
    var slot: String
    var plugin: String
    var children: Set<AdID>
}
