// Show: an app takes the best valid ad of a preloaded slot. The engine decides the whole
// call (docs/rules.md, "Show"): which ad, what follows when its plugin cannot present it,
// and when to give up. The shell only carries out `.show` and says how the plugin answered.

extension Engine {
    /// Ads one Show call may hand to plugins before it gives up: each one a plugin could not
    /// present ends, and the next valid ad of the slot is tried in the same call.
    public static let showAttempts = 10
    /// How long a plugin has to answer ad_show before its ad counts as not presented (a
    /// plugin stuck in another call must not hold the app's Show).
    public static let showAnswerTimeout: Duration = .milliseconds(500)

    /// An app asks for an ad to show now: the ad is taken (no longer valid for anyone else)
    /// and `.show` asks its plugin to present it. A Show call goes through `requestShow`,
    /// which also follows the plugin's answer. The ad is `holder`'s until it ends, and
    /// counts against its open-ads budget. `rewardsWaiting`: the holder's rewards waiting in
    /// the ledger for its AckReward, which bound its rewarded Shows. `privacy`: the viewer's
    /// signals, nil when they set none; only an ad of a class they allow is taken
    /// (docs/privacy.md, "Inventory").
    public mutating func show(slot slotID: String, userID: String?, privacy: ViewerPrivacy?, reward: RewardModel? = nil, holder: UInt32? = nil,
                              rewardsWaiting: Int = 0, now: Moment) -> (Result<ShownAd, ShowError>, [Effect]) {
        var (result, effects) = takeForShow(slot: slotID, userID: userID, privacy: privacy, reward: reward, holder: holder,
                                            rewardsWaiting: rewardsWaiting, now: now)
        if case .success(let ad) = result {
            if slots[slotID]?.config.capCounting == .show { effects += countAgainstCaps(ad.id, now: now) }
            effects += promise(ad.id) + won(ad.id)
        }
        return (result, effects)
    }

    /// A Show's ad, taken; counted against the slot's rules once its plugin presented it.
    private mutating func takeForShow(slot slotID: String, userID: String?, privacy: ViewerPrivacy?, reward: RewardModel?, holder: UInt32?,
                                      rewardsWaiting: Int, now: Moment) -> (Result<ShownAd, ShowError>, [Effect]) {
        guard let slot = slots[slotID] else { return (.failure(.slotNotFound(slotID)), []) }
        guard slot.config.format.isPreloaded else {
            return (.failure(.invalidParameter(name: "slot", reason: "\(slotID) is \(slot.config.format.slotInWords): \(slot.config.format.howToUse)")), [])
        }
        if slot.config.format == .rewarded, (userID ?? "").isEmpty {
            // docs/rules.md, "Rewards": the reward goes to a user, so a rewarded Show names one.
            return (.failure(.invalidParameter(name: "user_id", reason: "a rewarded slot needs a non-empty user_id")), [])
        }
        // Refused before it counts as demand: the refusal changes nothing else.
        if let refusal = unacknowledgedRewardsRefusal(holder, slot: slot.config, waiting: rewardsWaiting) { return (.failure(refusal), []) }
        if let refusal = openAdsRefusal(holder, asking: 1) { return (.failure(refusal), []) }
        let user = CapUser(uid: holder, id: userID)
        noteAsker(slotID, user: user, now: now)
        noteFairShareAsk(slotID, holder: holder, now: now)
        if let hold = capHold(slot: slotID, user: user, now: now) {
            return (.failure(.capped(slot: slotID, rule: hold.ruleName, retryAfter: hold.retryAfter)), [])
        }
        // Demand is every Show asked, found or not; its class's too.
        slots[slotID]!.demand.noteShow(at: now)
        noteViewer(privacy, user: user, of: slotID, now: now)
        let effects = advance(to: now)
        let (result, taken) = take(from: slotID, userID: userID, privacy: privacy, reward: reward, holder: holder, now: now)
        return (result, effects + taken)
    }

    /// A Show call: like `show`, and its answer comes as one `.completeShow(request, …)`:
    /// the ad its plugin presented, or why there is none. `.show` is the last effect, so
    /// whatever its answer sets off comes after the call's own events.
    public mutating func requestShow(slot slotID: String, userID: String?, privacy: ViewerPrivacy?, reward: RewardModel? = nil, holder: UInt32? = nil,
                                     rewardsWaiting: Int = 0, request: RequestID, now: Moment) -> [Effect] {
        var (result, effects) = takeForShow(slot: slotID, userID: userID, privacy: privacy, reward: reward, holder: holder,
                                            rewardsWaiting: rewardsWaiting, now: now)
        guard case .success(let ad) = result else { return effects + [.completeShow(request, result)] }
        return awaitAnswer(PendingShow(request: request, userID: userID, privacy: privacy, reward: reward, holder: holder, tries: 1, ad: ad,
                                       deadline: now + Self.showAnswerTimeout),
                           effects: &effects, now: now)
    }

