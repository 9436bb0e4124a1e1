import AdorchEngine
import AdorchStateDatabase
import Foundation
import GRDB

/// One notice the outbox is to send.
public struct DueNotice: Sendable, Equatable {
    public var id: Int64
    public var plugin: String
    public var kind: NoticeKind
    public var url: String
    public var attempts: Int
    public var createdMS: Int64
}

/// The notices of the ads a plugin gave them with (docs/bidding.md, "Notices"), in the state
/// directory, so that what a network bills is sent once whatever stops the daemon: a row is
/// written before anyone is told of what it notes, held until the ad's fate names which of
/// them go, and deleted once the network answered it. SQLite (FULL sync) through GRDB, whose
/// queue serializes the engine queue's writes and the sender's.
public final class NoticeOutbox: Sendable {
    static let table = "notices"
    private static let lossMacro = AdNotices.lossMacro
    private static let impressionTimeMacro = AdNotices.impressionTimeMacro

    private let database: DatabaseQueue

    /// Opens (or makes) the outbox at `path`.
    public init(path: String) throws {
        database = try StateDatabase.open(path, sync: .full, migrations: { migrator in
            migrator.registerMigration("notices v1") { db in
                try db.create(table: Self.table) { t in
                    t.autoIncrementedPrimaryKey("id")
                    t.column("ad", .integer).notNull()
                    t.column("plugin", .text).notNull()
                    t.column("kind", .text).notNull()
                    t.column("url", .text).notNull()
                    t.column("due", .boolean).notNull()
                    t.column("created_ms", .integer).notNull()
                    t.column("next_ms", .integer).notNull()
                    t.column("attempts", .integer).notNull().defaults(to: 0)
                }
                try db.create(index: "notices_by_ad", on: Self.table, columns: ["ad", "due"])
                try db.create(index: "notices_due", on: Self.table, columns: ["due", "next_ms"])
                try db.create(index: "notices_to_send", on: Self.table, columns: ["plugin", "due", "kind", "next_ms"])
                // Each plugin's bytes kept by the file itself, so the bound costs one read per load.
                try db.execute(sql: """
                    CREATE TABLE notice_bytes (plugin TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
                    CREATE TRIGGER notice_bytes_in AFTER INSERT ON notices BEGIN
                      INSERT INTO notice_bytes (plugin, bytes) VALUES (NEW.plugin, length(CAST(NEW.url AS BLOB)) + \(Self.rowOverhead))
                        ON CONFLICT (plugin) DO UPDATE SET bytes = bytes + excluded.bytes;
                    END;
                    CREATE TRIGGER notice_bytes_out AFTER DELETE ON notices BEGIN
                      UPDATE notice_bytes SET bytes = bytes - length(CAST(OLD.url AS BLOB)) - \(Self.rowOverhead) WHERE plugin = OLD.plugin;
                    END;
                    CREATE TRIGGER notice_bytes_moved AFTER UPDATE OF url ON notices BEGIN
                      UPDATE notice_bytes SET bytes = bytes - length(CAST(OLD.url AS BLOB)) + length(CAST(NEW.url AS BLOB)) WHERE plugin = NEW.plugin;
                    END;
                    """)
            }
        }, table: Self.table, columns: ["id", "ad", "plugin", "kind", "url", "due", "created_ms", "next_ms", "attempts"])
    }

    /// Held notices are a stopped daemon's: their ads are gone unshown, so their loss notices
    /// become due as expired (OpenRTB loss 2) and their win and billing notices are never
    /// sent. Called before this run holds any. How many losses it made due.
    @discardableResult
    public func recoverHeld(nowMS: Int64) throws -> Int {
        try database.write { db in
            try db.execute(sql: "DELETE FROM notices WHERE due = 0 AND kind IN ('win', 'billing')")
            try db.execute(sql: "UPDATE notices SET due = 1, next_ms = ?, url = replace(url, ?, ?) WHERE due = 0",
                           arguments: [nowMS, Self.lossMacro, String(AuctionLoss.expired.abi.rawValue)])
            return db.changesCount
        }
    }

    /// The most bytes one plugin's notices may hold in the outbox, each counted as its URL
    /// and `rowOverhead`: a plugin cannot fill the state directory the ledger lives in.
    public static let maxBytesPerPlugin = 16 << 20
    /// What a notice costs on disk beyond its URL (its row, its indexes), for the bound.
    public static let rowOverhead = 128

    /// What notices count against their plugin's bound.
    public static func bytes(of notices: AdNotices) -> Int {
        NoticeKind.allCases.reduce(0) { sum, kind in notices[kind].reduce(sum) { $0 + $1.utf8.count + rowOverhead } }
    }

    /// A hold that would take a plugin's notices past `maxBytesPerPlugin`: refused whole.
    public struct OverBound: Error, CustomStringConvertible {
        public var plugin: String
        public var description: String {
            "\(plugin)'s notices waiting in the outbox would pass \(NoticeOutbox.maxBytesPerPlugin >> 20) MiB"
        }
    }

