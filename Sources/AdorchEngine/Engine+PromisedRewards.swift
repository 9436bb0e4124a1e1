// Rewards promised across a restart (docs/rules.md, "Across a restart"): a rewarded ad the
// app's complete rewards is kept on disk by the shell from its Show until it is rewarded or
// ends, so that a complete after the daemon restarted still grants the reward within the
// ad's life. The plugin object is gone with the old run: only complete and close are taken.

/// What the reward of a shown rewarded ad needs once the run that showed it is gone.
public struct PromisedReward: Sendable, Equatable {
    /// This run's id of the ad.
    public var adID: AdID
    public var slot: String
    public var network: String
    public var userID: String?
    public var reward: RewardModel
    public var holder: UInt32?
    /// The ad's life ends then: a complete after it is refused.
    public var endsAt: Moment
    /// Its impression for the frequency rules, if its slot has any, and whether it counted yet.
    public var impression: CountedImpression?
    public var counted: Bool
    /// In this run, its complete came and granted the reward: only its close is still taken.
    public var completed = false

    public init(adID: AdID, slot: String, network: String, userID: String?, reward: RewardModel, holder: UInt32?,
                endsAt: Moment, impression: CountedImpression?, counted: Bool) {
        self.adID = adID
        self.slot = slot
        self.network = network
        self.userID = userID
        self.reward = reward
        self.holder = holder
        self.endsAt = endsAt
        self.impression = impression
        self.counted = counted
    }
}

extension Engine {
    /// The promise of a rewarded ad just handed to an app whose complete earns the reward;
    /// none for one whose network grants it (its host, gone after a restart, could not).
    mutating func promise(_ id: AdID) -> [Effect] {
        guard let ad = ads[id], ad.format == .rewarded, !ad.rewardByNetwork, !ad.rewarded, case .shown = ad.state else { return [] }
        ads[id]!.promised = true
        return [.keepPromise(promise(of: ads[id]!))]
    }

    /// The promise again, now that its impression counted: after a restart it is not counted twice.
    func promiseCounted(_ id: AdID) -> [Effect] {
        guard let ad = ads[id], ad.promised, !ad.rewarded else { return [] }
        return [.keepPromise(promise(of: ad))]
    }

    /// What becomes of an ad's promise as the ad ends. A grant takes it with it in the
    /// ledger's one write, so one rewarded (even if not written yet) keeps it until then. One
    /// whose plugin stopped or whose slot went (a reload, the daemon stopping) still holds:
    /// the viewer may yet finish. Any other end voids it.
    mutating func settlePromise(of ad: AdRecord, endingAs reason: RetiredAd.Reason) -> [Effect] {
        guard ad.promised, !ad.rewarded else { return [] }
        guard reason == .pluginLost || reason == .removed else { return [.dropPromise(ad.id)] }
        promised[ad.id] = promise(of: ad)
        return []
    }

    private func promise(of ad: AdRecord) -> PromisedReward {
        let endsAt: Moment = if case .shown(let endsAt) = ad.state { endsAt } else { .zero }
        return PromisedReward(adID: ad.id, slot: ad.slot, network: ad.plugin, userID: ad.userID,
                              reward: ad.rewardOverride ?? slots[ad.slot]?.config.reward ?? RewardModel(), holder: ad.holder,
                              endsAt: endsAt, impression: pendingByAd[ad.id] ?? capImpression(of: ad), counted: ad.capCounted)
    }

    /// The promises an earlier run left, read back at start: each gets an id of this run, in
    /// order. One whose life ended is dropped; an impression that had not counted counts now,
    /// at the moment its Show took the ad, since the viewer was shown it.
    public mutating func restorePromises(_ kept: [PromisedReward], now: Moment) -> (ids: [AdID?], effects: [Effect]) {
        var ids: [AdID?] = []
        var effects: [Effect] = []
        for var promise in kept {
            guard promise.endsAt > now else {
                ids.append(nil)
                continue
            }
            promise.adID = issueID()
            if !promise.counted, let impression = promise.impression {
                history.add(impression)
                promise.counted = true
                effects += [.recordImpression(impression), .keepPromise(promise)]
            }
            promised[promise.adID] = promise
            ids.append(promise.adID)
        }
        return (ids, effects)
    }

    /// A report on an ad shown by an earlier run: complete grants its reward, close ends it,
    /// anything else is taken and has nothing left to do (its plugin object went with the old run).
    mutating func reportPromised(_ event: ViewerEvent, for id: AdID, now: Moment) -> (Result<Void, ReportError>, [Effect]) {
        guard let promise = promised[id] else { return (.failure(.adNotValid(reason: "is not known")), []) }
        guard promise.endsAt > now else {
            promised[id] = nil
            return (.failure(.adNotValid(reason: "has ended (\(RetiredAd.Reason.ended.rawValue))")), promise.completed ? [] : [.dropPromise(id)])
        }
        switch event {
        case .complete where promise.completed:
            return (.failure(.adNotValid(reason: "already reported complete")), [])
        case .complete:
            promised[id]!.completed = true
            slots[promise.slot]?.counters.rewards += 1
            let grant = RewardGrant(adID: id, slot: promise.slot, network: promise.network, userID: promise.userID ?? "",
                                    reward: promise.reward, networkTransID: nil, holder: promise.holder)
            return (.success(()), [.grantReward(grant),
                                   .emit(EngineEvent(.adEvent, slot: promise.slot, adID: id, network: promise.network, viewerEvent: event,
                                                     holder: promise.holder))])
        case .close:
            promised[id] = nil
            // A completed one's grant removes it in its own write, even one still waiting for the disk.
            return (.success(()), promise.completed ? [] : [.dropPromise(id)])
        default:
            return (.success(()), [])
        }
    }
}
