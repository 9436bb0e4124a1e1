import Foundation
import GRDB

/// A rewarded ad shown and not yet rewarded or ended: what its reward needs when the app's
/// complete comes after the daemon restarted. A row of the ledger, deleted by the grant that
/// rewards it (in the same write) or when the ad ends unrewarded.
public struct PromisedRewardRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "promised_rewards"

    /// The ad's id as its app was given it: the reward's `ad_id` once granted.
    public var adID: String
    public var slot: String
    public var network: String
    public var userID: String?
    public var rewardName: String
    public var rewardAmount: Int64
    public var extra: String
    public var holderUID: Int64?
    /// The ad's life ends then; a complete after it earns nothing.
    public var endsAt: Date
    /// The frequency rules' impression of the ad, if its slot has rules: the network it counts
    /// for and when its Show took it; `counted`: whether it already counted.
    public var capPlugin: String?
    public var capAdUnitID: String?
    public var takenAt: Date?
    public var counted: Bool

    enum CodingKeys: String, CodingKey {
        case adID = "ad_id", slot, network, userID = "user_id", rewardName = "reward_name", rewardAmount = "reward_amount", extra
        case holderUID = "holder_uid", endsAt = "ends_at", capPlugin = "cap_plugin", capAdUnitID = "cap_ad_unit_id"
        case takenAt = "taken_at", counted
    }

    public init(adID: String, slot: String, network: String, userID: String?, rewardName: String, rewardAmount: Int64,
                extra: String, holderUID: Int64?, endsAt: Date, capPlugin: String?, capAdUnitID: String?, takenAt: Date?,
                counted: Bool) {
        self.adID = adID
        self.slot = slot
        self.network = network
        self.userID = userID
        self.rewardName = rewardName
        self.rewardAmount = rewardAmount
        self.extra = extra
        self.holderUID = holderUID
        self.endsAt = endsAt
        self.capPlugin = capPlugin
        self.capAdUnitID = capAdUnitID
        self.takenAt = takenAt
        self.counted = counted
    }
}

extension RewardLedger {
    static func createPromisedRewards(_ db: Database) throws {
        try db.create(table: PromisedRewardRecord.databaseTableName) { t in
            t.primaryKey("ad_id", .text)
            t.column("slot", .text).notNull()
            t.column("network", .text).notNull()
            t.column("user_id", .text)
            t.column("reward_name", .text).notNull()
            t.column("reward_amount", .integer).notNull()
            t.column("extra", .text).notNull()
            t.column("holder_uid", .integer)
            t.column("ends_at", .datetime).notNull()
            t.column("cap_plugin", .text)
            t.column("cap_ad_unit_id", .text)
            t.column("taken_at", .datetime)
            t.column("counted", .boolean).notNull()
        }
    }

    /// Keeps the promise (replacing the ad's earlier one) before the app hears of the ad.
    public func keep(_ promise: PromisedRewardRecord) throws {
        try writeUnsynced { db in try promise.save(db) }
    }

    /// The ad ended unrewarded: its promise is void.
    public func dropPromise(adID: String) throws {
        try writeUnsynced { db in try db.execute(sql: "DELETE FROM promised_rewards WHERE ad_id = ?", arguments: [adID]) }
    }

    /// The promises still in their ad's life at `now`, oldest first; those past it are deleted.
    public func promises(at now: Date) throws -> [PromisedRewardRecord] {
        try write { db in
            try db.execute(sql: "DELETE FROM promised_rewards WHERE ends_at <= ?", arguments: [now])
            return try PromisedRewardRecord.order(Column("taken_at"), Column("ad_id")).fetchAll(db)
        }
    }
}
