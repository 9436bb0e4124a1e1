import AdorchEngine
import AdorchRewards
import Dispatch
import Foundation

// [engine queue] Rewards written before anyone hears of them (docs/rules.md, "Rewards"): a
// row the ledger cannot take now (a full disk) is kept, written again every second until it
// is, and announced only then. Impressions the caps history could not take are written again
// on the same beat, first: a reward waits for the impressions counted before it.

extension EngineRuntime {
    /// How long a reward that could not be written waits before the next try.
    static let rewardRetryInterval = DispatchTimeInterval.seconds(1)

    /// Writes a granted reward's row, then publishes its event; one that cannot be written
    /// waits behind the others already waiting, so rewards reach the ledger in grant order.
    func record(_ reward: UnrecordedReward) {
        let failure = !unrecordedRewards.isEmpty ? "rewards granted before it are still waiting"
            : capHistory?.hasWaiting == true ? "impressions counted before it are still waiting for the caps history"
            : write(reward)
        guard let failure else { return }
        unrecordedRewards.append(reward)
        logger.error("rewards: a reward granted in \(reward.row.slot) could not be written to the ledger yet (\(failure)); it is kept and written again every second until it can be (\(unrecordedRewards.count) waiting)",
                     metadata: ["slot": "\(reward.row.slot)"])
        armDurableRetry()
    }

    /// Whether a reward of this ad is still waiting for the ledger.
    func isUnrecorded(_ adID: AdID) -> Bool { unrecordedRewards.contains { $0.adID == adID } }

    /// Writes the waiting impressions, then, once none waits, the waiting rewards in order, up
    /// to the first that still fails.
    func retryUnrecordedRewards() {
        guard capHistory?.retryWaiting() != false else { return }
        let before = unrecordedRewards.count
        while let first = unrecordedRewards.first, write(first) == nil { unrecordedRewards.removeFirst() }
        if unrecordedRewards.count < before {
            logger.notice("rewards: \(before - unrecordedRewards.count) waiting rewards written to the ledger and announced; \(unrecordedRewards.count) still waiting")
        }
    }

    /// nil: written (its event published) or refused as a duplicate; else why it was not written.
    private func write(_ reward: UnrecordedReward) -> String? {
        guard let rewards else { return nil }
        switch rewards.write(reward.row, adID: reward.adID) {
        case .granted(let event):
            feed.publish(event)
            return nil
        case .duplicate:
            return nil
        case .failed(let why):
            return why
        }
    }

    /// Tries the waiting impressions and rewards again in a second, and each second after
    /// while any still waits.
    func armDurableRetry() {
        guard !rewardRetryArmed else { return }
        rewardRetryArmed = true
        queue.asyncAfter(deadline: .now() + Self.rewardRetryInterval) { [weak self] in
            guard let self else { return }
            rewardRetryArmed = false
            retryUnrecordedRewards()
            retryUnwrittenNotices()
            if !unrecordedRewards.isEmpty || capHistory?.hasWaiting == true || !unwrittenNotices.isEmpty { armDurableRetry() }
        }
    }
}

// [engine queue] Rewards promised across a restart (docs/rules.md, "Across a restart"): the
// engine says which shown rewarded ads to keep on disk and when one is void; at start the
// ones still in their life come back under the names their apps were given.

extension EngineRuntime {
    /// Keeps the promise on disk, before the Show that hands its ad out is answered; why it
    /// could not be, if it could not.
    func keep(_ promise: PromisedReward) -> String? {
        guard let rewards else { return nil }
        do {
            try rewards.ledger.keep(rewards.record(of: promise, ids: ids, now: now(), nowDate: Date()))
            return nil
        } catch {
            logger.error("rewards: the promise of ad \(ids.external(promise.adID))'s reward could not be written to the ledger (\(error))",
                         metadata: ["slot": "\(promise.slot)"])
            return "\(error)"
        }
    }

    func dropPromise(_ id: AdID) {
        do {
            try rewards?.ledger.dropPromise(adID: ids.external(id))
        } catch {
            logger.error("rewards: the promise of ad \(ids.external(id))'s reward could not be removed from the ledger (\(error)); after a restart its complete would still be rewarded")
        }
    }

    /// The promises an earlier run left that are still in their ad's life: apps may complete
    /// those ads in this run, under the ids they were given.
    func restorePromises() {
        guard let rewards else { return }
        let rows: [PromisedRewardRecord]
        do {
            rows = try rewards.ledger.promises(at: Date())
        } catch {
            return logger.error("rewards: the promised rewards of ads shown before this start could not be read (\(error)); their completes will be refused")
        }
        let (moment, date) = (now(), Date())
        let kept: [(name: String, promise: PromisedReward)] = rows.compactMap { row in
            RewardDesk.promise(of: row, now: moment, nowDate: date).map { (row.adID, $0) }
        }
        let (restored, effects) = engine.restorePromises(kept.map(\.promise), now: moment)
        var alive: [Moment] = []
        for (old, id) in zip(kept, restored) {
            guard let id else { continue }
            ids.adopt(old.name, as: id)
            alive.append(old.promise.endsAt)
        }
        apply(effects)
        if let last = alive.max() {
            logger.notice("rewards: \(alive.count) rewarded ads shown before this start may still be completed for their reward, the last until \(timestamp(wallTime(last)))")
        }
    }
}
