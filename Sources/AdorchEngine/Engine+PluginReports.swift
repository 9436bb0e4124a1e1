// What plugins report on their ads: loads completing, events, rewards; anything the
// contract does not allow is ignored and counted.

extension Engine {
    /// The shortest life a plugin may give an ad it loaded: an `expires_in_s` below it (a
    /// hostile 1e-300) is raised to it, so that no plugin can make a slot load, expire and
    /// load again without pause. The slot's `ttl_s` still bounds it from above.
    public static let shortestLifetime = Duration.seconds(1)

    /// How long a loaded ad stays ready: the network's word within [`shortestLifetime`, `ttl`].
    static func lifetime(reported: Duration?, ttl: Duration) -> Duration {
        min(max(reported ?? ttl, shortestLifetime), ttl)
    }

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
                var event = EngineEvent(kind, slot: object.slot, adID: id, network: plugin, holder: object.holder)
                if case .other(let name, let detail) = report { (event.message, event.detailJSON) = (name, detail) }
                return [.emit(event)]
            default:
                return ignored(report, for: id, from: plugin)
            }
        }
        guard let ad = ads[id], ad.plugin == plugin else { return ignored(report, for: id, from: plugin) }
        if case .loading = ad.state, let reason = payloadRefusal(of: report, for: ad) ?? priceRefusal(of: report, for: ad) {
            return pluginReported(.failed(.pluginFault, networkCode: 0, message: reason), for: id, from: plugin, now: now)
        }
        switch (report, ad.state) {
        case (.loaded(_, let expiresIn, let price, let tracksItself, let items, _, _), .loading) where ad.requestID != nil:
            return loadRequestFilled(ad, items: items, expiresIn: expiresIn, price: price, tracksItself: tracksItself, now: now)

        case (.loaded(let payload, let expiresIn, let price, let tracksItself, _, let rewardByNetwork, let notices), .loading):
            let slot = slots[ad.slot]!
            // Held first: however the ad ends from here, its notices say so (`end`).
            var held: [Effect] = []
            if let notices, !notices.isEmpty {
                ads[id]!.notices = .held
                held = [.notice(id, plugin: plugin, .hold(notices))]
            }
            if slot.config.floor > 0, let price, price < slot.config.floor {
                return held + refusedBelowFloor(ads[id]!, price: price, floor: slot.config.floor, now: now)
            }
            if let price, !isBidder(slot, ad.entryIndex) { slots[ad.slot]!.entries[ad.entryIndex].paid.note(price) }
            let lifetime = Self.lifetime(reported: expiresIn, ttl: ad.ttl)
            let expiresAt = now + lifetime
            let margin = min(settings.refreshAhead, lifetime / 5)
            ads[id]!.state = .ready(expiresAt: expiresAt)
            ads[id]!.loadedAt = now
            ads[id]!.payloadJSON = payload
            // A network that reports no price is worth its entry's eCPM (docs/bidding.md, "Prices").
            ads[id]!.price = price ?? ecpm(of: slot, ad.entryIndex) ?? 0
            ads[id]!.tracksItself = tracksItself
            ads[id]!.rewardByNetwork = rewardByNetwork
            ads[id]!.refreshAt = expiresAt - margin
            slots[ad.slot]?.counters.fills += 1
            entrySucceeded(ad, lifetime: lifetime, now: now)
            var effects: [Effect] = held + [.emit(EngineEvent(.adLoaded, slot: ad.slot, adID: id, network: ad.plugin))]
            effects += retireSurplus(in: ad.slot, of: ad.privacy.privacyClass, now: now)
            return effects + refillWanting(now: now)

        case (.loadedInvalid(let reason), .loading):
            slots[ad.slot]?.counters.errors += 1
            slots[ad.slot]?.counters.contractViolations += 1
            noteFailure(of: ad, code: .pluginFault, now: now)
            noteLoadEnded(ad, outcome: AdErrorCode.pluginFault.rawValue, now: now)
            var effects = end(id, as: .failed, now: now)
            effects.append(.emit(EngineEvent(.contractViolation, slot: ad.slot, adID: id, network: ad.plugin,
                                             errorCode: .pluginFault, message: reason, holder: eventHolder(of: ad))))
            effects += attemptFailed(ad, code: .pluginFault, now: now)
            return effects + refillWanting(now: now)

        case (.failed(let code, let networkCode, let message), .loading):
            switch code {
            case .noFill: slots[ad.slot]?.counters.noFills += 1
            case .timeout: slots[ad.slot]?.counters.timeouts += 1
            default: slots[ad.slot]?.counters.errors += 1
            }
            noteFailure(of: ad, code: code, now: now)
            noteLoadEnded(ad, outcome: code.rawValue, now: now)
            var effects = end(id, as: .failed, now: now)
            effects.append(.emit(EngineEvent(.adFailed, slot: ad.slot, adID: id, network: ad.plugin, errorCode: code,
                                             networkCode: networkCode, message: ad.privacy.signals.redacting(message), holder: eventHolder(of: ad))))
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
            guard !ad.mediaCached else { return [] }
            ads[id]!.mediaCached = true
            return [.emit(EngineEvent(.mediaCached, slot: ad.slot, adID: id, network: ad.plugin, holder: eventHolder(of: ad)))]

        case (.reward(let transID), _):
            return grant(id, networkTransID: transID, now: now)

        case (.other(let name, let detail), let state):
            // A self-tracking plugin's impression or click counts, once, when the ad is on screen.
            var effects: [Effect] = []
            if case .shown = state, let viewerEvent = ViewerEvent.allCases.first(where: { $0.vocabularyName == name }) {
                effects = countOnce(viewerEvent, of: id, now: now)
            }
            var event = EngineEvent(.adEvent, slot: ad.slot, adID: id, network: ad.plugin, message: name, holder: eventHolder(of: ad))
            event.detailJSON = detail.map(ad.privacy.signals.redacting)
            return effects + [.emit(event)]

        case (.destroyed, _):
            return []  // handled above: a live ad is never destroyed
        }
    }

    mutating func ignored(_ report: PluginReport, for id: AdID, from plugin: String) -> [Effect] {
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
                                      message: "second completion (\(what)) ignored", holder: eventHolder(of: ad)))]
        }
        if let memory = retired[id], memory.plugin == plugin {
            // The host ended the ad but the plugin's ad_destroy has not returned yet: this
            // report crossed it on the way, which the contract allows. After a deadline,
            // though, an answer is late whenever it comes (docs/rules.md, "Completion exactly once").
            if !memory.destroyConfirmed, memory.reason != .timedOut { return [] }
            slots[memory.slot]?.counters.ignoredCallbacks += 1
            var lateReward = false
            if case .reward = report, memory.reason == .closed { lateReward = true }
            let why = lateReward
                ? "reward after the app closed the ad and the \(settings.networkRewardGrace) its network had for it passed: refused"
                : "\(what) after the ad ended (\(memory.reason.rawValue)) ignored"
            return [.emit(EngineEvent(.callbackIgnored, slot: memory.slot, adID: id, network: plugin, message: why, holder: memory.holder))]
        }
        unattributedCallbacks += 1
        return [.emit(EngineEvent(.callbackIgnored, adID: id, network: plugin,
                                  message: "\(what) for ad \(id), which is not one of this plugin's, ignored"))]
    }
}
