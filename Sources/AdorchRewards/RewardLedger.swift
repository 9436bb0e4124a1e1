import AdorchStateDatabase
import Foundation
import GRDB

/// One granted reward: a row of the ledger.
public struct RewardRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "rewards"

    /// The network's transaction id, or one the daemon made; unique.
    public var transID: String
    /// The ad it was earned on; one reward per ad.
    public var adID: String
    public var userID: String
    public var slot: String
    public var network: String
    public var rewardName: String
    public var rewardAmount: Int64
    public var extra: String
    public var grantedAt: Date
    public var acknowledged: Bool
    /// The uid of the caller the ad was handed to: only it may acknowledge the reward. Nil for
    /// rows written before the daemon recorded it.
    public var holderUID: Int64?

    enum CodingKeys: String, CodingKey {
        case transID = "trans_id", adID = "ad_id", userID = "user_id", slot, network
        case rewardName = "reward_name", rewardAmount = "reward_amount", extra, grantedAt = "granted_at", acknowledged
        case holderUID = "holder_uid"
    }

    public init(transID: String, adID: String, userID: String, slot: String, network: String, rewardName: String,
                rewardAmount: Int64, extra: String, grantedAt: Date, acknowledged: Bool = false, holderUID: Int64? = nil) {
        self.transID = transID
        self.adID = adID
        self.userID = userID
        self.slot = slot
        self.network = network
        self.rewardName = rewardName
        self.rewardAmount = rewardAmount
        self.extra = extra
        self.grantedAt = grantedAt
        self.acknowledged = acknowledged
        self.holderUID = holderUID
    }
}

/// The longest user id, reward name and extra, in bytes, a read of the ledger returns. Rows
/// over them were written before the daemon bounded these fields: they stay in the ledger
/// (acknowledging one by its transaction id still works) but are not read back.
public struct RewardRowBounds: Sendable, Equatable {
    public var userID: Int
    public var rewardName: Int
    public var extra: Int

    public init(userID: Int, rewardName: Int, extra: Int) {
        self.userID = userID
        self.rewardName = rewardName
        self.extra = extra
    }

    /// Measured in SQL, so that an oversized row is never loaded at all.
    var sql: SQLExpression {
        SQL("""
            length(CAST(user_id AS BLOB)) <= \(userID) AND length(CAST(reward_name AS BLOB)) <= \(rewardName) \
            AND length(CAST(extra AS BLOB)) <= \(extra)
            """).sqlExpression
    }
}

/// Whose rewards a read returns.
public struct RewardReader: Sendable, Equatable {
    /// Only the rewards of ads handed to this uid; nil: everyone's.
    public var holder: Int64?
    /// Rows with no holder recorded (older than the column) are read unless their slot is one
    /// of these; nil: none of them are.
    public var unheldHiddenIn: Set<String>?

    public static let everyone = RewardReader(holder: nil, unheldHiddenIn: [])

    public static func holder(_ uid: Int64, unheldHiddenIn: Set<String>? = []) -> RewardReader {
        RewardReader(holder: uid, unheldHiddenIn: unheldHiddenIn)
    }

    var sql: SQLExpression? {
        guard let holder else { return nil }
        let unheld: SQLExpression? = unheldHiddenIn.map { hidden in Column("holder_uid") == nil && !hidden.contains(Column("slot")) }
        return unheld.map { Column("holder_uid") == holder || $0 } ?? (Column("holder_uid") == holder)
    }
}

/// Which unacknowledged rewards a read returns.
public struct RewardFilter: Sendable {
    public var userID: String?
    /// Granted at or after.
    public var since: Date?
    /// Only those after this transaction in the ledger's order (time granted, then id): the
    /// last one of the page before.
    public var after: String?
    public var slots: Set<String>?
    public var reader: RewardReader
    /// Only rows within these bounds.
    public var within: RewardRowBounds?

