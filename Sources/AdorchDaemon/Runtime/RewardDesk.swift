import AdorchEngine
import AdorchRewards
import AdorchVarlink
import Foundation
import Logging

/// [engine queue] Rewards (docs/rules.md, "Rewards"): the durable ledger, the app security
/// key, and the server-to-server callback checked as the publisher's server would. Called on
/// the engine queue so that a grant's ledger row is written before its event is published.
final class RewardDesk: Sendable {
    static let fileName = "adorch.sqlite"
    let ledger: RewardLedger
    /// The key of the server-to-server reward callback, if one is configured.
    private let key: String?
    private let logger: Logger

    /// Opens the ledger in `stateDir` and reads the key from [rewards] key_file or the
    /// systemd credential reward-key (never from the socket).
    init(stateDir: String, config: DaemonConfig, logger: Logger) throws {
        let path = stateDir + "/" + Self.fileName
        do {
            ledger = try RewardLedger(path: path)
        } catch {
            throw StateDirectoryError(path: stateDir, reason: "holds a reward ledger, \(Self.fileName), that cannot be used: \(error)")
        }
        self.logger = logger
        Self.reportOversized(ledger, logger)
        key = try config.rewardKey()
    }

    /// Merges the ledger's WAL into its file, for a clean stop.
    func checkpoint() {
        do { try ledger.checkpoint() } catch { logger.warning("rewards: the ledger could not be checkpointed at stop: \(error)") }
    }

    /// A grant's ledger row, made once: a retry writes the same row, the same transaction id.
    func row(for grant: RewardGrant, holder: UInt32?, ids: ExternalIDs) -> RewardRecord {
        RewardRecord(
            transID: grant.networkTransID ?? "adorch-\(UUID().uuidString.lowercased())", adID: ids.external(grant.adID),
            userID: grant.userID, slot: grant.slot, network: grant.network, rewardName: grant.reward.name,
            rewardAmount: grant.reward.amount, extra: grant.reward.extra, grantedAt: Date(), holderUID: holder.map(Int64.init)
        )
    }

    /// A promised reward as the ledger keeps it: engine moments as wall-clock time (`now` is
    /// this run's moment of `nowDate`), the ad under its app-facing name.
    func record(of promise: PromisedReward, ids: ExternalIDs, now: Moment, nowDate: Date) -> PromisedRewardRecord {
        let impression = promise.impression
        return PromisedRewardRecord(
            adID: ids.external(promise.adID), slot: promise.slot, network: promise.network, userID: promise.userID,
            rewardName: promise.reward.name, rewardAmount: promise.reward.amount, extra: promise.reward.extra,
            holderUID: promise.holder.map(Int64.init), endsAt: nowDate + (promise.endsAt - now).seconds,
            capPlugin: impression?.network.plugin, capAdUnitID: impression?.network.adUnitID,
            takenAt: impression.map { nowDate - Double(now.capTime &- $0.at) / 1e9 }, counted: promise.counted)
    }

    /// The engine's promise of a row read back at start (`now` is this run's moment of
    /// `nowDate`); nil for a row whose holder uid is out of range (never written by the daemon).
    static func promise(of row: PromisedRewardRecord, now: Moment, nowDate: Date) -> PromisedReward? {
        guard let holder = row.holderUID.map({ UInt32(exactly: $0) }) ?? .some(nil) else { return nil }
        var impression: CountedImpression?
        if let plugin = row.capPlugin, let unit = row.capAdUnitID, let taken = row.takenAt {
            // Signed: an impression from before this boot still has its place (as CapHistoryFile reads them).
            let ageNS = Int64(clamping: Int64(exactly: (nowDate.timeIntervalSince(taken) * 1e9).rounded()) ?? .max)
            impression = CountedImpression(slot: row.slot, network: CapNetwork(plugin: plugin, adUnitID: unit),
                                           user: CapUser(uid: holder, id: row.userID), at: now.capTime &- ageNS)
        }
        let remaining = Duration.nanoseconds(Int64(exactly: (max(0, row.endsAt.timeIntervalSince(nowDate)) * 1e9).rounded()) ?? .max)
        return PromisedReward(adID: 0, slot: row.slot, network: row.network, userID: row.userID,
                              reward: RewardModel(name: row.rewardName, amount: row.rewardAmount, extra: row.extra), holder: holder,
                              endsAt: now + remaining, impression: impression, counted: row.counted)
    }

