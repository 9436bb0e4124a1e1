// What apps report their viewers did with shown ads, and the rewards those earn.

extension Engine {
    /// An app reports what its viewer did with a shown ad. `caller`: the reporting app's uid;
    /// nil for one that may report on any ad (root).
    public mutating func report(_ event: ViewerEvent, for id: AdID, by caller: UInt32? = nil, now: Moment) -> (Result<Void, ReportError>, [Effect]) {
        // An app learns nothing of an ad it was not handed, not even that it exists or has
        // ended: ids are sequential, so any other answer would tell it others' ads one by one.
        if let caller, handedTo(id) != caller { return (.failure(.adNotValid(reason: Self.unknownAd)), []) }
        guard let ad = ads[id] else {
            if promised[id] != nil { return reportPromised(event, for: id, now: now) }
            let reason = retired[id].map { "has ended (\($0.reason.rawValue))" } ?? Self.unknownAd
            return (.failure(.adNotValid(reason: reason)), [])
        }
        guard ad.closedAt == nil else { return (.failure(.adNotValid(reason: "has ended (\(RetiredAd.Reason.closed.rawValue))")), []) }
        guard case .shown = ad.state, showing[id] == nil else {
            let why = showing[id] == nil ? "has not been shown" : "is still being presented: its Show has not answered"
            return (.failure(.adNotValid(reason: why)), [])
        }
        if event.once, ad.reported.contains(event) {
            slots[ad.slot]?.counters.duplicateReports += 1
            return (.failure(.adNotValid(reason: "already reported \(event.rawValue)")), [])
        }
        if event == .click, ad.reported.contains(.click) {
            // One click per ad is billed; later ones are accepted and dropped.
            slots[ad.slot]?.counters.duplicateReports += 1
            return (.success(()), [])
        }
        ads[id]!.reported.insert(event)
        var effects = countOnce(event, of: id, now: now)
        // A click or a complete is only ever reported of an ad that was seen.
        if event == .click || event == .complete { effects += countAgainstCaps(id, now: now) }
        effects.append(.emit(EngineEvent(.adEvent, slot: ad.slot, adID: id, network: ad.plugin, viewerEvent: event, holder: ad.holder)))
        // A plugin that tracks impressions and clicks itself is not told again: never both.
        if !(ad.tracksItself && (event == .impression || event == .click)) {
            effects.insert(.notify(ad.objectID ?? id, plugin: ad.plugin, event: event), at: 0)
        }
        // A network that leaves the reward to the host: the viewer finishing the video earns it.
        if event == .complete, ad.format == .rewarded, !ad.rewardByNetwork { effects += grant(id, networkTransID: nil, now: now) }
        if event == .close { effects += closed(id, now: now) }
        return (.success(()), effects)
    }

    /// What Report says of an ad id the engine does not know, or the caller was not handed.
    public static let unknownAd = "is not known"

    /// The uid `id` was handed to, while it lasts or is remembered ended.
    func handedTo(_ id: AdID) -> UInt32? { holder(of: id) ?? retired[id]?.holder }

    /// The app closed the ad. A rewarded ad whose network grants the reward and has not yet
    /// stays open to that network for `settings.networkRewardGrace` (to the app it has ended); any
    /// other ends now.
    mutating func closed(_ id: AdID, now: Moment) -> [Effect] {
        guard let ad = ads[id], ad.format == .rewarded, ad.rewardByNetwork, !ad.rewarded, case .shown(let endsAt) = ad.state else {
            return end(id, as: .closed, now: now)
        }
        ads[id]!.closedAt = now
        ads[id]!.state = .shown(endsAt: min(endsAt, now + settings.networkRewardGrace))
        return []
    }


    /// plugin.h, ADORCH_EVENT_IMPRESSION: an impression or click counts once per ad, whichever
    /// of the app and a self-tracking plugin reports it first; so does an impression against
    /// the frequency rules, unless the ad counted when its Show returned it.
    mutating func countOnce(_ event: ViewerEvent, of id: AdID, now: Moment) -> [Effect] {
        guard event == .impression || event == .click, let ad = ads[id], ads[id]!.counted.insert(event).inserted else { return [] }
        guard event == .impression else {
            slots[ad.slot]?.counters.clicks += 1
            return []
        }
        slots[ad.slot]?.counters.impressions += 1
        let billed: [Effect] = ad.notices == .won ? [.notice(id, plugin: ad.plugin, .billing)] : []
        return billed + countAgainstCaps(id, now: now)
    }

    // MARK: Rewards

    /// The reward of a shown rewarded ad, once: the first of the network's reward event and
    /// the app's complete wins; any later one is refused and counted.
    mutating func grant(_ id: AdID, networkTransID: String?, now: Moment) -> [Effect] {
        guard let ad = ads[id], ad.format == .rewarded, case .shown = ad.state else { return [] }
        guard !ad.rewarded else {
            slots[ad.slot]?.counters.duplicateRewards += 1
            return []
        }
        ads[id]!.rewarded = true
        slots[ad.slot]?.counters.rewards += 1
        let counted = countAgainstCaps(id, now: now)
        let model = ad.rewardOverride ?? slots[ad.slot]?.config.reward ?? RewardModel()
        let grant = RewardGrant(adID: id, slot: ad.slot, network: ad.plugin, userID: ad.userID ?? "", reward: model,
                                networkTransID: networkTransID, holder: ad.holder)
        // An ad closed and kept only for its network's reward has nothing left to wait for.
        return counted + [.grantReward(grant)] + (ad.closedAt != nil ? end(id, as: .closed, now: now) : [])
    }
}