    /// The plugin answered ad_show for `id`. Presented: the call gets the ad. Not: the ad
    /// ends as failed to display and the call takes the next valid one, up to
    /// `showAttempts` ads. An answer no call waits for (a Load's object, a late one) is dropped.
    public mutating func showAnswered(_ id: AdID, presented: Bool, now: Moment) -> [Effect] {
        guard let pending = showing[id] else { return [] }
        // Past the deadline (a plugin that blocked the thread it was called on): as if it had not answered.
        guard now < pending.deadline else { return showAnswerMissed(id, now: now) }
        showing[id] = nil
        ads.timers.remove(.showAnswer(id))
        if presented {
            let counted = slots[pending.ad.slot]?.config.capCounting == .show ? countAgainstCaps(id, now: now) : []
            return counted + promise(id) + won(id) + [.completeShow(pending.request, .success(pending.ad))]
        }
        return displayFailed(id, reason: "the plugin could not present it", now: now) + retry(pending, now: now)
    }

    /// The ad is handed to its viewer: its win notices go (docs/bidding.md, "Notices").
    mutating func won(_ id: AdID) -> [Effect] {
        guard let ad = ads[id], ad.notices == .held else { return [] }
        ads[id]!.notices = .won
        return [.notice(id, plugin: ad.plugin, .win)]
    }

    /// The shell could not carry out the ad's `.win` (the outbox could not take it, or its
    /// Show is refused already): no viewer got it, so its end is a loss.
    public mutating func winUnwritten(_ id: AdID) {
        if ads[id]?.notices == .won { ads[id]!.notices = .held }
    }

    /// The plugin could not present an ad a Show just took (failedToDisplayAd): the ad ends.
    public mutating func displayFailed(_ id: AdID, reason: String, now: Moment) -> [Effect] {
        guard let ad = ads[id], case .shown = ad.state else { return [] }
        slots[ad.slot]?.counters.displayFailures += 1
        var effects = end(id, as: .failedToDisplay, now: now)
        effects.append(.emit(EngineEvent(.adEvent, slot: ad.slot, adID: id, network: ad.plugin, message: "failed_to_display", holder: ad.holder)))
        effects.append(.emit(EngineEvent(.adFailed, slot: ad.slot, adID: id, network: ad.plugin, errorCode: .notReady, message: reason,
                                         holder: ad.holder)))
        return effects + refill(ad.slot, now: now)
    }

    /// No answer to ad_show in time: as if the plugin said it could not, and an ad_show it
    /// has not started yet is withdrawn, so that one Show never presents two ads.
    mutating func showAnswerMissed(_ id: AdID, now: Moment) -> [Effect] {
        guard let pending = showing.removeValue(forKey: id) else { return [] }
        ads.timers.remove(.showAnswer(id))
        let reason = "no answer to ad_show within \(Self.showAnswerTimeout)"
        return [.withdrawShow(id, plugin: pending.ad.network)] + displayFailed(id, reason: reason, now: now) + retry(pending, now: now)
    }

    /// The ad a Show waits on ends before its plugin answered (a reload removed it, the
    /// daemon stops): the call is answered with `error` and the ad_show withdrawn.
    mutating func interruptShow(of id: AdID, plugin: String, slot: String, _ error: ShowError) -> [Effect] {
        guard let pending = showing.removeValue(forKey: id) else { return [] }
        ads.timers.remove(.showAnswer(id))
        return [.withdrawShow(id, plugin: plugin), .completeShow(pending.request, .failure(error))]
    }

    /// The next valid ad for a call whose last one failed to display, or its final answer.
    private mutating func retry(_ pending: PendingShow, now: Moment) -> [Effect] {
        let slotID = pending.ad.slot
        guard pending.tries < Self.showAttempts else {
            return [.completeShow(pending.request, .failure(.displayFailed(slot: slotID, tries: pending.tries)))]
        }
        // The ad that failed has ended, so the next one fits the holder's budget in its place.
        var (result, effects) = take(from: slotID, userID: pending.userID, privacy: pending.privacy, reward: pending.reward,
                                     holder: pending.holder, now: now)
        // Ads were handed out and none presented: that is why the call has none, not a miss.
        guard case .success(let ad) = result else {
            return effects + [.completeShow(pending.request, .failure(.displayFailed(slot: slotID, tries: pending.tries)))]
        }
        var next = pending
        (next.tries, next.ad, next.deadline) = (pending.tries + 1, ad, now + Self.showAnswerTimeout)
        return awaitAnswer(next, effects: &effects, now: now)
    }

