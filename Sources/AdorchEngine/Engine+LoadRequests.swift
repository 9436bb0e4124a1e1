// Load: an app asks for ads of an on-demand slot; the waterfall is tried in order.

extension Engine {
    /// An app asks for ads of an on-demand slot (banner, splash, native). The waterfall is
    /// tried entry by entry, each with its own timeout, within the request's overall
    /// deadline; the outcome comes later as a `.completeLoad` effect. Its ads are `holder`'s
    /// until they end, and count against its open-ads budget from the call on. `privacy`: the
    /// viewer's signals, nil when they set none; each entry is asked for the best class they
    /// allow from it, or passed over (docs/privacy.md, "Inventory").
    public mutating func load(slot slotID: String, _ asked: LoadParameters, holder: UInt32? = nil, privacy: ViewerPrivacy?, request: RequestID,
                              now: Moment) -> (Result<Void, ShowError>, [Effect]) {
        guard let slot = slots[slotID] else { return (.failure(.slotNotFound(slotID)), []) }
        let config = slot.config
        guard config.format.isOnDemand else {
            return (.failure(.invalidParameter(name: "slot", reason: "\(slotID) is \(config.format.slotInWords): \(config.format.howToUse)")), [])
        }
        let count = asked.count ?? config.count
        if config.format == .native {
            guard LoadBounds.count.contains(count) else {
                let bounds = LoadBounds.count
                return (.failure(.invalidParameter(name: "count", reason: "a native load takes \(bounds.lowerBound) to \(bounds.upperBound) ads (3 recommended), got \(count)")), [])
            }
        } else if count != 1 {
            return (.failure(.invalidParameter(name: "count", reason: "only native slots load several ads at once")), [])
        }
        let (width, height) = (asked.width ?? config.width, asked.height ?? config.height)
        guard LoadBounds.size.contains(width), LoadBounds.size.contains(height) else {
            let bounds = LoadBounds.size
            return (.failure(.invalidParameter(name: bounds.contains(width) ? "height" : "width",
                                               reason: "sizes are \(bounds.lowerBound) to \(bounds.upperBound) points")), [])
        }
        if config.format == .banner, width == 0 || height == 0 {
            return (.failure(.invalidParameter(name: "width", reason: "a banner needs a width and a height (none in the request or the slot)")), [])
        }
        let timeout = asked.timeout ?? config.loadTimeout
        let bounds = LoadBounds.timeoutMilliseconds
        guard timeout >= .milliseconds(bounds.lowerBound), timeout <= .milliseconds(bounds.upperBound) else {
            return (.failure(.invalidParameter(name: "timeout_ms", reason: LoadBounds.timeoutInWords)), [])
        }
        if let refusal = openAdsRefusal(holder, asking: count) { return (.failure(refusal), []) }
        requests[request] = LoadRequest(slot: slotID, count: count, width: width, height: height, deadline: now + timeout,
                                        targetingJSON: asked.targetingJSON, holder: holder, privacy: privacy)
        return (.success(()), attempt(request, now: now))
    }


    // MARK: Load requests

    /// Starts the request's next usable entry, or ends the request if none is left in time.
    mutating func attempt(_ rid: RequestID, now: Moment) -> [Effect] {
        guard var request = requests[rid], let slot = slots[request.slot] else { return [] }
        if now >= request.deadline {
            return finish(rid, .failure(LoadFailure(code: .timeout, message: "no ad within the load's deadline", attempts: request.attempts)))
        }
        while request.nextEntry < slot.config.waterfall.count {
            let index = request.nextEntry
            request.nextEntry += 1
            let entry = slot.config.waterfall[index]
            // Entries known to be failing or paused are passed over, as for preloading; a Load
            // never waits, so it leaves a network's free loads to the slots waiting for them
            // (docs/rules.md, "Loads in flight per network"). So is one that may serve the
            // viewer no class its plugin can be asked for.
            guard canLoad(from: entry.plugin), slot.entries[index].backoffUntil <= now,
                  paces[entry.plugin]?.admits(at: now) ?? true, mayStartLoad(to: entry.plugin, for: request.slot),
                  let privacy = settings.privacy.loadPrivacy(for: request.privacy, from: entry.privacy)
            else { continue }
            requests[rid] = request
            guard case .load(var order) = startLoad(request.slot, entryIndex: index, privacy: privacy, now: now) else { return [] }
            // This attempt may not outlive the request, and the plugin is told the timeout it has.
            order.deadline = min(order.deadline, request.deadline)
            order.entry.timeout = order.deadline - now
            ads[order.adID]!.state = .loading(deadline: order.deadline)
            ads[order.adID]!.requestID = rid
            (order.count, order.width, order.height) = (request.count, request.width, request.height)
            (order.variant, order.imageOptionsJSON) = (slot.config.variant, slot.config.imageOptionsJSON)
            if let targeting = request.targetingJSON { order.targetingJSON = targeting }
            return [.load(order)]
        }
        requests[rid] = request
        guard request.attempts.isEmpty else {
            return finish(rid, .failure(LoadFailure(code: request.attempts.last!.code, message: "every waterfall entry failed", attempts: request.attempts)))
        }
        // Passed over for the viewer alone, the request says so as a Show does: waiting will not help.
        let servesViewer = slot.config.waterfall.contains { settings.privacy.loadPrivacy(for: request.privacy, from: $0.privacy) != nil }
        let why = servesViewer ? "no waterfall entry could be asked (unavailable, paused, backing off, or not for this viewer)" : ShowError.noEntryServesViewer
        return finish(rid, .failure(LoadFailure(code: .noFill, message: why, attempts: [])))
    }

