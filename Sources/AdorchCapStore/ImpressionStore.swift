import Foundation
import GRDB

/// One impression counted against frequency rules, as the state directory keeps it.
public struct StoredImpression: Sendable, Equatable {
    public var slot: String
    public var plugin: String
    public var adUnitID: String
    /// "" for a Show without a user id.
    public var userID: String
    public var at: Date

    public init(slot: String, plugin: String, adUnitID: String, userID: String, at: Date) {
        self.slot = slot
        self.plugin = plugin
        self.adUnitID = adUnitID
        self.userID = userID
        self.at = at
    }
}

/// The impression history of the frequency rules (docs/caps.md, "Durable"): SQLite in the
/// state directory, beside the reward ledger. WAL with synchronous NORMAL: a commit is in
/// the kernel's hands when `record` returns, so it survives the daemon's death (kill -9
/// included) but not a power loss, and a Show does not wait for the disk.
public final class ImpressionStore: Sendable {
    /// One connection, for the same reason as the ledger's: a fixed number of open files.
    private let database: DatabaseQueue
    public let path: String

    public init(path: String) throws {
        self.path = path
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        configuration.journalMode = .wal
        database = try DatabaseQueue(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "impressions") { t in
                t.column("slot", .text).notNull()
                t.column("plugin", .text).notNull()
                t.column("ad_unit_id", .text).notNull()
                t.column("user_id", .text).notNull()
                // Milliseconds since the Unix epoch: what the rules' windows are measured in.
                t.column("at_ms", .integer).notNull().indexed()
            }
        }
        try migrator.migrate(database)
    }

    public func record(_ impression: StoredImpression) throws {
        try database.write { db in
            try db.execute(sql: "INSERT INTO impressions (slot, plugin, ad_unit_id, user_id, at_ms) VALUES (?, ?, ?, ?, ?)",
                           arguments: [impression.slot, impression.plugin, impression.adUnitID, impression.userID,
                                       Self.milliseconds(impression.at)])
        }
    }

    /// Every impression at or after `since`, oldest first.
    public func impressions(since: Date) throws -> [StoredImpression] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT slot, plugin, ad_unit_id, user_id, at_ms FROM impressions WHERE at_ms >= ? ORDER BY at_ms",
                             arguments: [Self.milliseconds(since)]).map { row in
                StoredImpression(slot: row["slot"], plugin: row["plugin"], adUnitID: row["ad_unit_id"], userID: row["user_id"],
                                 at: Date(timeIntervalSince1970: Double(row["at_ms"] as Int64) / 1000))
            }
        }
    }

    /// Deletes what no rule counts any more; returns how many rows went.
    @discardableResult
    public func prune(before: Date) throws -> Int {
        try database.write { db in
            try db.execute(sql: "DELETE FROM impressions WHERE at_ms < ?", arguments: [Self.milliseconds(before)])
            return db.changesCount
        }
    }

    public func count() throws -> Int { try database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM impressions") ?? 0 } }

    private static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
}
