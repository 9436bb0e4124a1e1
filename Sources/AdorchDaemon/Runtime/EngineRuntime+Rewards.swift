import AdorchEngine
import Dispatch

// [engine queue] Rewards written before anyone hears of them (docs/rules.md, "Rewards"): a
// row the ledger cannot take now (a full disk) is kept, written again every second until it
// is, and announced only then.

extension EngineRuntime {
    /// How long a reward that could not be written waits before the next try.
    static let rewardRetryInterval = DispatchTimeInterval.seconds(1)

    /// Writes a granted reward's row, then publishes its event; one that cannot be written
    /// waits behind the others already waiting, so rewards reach the ledger in grant order.
    func record(_ reward: UnrecordedReward) {
        let failure = unrecordedRewards.isEmpty ? write(reward) : "rewards granted before it are still waiting"
        guard let failure else { return }
        unrecordedRewards.append(reward)
        logger.error("rewards: a reward granted in \(reward.row.slot) could not be written to the ledger yet (\(failure)); it is kept and written again every second until it can be (\(unrecordedRewards.count) waiting)",
                     metadata: ["slot": "\(reward.row.slot)"])
        armRewardRetry()
    }

    /// Whether a reward of this ad is still waiting for the ledger.
    func isUnrecorded(_ adID: AdID) -> Bool { unrecordedRewards.contains { $0.adID == adID } }

    /// Writes the waiting rewards in order, up to the first that still fails.
    func retryUnrecordedRewards() {
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
            feed.publish(event, owner: reward.holder)
            return nil
        case .duplicate:
            return nil
        case .failed(let why):
            return why
        }
    }

    private func armRewardRetry() {
        guard !rewardRetryArmed else { return }
        rewardRetryArmed = true
        queue.asyncAfter(deadline: .now() + Self.rewardRetryInterval) { [weak self] in
            guard let self else { return }
            rewardRetryArmed = false
            retryUnrecordedRewards()
            if !unrecordedRewards.isEmpty { armRewardRetry() }
        }
    }
}