    /// A request's attempt ended without ads: note it, then the next entry.
    mutating func attemptFailed(_ ad: AdRecord, code: AdErrorCode, now: Moment) -> [Effect] {
        guard let rid = ad.requestID, requests[rid] != nil else { return [] }
        let entry = slots[ad.slot]?.config.waterfall[ad.entryIndex]
        requests[rid]!.attempts.append(.init(plugin: ad.plugin, adUnitID: entry?.adUnitID ?? "", code: code))
        return attempt(rid, now: now)
    }

    /// A request's attempt loaded: its ads go to the app at once, each with an id of its own.
    mutating func loadRequestFilled(_ ad: AdRecord, items: [PayloadItem], expiresIn: Duration?, price: Double?,
                                           tracksItself: Bool, now: Moment) -> [Effect] {
        guard let rid = ad.requestID, let request = requests[rid] else { return [] }
        if ad.format == .native, items.isEmpty || items.contains(where: { !$0.hasHeadline }) {
            // A native ad without a headline is the plugin's fault, not something for an app.
            return pluginReported(.loadedInvalid(reason: "a native ad without a headline"), for: ad.id, from: ad.plugin, now: now)
        }
        slots[ad.slot]?.counters.fills += 1
        let lifetime = Self.lifetime(reported: expiresIn, ttl: ad.ttl)
        entrySucceeded(ad, lifetime: lifetime, now: now)
        ads[ad.id] = nil
        let expiresAt = now + lifetime
        var shown: [ShownAd] = []
        var effects: [Effect] = [.emit(EngineEvent(.adLoaded, slot: ad.slot, adID: ad.id, network: ad.plugin, holder: request.holder))]
        var children: Set<AdID> = []
        for item in items.prefix(request.count) {
            let child = nextID
            nextID += 1
            var record = ad
            record.id = child
            record.objectID = ad.id
            record.requestID = nil
            record.holder = request.holder
            record.state = .shown(endsAt: min(expiresAt, now + settings.shownLifetime))
            record.payloadJSON = item.json
            record.price = price ?? 0
            record.tracksItself = tracksItself
            record.notices = nil
            ads[child] = record
            children.insert(child)
            // Handed to the app as it loads: its notices are held and won at once.
            if let notices = item.notices, !notices.isEmpty {
                ads[child]!.notices = .held
                effects.append(.notice(child, plugin: ad.plugin, .hold(notices)))
                effects += won(child)
            }
            shown.append(ShownAd(id: child, slot: ad.slot, network: ad.plugin, format: ad.format, payloadJSON: item.json,
                                 expiresAt: expiresAt, price: price ?? 0))
            effects.append(.emit(EngineEvent(.adShown, slot: ad.slot, adID: child, network: ad.plugin, holder: request.holder)))
            effects += promise(child)
        }
        slots[ad.slot]?.counters.shows += shown.count
        handedOut[ad.id] = HandedOutObject(slot: ad.slot, plugin: ad.plugin, holder: request.holder, children: children)
        effects.insert(.show(ad.id, plugin: ad.plugin, userID: nil), at: 0)
        // The load freed its place in the network, kept for the slots waiting for one: they
        // take it now, as after any other load's end, not at the next input.
        return effects + finish(rid, .success(shown)) + refillWanting(now: now)
    }

    mutating func finish(_ rid: RequestID, _ result: Result<[ShownAd], LoadFailure>) -> [Effect] {
        guard requests.removeValue(forKey: rid) != nil else { return [] }
        return [.completeLoad(rid, result)]
    }
}