    public init(userID: String? = nil, since: Date? = nil, after: String? = nil, slots: Set<String>? = nil,
                reader: RewardReader = .everyone, within: RewardRowBounds? = nil) {
        self.userID = userID
        self.since = since
        self.after = after
        self.slots = slots
        self.reader = reader
        self.within = within
    }

    var request: QueryInterfaceRequest<RewardRecord> {
        var request = RewardRecord.filter(Column("acknowledged") == false)
        if let userID { request = request.filter(Column("user_id") == userID) }
        if let since { request = request.filter(Column("granted_at") >= since) }
        if let after {
            // Compared as stored, so a time read back into a Date and written again cannot shift.
            request = request.filter(SQL("(granted_at, trans_id) > (SELECT granted_at, trans_id FROM rewards WHERE trans_id = \(after))").sqlExpression)
        }
        if let slots { request = request.filter(slots.contains(Column("slot"))) }
        if let visible = reader.sql { request = request.filter(visible) }
        if let within { request = request.filter(within.sql) }
        return request
    }
}

/// The reward ledger: SQLite in the state directory, in WAL mode with synchronous writes,
/// so a reward the daemon announced survives a crash (a `kill -9` included).
public final class RewardLedger: Sendable {
    public enum Grant: Sendable, Equatable {
        case granted
        /// Refused: this transaction id or this ad was granted before.
        case duplicate(String)
    }

    private let database: DatabaseQueue

    public init(path: String) throws {
        // FULL: the commit is on disk before grant returns, so before any event is sent.
        database = try StateDatabase.open(path, sync: .full, migrations: Self.migrations)
    }

    private static func migrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v1") { db in
            try db.create(table: "rewards") { t in
                t.primaryKey("trans_id", .text)
                t.column("ad_id", .text).notNull().unique()
                t.column("user_id", .text).notNull().indexed()
                t.column("slot", .text).notNull()
                t.column("network", .text).notNull()
                t.column("reward_name", .text).notNull()
                t.column("reward_amount", .integer).notNull()
                t.column("extra", .text).notNull()
                t.column("granted_at", .datetime).notNull()
                t.column("acknowledged", .boolean).notNull().defaults(to: false)
            }
            // Server-to-server callbacks accepted once: a second one is a replay.
            try db.create(table: "accepted_callbacks") { t in
                t.primaryKey("trans_id", .text)
                t.column("accepted_at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v2: holder uid") { db in
            try db.alter(table: "rewards") { t in t.add(column: "holder_uid", .integer) }
        }
        // Reads of the unacknowledged rows, oldest or newest first, walk this index instead of
        // sorting the whole ledger, which only grows.
        migrator.registerMigration("v3: unacknowledged index") { db in
            try db.create(index: "rewards_unacknowledged", on: "rewards", columns: ["acknowledged", "granted_at", "trans_id"])
        }
        migrator.registerMigration("v4: promised rewards", migrate: Self.createPromisedRewards)
        // A uid's unacknowledged rewards are counted on each of its rewarded Shows (their
        // bound, docs/rules.md): by this index, that counts its own rows, not every uid's.
        migrator.registerMigration("v5: unacknowledged by holder") { db in
            try db.create(index: "rewards_holder_unacknowledged", on: "rewards", columns: ["holder_uid", "acknowledged"])
        }
    }

    /// A write of the ledger's, for its other tables' files.
    func write<T>(_ updates: (Database) throws -> T) throws -> T { try database.write(updates) }