    /// What writing a reward's row came to.
    enum Written {
        /// On disk: its event may be published.
        case granted(EngineEvent)
        /// Refused as granted before (its transaction or its ad): nothing to publish.
        case duplicate
        /// Not written (a full disk, an I/O error): to be written again.
        case failed(String)
    }

    /// Writes `row` (for the ad `adID`) to the ledger, synchronously: the event comes only
    /// once it is on disk.
    func write(_ row: RewardRecord, adID: AdID) -> Written {
        do {
            switch try ledger.grant(row) {
            case .granted:
                var event = EngineEvent(.rewardGranted, slot: row.slot, adID: adID, network: row.network,
                                        message: "\(row.rewardAmount) \(row.rewardName), transaction \(row.transID)", userID: row.userID,
                                        holder: row.holderUID.flatMap { UInt32(exactly: $0) })
                event.detailJSON = Self.json(row).jsonString
                return .granted(event)
            case .duplicate(let why):
                logger.warning("reward refused: \(why)", metadata: ["slot": "\(row.slot)"])
                return .duplicate
            }
        } catch {
            return .failed("\(error)")
        }
    }

    /// Checks a callback query: the signature against the key, then that its transaction
    /// was not accepted before (replay).
    func verifyCallback(_ query: String) -> Result<(valid: Bool, reason: String?), VarlinkError> {
        guard let key else {
            return .failure(ManagerError.noRewardKey(["message": "no [rewards] key_file or reward-key credential is configured"]))
        }
        let parsed: RewardCallback.Query
        do throws(RewardCallback.Failure) { parsed = try RewardCallback.parse(query) } catch {
            return .success((false, error.description))
        }
        guard RewardCallback.signatureIsValid(parsed, key: key) else { return .success((false, "the sign does not match")) }
        do {
            guard try ledger.acceptCallback(transID: parsed.transID, at: Date()) else {
                return .success((false, "transaction \(parsed.transID) was accepted before (replay)"))
            }
        } catch {
            return .failure(ManagerError.ledgerFailed(["message": .string("\(error)")]))
        }
        return .success((true, nil))
    }

    /// The rewards a new subscriber is sent again, newest first (docs/rules.md, "Redelivery
    /// until acknowledged"): without a bound, one uid holding a thousand unacknowledged rewards
    /// made each of its Subscribe calls cost a megabyte of events on the daemon's queues.
    static let redeliveredAtMost = 32
    /// ListRewards' page when the call names no limit, and the largest it may name.
    static let listedByDefault = 100
    static let listedAtMost = 1000

    /// A page of the rewards no app acknowledged yet, of those `viewer` may see: at most
    /// `limit`, oldest first, after the reward `after` if given; `more`: whether others follow.
    func unacknowledged(userID: String?, since: Date?, after: String?, limit: Int,
                        viewer: Viewer) -> Result<(rewards: [JSONValue], more: Bool), VarlinkError> {
        do {
            // Another uid's reward is answered as one that does not exist: no uid learns whether
            // a transaction id of someone else's is in the ledger.
            if let after, try ledger.reward(transID: after, readBy: viewer.rewardReader) == nil {
                return .failure(invalidParameter("after", "no reward has this transaction id"))
            }
            let rows = try ledger.unacknowledged(filter(viewer, userID: userID, since: since, after: after), limit: limit + 1)
            return .success((rows.prefix(limit).map(Self.json), rows.count > limit))
        } catch {
            return .failure(Self.ledgerFailed(error))
        }
    }