    /// Carries out one step of an ad's notices, in one transaction. Throws `OverBound`, or
    /// when it could not be written (a full disk): nothing of it was.
    public func apply(_ step: NoticeStep, ad: UInt64, plugin: String, nowMS: Int64) throws {
        let ad = Int64(bitPattern: ad)
        try database.write { db in
            switch step {
            case .hold(let notices):
                let adding = Self.bytes(of: notices)
                let held = try Int.fetchOne(db, sql: "SELECT bytes FROM notice_bytes WHERE plugin = ?", arguments: [plugin]) ?? 0
                guard held + adding <= Self.maxBytesPerPlugin else { throw OverBound(plugin: plugin) }
                for kind in NoticeKind.allCases {
                    for url in notices[kind] {
                        try db.execute(sql: "INSERT INTO notices (ad, plugin, kind, url, due, created_ms, next_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                       arguments: [ad, plugin, kind.rawValue, url, kind == .due, nowMS, nowMS])
                    }
                }
            case .win:
                try db.execute(sql: "DELETE FROM notices WHERE ad = ? AND due = 0 AND kind = 'loss'", arguments: [ad])
                try db.execute(sql: "UPDATE notices SET due = 1, next_ms = ? WHERE ad = ? AND due = 0 AND kind = 'win'", arguments: [nowMS, ad])
            case .billing:
                try db.execute(sql: "UPDATE notices SET due = 1, next_ms = ?, url = replace(url, ?, ?) WHERE ad = ? AND due = 0 AND kind = 'billing'",
                               arguments: [nowMS, Self.impressionTimeMacro, String(nowMS), ad])
            case .loss(let reason):
                try db.execute(sql: "DELETE FROM notices WHERE ad = ? AND due = 0 AND kind IN ('win', 'billing')", arguments: [ad])
                try db.execute(sql: "UPDATE notices SET due = 1, next_ms = ?, url = replace(url, ?, ?) WHERE ad = ? AND due = 0 AND kind = 'loss'",
                               arguments: [nowMS, Self.lossMacro, String(reason.abi.rawValue), ad])
            case .settle:
                try db.execute(sql: "DELETE FROM notices WHERE ad = ? AND due = 0", arguments: [ad])
            }
        }
    }

    /// The notices to send next, up to `room[plugin]` of each plugin with room: of each, its
    /// win and billing notices before its losses (an exchange's dead loss URLs must not hold
    /// back what it bills), each kind in the order it fell due; none of `excluding` (in
    /// flight). Each kind is one index range read to its first rows: the cost does not grow
    /// with what waits.
    public func due(nowMS: Int64, room: (String) -> Int, excluding: Set<Int64>) throws -> [DueNotice] {
        try database.read { db in
            var picked: [DueNotice] = []
            for plugin in try String.fetchAll(db, sql: "SELECT plugin FROM notice_bytes WHERE bytes > 0 ORDER BY plugin") {
                var left = room(plugin)
                for kind in [NoticeKind.win, .billing, .loss, .due] where left > 0 {
                    let rows = try Row.fetchAll(db, sql: """
                        SELECT id, attempts, created_ms, url FROM notices WHERE plugin = ? AND due = 1 AND kind = ? AND next_ms <= ?
                        ORDER BY next_ms LIMIT ?
                        """, arguments: [plugin, kind.rawValue, nowMS, left + excluding.count])
                    for row in rows where left > 0 {
                        let id: Int64 = row["id"]
                        guard !excluding.contains(id) else { continue }
                        left -= 1
                        picked.append(DueNotice(id: id, plugin: plugin, kind: kind, url: row["url"], attempts: row["attempts"], createdMS: row["created_ms"]))
                    }
                }
            }
            return picked
        }
    }

    /// When the next notice not yet due will be, if any.
    public func nextDueMS() throws -> Int64? {
        try database.read { db in try Int64.fetchOne(db, sql: "SELECT MIN(next_ms) FROM notices WHERE due = 1") }
    }

    /// Notices due and not yet answered, and notices held for ads still alive.
    public func counts() throws -> (due: Int, held: Int) {
        try database.read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notices WHERE due = 1") ?? 0,
             try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notices WHERE due = 0") ?? 0)
        }
    }

    /// The network answered it, or it is given up: never sent again.
    public func remove(_ id: Int64) throws {
        try database.write { db in try db.execute(sql: "DELETE FROM notices WHERE id = ?", arguments: [id]) }
    }

    /// Not answered: sent again at `nextMS`.
    public func retry(_ id: Int64, attempts: Int, nextMS: Int64) throws {
        try database.write { db in
            try db.execute(sql: "UPDATE notices SET attempts = ?, next_ms = ? WHERE id = ?", arguments: [attempts, nextMS, id])
        }
    }

    /// Merges the WAL into the file, for a clean stop.
    public func checkpoint() throws {
        _ = try database.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }

    /// How long after its `attempts`-th failed try a notice is sent again: 1 s, doubling, at most 5 minutes.
    public static func backoff(afterAttempts attempts: Int) -> Duration {
        .seconds(min(300, 1 << min(max(attempts - 1, 0), 9)))
    }

    /// How long a notice is tried before it is given up.
    public static let givenUpAfter: Duration = .seconds(24 * 3600)
}