    /// Waits for the plugin's answer on the call's ad, with `.show` moved to the end of `effects`.
    private mutating func awaitAnswer(_ pending: PendingShow, effects: inout [Effect], now: Moment) -> [Effect] {
        let id = pending.ad.id
        showing[id] = pending
        ads.timers.set(.showAnswer(id), at: pending.deadline)
        if let index = effects.firstIndex(where: { if case .show(id, _, _) = $0 { true } else { false } }) {
            effects.append(effects.remove(at: index))
        }
        return effects
    }

    /// Takes the best valid ad of the slot the viewer may be shown: out of validity at once
    /// (docs/rules.md, "adValid"), before anything else can pick it again.
    private mutating func take(from slotID: String, userID: String?, privacy: ViewerPrivacy?, reward: RewardModel?, holder: UInt32?,
                               now: Moment) -> (Result<ShownAd, ShowError>, [Effect]) {
        // Ads of networks whose own rules hold this user are skipped (docs/caps.md), and ads
        // of a class the viewer does not allow from their network, as the config says now.
        let held = slots[slotID]!.config.hasCaps ? entryHolds(slots[slotID]!, user: CapUser(uid: holder, id: userID), now: now) : [:]
        let allowed = allowedClasses(privacy, in: slots[slotID]!)
        let wanted = wantedClass(allowed)
        // The viewer's own class first (the best they allow), then the next ones in order,
        // leaving an ad fewer viewers may take to them; then the highest price, then the
        // earliest expiry (the one that would be wasted first).
        guard let pick = ads.first(in: slotID, .ready, where: { $0.isValid(at: now) && held[$0.entryIndex] == nil && mayShow($0, to: allowed) }, by: { a, b in
            (a.privacy.privacyClass.rank, -a.price, a.expiresAt!, a.id) < (b.privacy.privacyClass.rank, -b.price, b.expiresAt!, b.id)
        }) else {
            // The Show raised the slot's demand: its target may have risen with it. A viewer
            // no entry may serve is told so, not that the slot is being refilled for them.
            let error = missingPlugins(of: slotID).map { ShowError.unservable(slot: slotID, missingPlugins: $0) }
                ?? (wanted == nil ? .viewerUnservable(slot: slotID) : .noAdReady(slot: slotID))
            return (.failure(error), markDry(slotID) + refill(slotID, now: now) + loadForHeldUser(slotID, held: held, wanted: wanted, now: now))
        }
        // Refused without a refill: the held ads are already part of the slot's target.
        if fairShareRefuses(slotID, holder: holder, ready: ads.count(in: slotID, .ready, where: { $0.isValid(at: now) }), now: now) {
            return (.failure(.fairShare(slot: slotID)), [])
        }
        // One write: each goes through the table's indexes.
        var taken = pick
        taken.state = .shown(endsAt: now + settings.shownLifetime)
        taken.userID = userID
        taken.rewardOverride = reward
        taken.holder = holder
        taken.takenAt = now
        ads[pick.id] = taken
        slots[slotID]!.counters.shows += 1
        noteFairShareTake(slotID, holder: holder, now: now)
        let shown = ShownAd(
            id: pick.id, slot: slotID, network: pick.plugin, format: pick.format,
            payloadJSON: pick.payloadJSON, expiresAt: pick.expiresAt!, price: pick.price
        )
        var effects: [Effect] = [.show(pick.id, plugin: pick.plugin, userID: userID)]
        effects.append(.emit(EngineEvent(.adShown, slot: slotID, adID: pick.id, network: pick.plugin, userID: userID, holder: holder)))
        // Counted by the rules from now, before the refill asks whether anyone may see another.
        holdUntilCounted(pick.id)
        effects += markDryIfEmpty(slotID, now: now)
        effects += refill(slotID, now: now)
        return (.success(shown), effects)
    }
}

/// A Show call waiting for its plugin's answer on `ad`.
struct PendingShow: Sendable {
    var request: RequestID
    var userID: String?
    var privacy: ViewerPrivacy?
    var reward: RewardModel?
    var holder: UInt32?
    /// Ads handed to plugins so far in this call, this one included.
    var tries: Int
    var ad: ShownAd
    /// The plugin's answer on `ad` counts until then.
    var deadline: Moment
}