    /// Acknowledges a reward for `caller`: only the uid its ad was handed to (or root) may. To
    /// any other uid the reward is answered as one that does not exist, and the refusal is
    /// logged without the transaction id.
    func acknowledge(_ transID: String, caller: UInt32?) -> Result<Void, VarlinkError> {
        let notFound = AdsError.rewardNotFound(["trans_id": .string(transID), "message": "no reward has this transaction id"])
        do {
            if let holder = try ledger.reward(transID: transID)?.holderUID, let caller, caller != 0, Int64(caller) != holder {
                logger.notice("rewards: uid \(caller) asked to acknowledge a reward of an ad handed to another uid; answered that there is none")
                return .failure(notFound)
            }
            guard try ledger.acknowledge(transID: transID) else { return .failure(notFound) }
            return .success(())
        } catch {
            return .failure(Self.ledgerFailed(error))
        }
    }

    /// The events a new subscriber of `slots` is sent first: the newest `redeliveredAtMost`
    /// rewards `viewer` may see that no app acknowledged yet (delivered again until one does),
    /// oldest first; `waiting`: how many more there are, for ListRewards to page through.
    func redeliveries(slots: Set<String>?, viewer: Viewer) -> (events: [JSONValue], waiting: Int) {
        let filter = filter(viewer, slots: slots)
        guard let rows = try? ledger.unacknowledged(filter, limit: Self.redeliveredAtMost, newest: true),
              let count = try? ledger.unacknowledgedCount(filter)
        else { return ([], 0) }
        let events: [JSONValue] = rows.map { row in
            [
                "kind": .string(EngineEvent.Kind.rewardGranted.rawValue), "name": "reward", "time": .string(timestamp(row.grantedAt)),
                "slot": .string(row.slot), "ad_id": .string(row.adID), "network": .string(row.network),
                "user_id": .string(row.userID), "detail": Self.json(row), "message": "redelivered: not acknowledged yet",
            ]
        }
        return (events, max(0, count - rows.count))
    }

    /// Unacknowledged rows within the field bounds that `viewer` may see.
    private func filter(_ viewer: Viewer, userID: String? = nil, since: Date? = nil, after: String? = nil,
                        slots: Set<String>? = nil) -> RewardFilter {
        RewardFilter(userID: userID, since: since, after: after, slots: slots, reader: viewer.rewardReader, within: FieldBounds.rewardRows)
    }

    /// Rows over the field bounds, written before there were any, are never read back (a few
    /// could fill any subscriber's buffer): said once, at start, with how to clear them.
    private static func reportOversized(_ ledger: RewardLedger, _ logger: Logger) {
        guard let oversized = try? ledger.oversized(beyond: FieldBounds.rewardRows), !oversized.isEmpty else { return }
        let shown = oversized.prefix(10).joined(separator: ", ")
        logger.warning("""
            reward ledger: \(oversized.count) unacknowledged rewards have a user id, reward name or extra over the field bounds \
            (docs/rules.md, "Bounded fields"); they are not listed or redelivered. AckReward clears them: \(shown)\(oversized.count > 10 ? ", ..." : "")
            """)
    }

    static func json(_ row: RewardRecord) -> JSONValue {
        ["trans_id": .string(row.transID), "ad_id": .string(row.adID), "user_id": .string(row.userID), "slot": .string(row.slot),
         "network": .string(row.network), "reward_name": .string(row.rewardName), "reward_amount": .int(row.rewardAmount),
         "extra": .string(row.extra), "granted_at": .string(timestamp(row.grantedAt)), "acknowledged": .bool(row.acknowledged)]
    }

    private static func ledgerFailed(_ error: Error) -> VarlinkError {
        AdsError.ledgerFailed(["message": .string("\(error)")])
    }

}