    /// A write that is in the WAL when it returns, so that it survives the daemon's `kill -9`,
    /// but reaches the disk only with the next synchronous one: an fsync costs about 3.6 ms on
    /// the development machine, 0.1 ms without. For what a Show must not wait on (promises);
    /// a grant is always written with `synchronous = FULL`.
    func writeUnsynced(_ updates: (Database) throws -> Void) throws {
        try database.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            let result = Result { try db.inTransaction { try updates(db); return .commit } }
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try result.get()
        }
    }

    /// Writes the reward durably, once, and deletes its ad's promise in the same write. The
    /// caller announces it only after `.granted`.
    public func grant(_ record: RewardRecord) throws -> Grant {
        try database.write { db in
            try db.execute(sql: "DELETE FROM promised_rewards WHERE ad_id = ?", arguments: [record.adID])
            if try RewardRecord.fetchOne(db, key: record.transID) != nil {
                return .duplicate("transaction \(record.transID) was granted before")
            }
            if try RewardRecord.filter(Column("ad_id") == record.adID).fetchCount(db) > 0 {
                return .duplicate("ad \(record.adID) was rewarded before")
            }
            try record.insert(db)
            return .granted
        }
    }

    /// Rewards not acknowledged by the app that match `filter`: the oldest `limit`, oldest
    /// first; `newest`: the newest `limit`, still oldest first. The limit is the query's, so
    /// a read loads at most `limit` rows however many wait.
    public func unacknowledged(_ filter: RewardFilter = RewardFilter(), limit: Int? = nil, newest: Bool = false) throws -> [RewardRecord] {
        try database.read { db in
            let order = newest ? [Column("granted_at").desc, Column("trans_id").desc] : [Column("granted_at").asc, Column("trans_id").asc]
            var request = filter.request.order(order)
            if let limit { request = request.limit(limit) }
            let rows = try request.fetchAll(db)
            return newest ? rows.reversed() : rows
        }
    }

    /// How many rewards not acknowledged by the app match `filter`, counted without loading them.
    public func unacknowledgedCount(_ filter: RewardFilter = RewardFilter()) throws -> Int {
        try database.read { db in try filter.request.fetchCount(db) }
    }

    /// How many rewards of ads handed to `uid` no app acknowledged yet, rows over the field
    /// bounds included: they take room in the ledger all the same.
    public func unacknowledgedCount(heldBy uid: Int64) throws -> Int {
        try database.read { db in
            try RewardRecord.filter(Column("holder_uid") == uid && Column("acknowledged") == false).fetchCount(db)
        }
    }

    /// The transaction ids of unacknowledged rows over `bounds`, which no read returns.
    public func oversized(beyond bounds: RewardRowBounds) throws -> [String] {
        try database.read { db in
            try RewardRecord.filter(Column("acknowledged") == false).filter(!bounds.sql).order(Column("granted_at"))
                .select(Column("trans_id"), as: String.self).fetchAll(db)
        }
    }

    /// Marks a reward delivered; false if no such transaction exists.
    public func acknowledge(transID: String) throws -> Bool {
        try database.write { db in
            try db.execute(sql: "UPDATE rewards SET acknowledged = 1 WHERE trans_id = ?", arguments: [transID])
            return db.changesCount > 0
        }
    }

    public func reward(transID: String) throws -> RewardRecord? {
        try database.read { db in try RewardRecord.fetchOne(db, key: transID) }
    }

    /// The reward, if `reader` may see it: to anyone else it is as if it did not exist.
    public func reward(transID: String, readBy reader: RewardReader) throws -> RewardRecord? {
        try database.read { db in
            var request = RewardRecord.filter(Column("trans_id") == transID)
            if let visible = reader.sql { request = request.filter(visible) }
            return try request.fetchOne(db)
        }
    }

    /// Merges the WAL into the database file and empties it (a clean stop leaves one file).
    public func checkpoint() throws { _ = try database.writeWithoutTransaction { try $0.checkpoint(.truncate) } }

    public func count() throws -> Int { try database.read { db in try RewardRecord.fetchCount(db) } }

    /// Records a verified server callback; false if this transaction was accepted before.
    public func acceptCallback(transID: String, at date: Date) throws -> Bool {
        try database.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO accepted_callbacks (trans_id, accepted_at) VALUES (?, ?)",
                           arguments: [transID, date])
            return db.changesCount > 0
        }
    }
}
