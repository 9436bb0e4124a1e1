import AdorchStateDatabase
import Foundation
import GRDB

/// One impression counted against frequency rules, as the state directory keeps it.
public struct StoredImpression: Sendable, Equatable {
    public var slot: String
    public var plugin: String
    public var adUnitID: String
    /// The uid of the app whose user it was; nil for a caller without credentials.
    public var uid: UInt32?
    /// "" for a Show without a user id.
    public var userID: String
    /// Milliseconds since the Unix epoch, on the wall clock of the moment it was written.
    public var atMilliseconds: Int64

    public init(slot: String, plugin: String, adUnitID: String, uid: UInt32?, userID: String, atMilliseconds: Int64) {
        self.slot = slot
        self.plugin = plugin
        self.adUnitID = adUnitID
        self.uid = uid
        self.userID = userID
        self.atMilliseconds = atMilliseconds
    }
}

/// The impression history of the frequency rules (docs/caps.md, "Durable"): SQLite in the
/// state directory, beside the reward ledger. WAL with synchronous NORMAL: a commit is in
/// the kernel's hands when `record` returns, so it survives the daemon's death (kill -9
/// included) but not a power loss, and a Show does not wait for the disk.
public final class ImpressionStore: Sendable {
    private let database: DatabaseQueue
    public let path: String

    public init(path: String) throws {
        self.path = path
        database = try StateDatabase.open(path, sync: .normal, migrations: { migrator in
            migrator.registerMigration("v1") { db in
                try db.create(table: "impressions") { t in
                    t.column("slot", .text).notNull()
                    t.column("plugin", .text).notNull()
                    t.column("ad_unit_id", .text).notNull()
                    t.column("uid", .integer)
                    t.column("user_id", .text).notNull()
                    // Milliseconds since the Unix epoch: what the rules' windows are measured in.
                    t.column("at_ms", .integer).notNull().indexed()
                }
            }
        }, table: "impressions", columns: ["slot", "plugin", "ad_unit_id", "uid", "user_id", "at_ms"])
    }

    public func record(_ impression: StoredImpression) throws {
        try database.write { db in
            try db.execute(sql: "INSERT INTO impressions (slot, plugin, ad_unit_id, uid, user_id, at_ms) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [impression.slot, impression.plugin, impression.adUnitID, impression.uid.map { Int64($0) },
                                       impression.userID, impression.atMilliseconds])
        }
    }

    /// The impressions from `since` to `until` (milliseconds since the epoch), oldest first.
    /// Rows of the wrong types (a damaged file) are skipped, not trusted.
    public func impressions(since: Int64, until: Int64) throws -> [StoredImpression] {
        try database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT slot, plugin, ad_unit_id, uid, user_id, at_ms FROM impressions
                WHERE typeof(at_ms) = 'integer' AND at_ms BETWEEN ? AND ?
                  AND typeof(slot) = 'text' AND typeof(plugin) = 'text' AND typeof(ad_unit_id) = 'text'
                  AND typeof(user_id) = 'text' AND (uid IS NULL OR (typeof(uid) = 'integer' AND uid BETWEEN 0 AND 4294967295))
                ORDER BY at_ms
                """, arguments: [since, until]).map { row in
                StoredImpression(slot: row["slot"], plugin: row["plugin"], adUnitID: row["ad_unit_id"],
                                 uid: (row["uid"] as Int64?).map { UInt32($0) }, userID: row["user_id"], atMilliseconds: row["at_ms"])
            }
        }
    }

    /// Deletes what no rule counts any more, from before `since` or after `until` (written
    /// by a clock that was far ahead), and rows a damaged file holds; returns how many went.
    @discardableResult
    public func prune(since: Int64, until: Int64, now: Int64) throws -> Int {
        try database.write { db in
            try db.execute(sql: "DELETE FROM impressions WHERE NOT (typeof(at_ms) = 'integer' AND at_ms BETWEEN ? AND ?)",
                           arguments: [since, until])
            let gone = db.changesCount
            // A row from a clock that was ahead counts as now: written so, it does again at the next start.
            try db.execute(sql: "UPDATE impressions SET at_ms = ? WHERE at_ms > ?", arguments: [now, now])
            return gone
        }
    }

    /// Merges the WAL into the database file and empties it (a clean stop leaves one file).
    public func checkpoint() throws { _ = try database.writeWithoutTransaction { try $0.checkpoint(.truncate) } }

    public func count() throws -> Int { try database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM impressions") ?? 0 } }
}
