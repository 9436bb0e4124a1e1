import AdorchStateDatabase
import Foundation
import GRDB

/// A viewer's privacy signals as an app sent them with SetPrivacy (docs/privacy.md, "Setting
/// a viewer's state"): the strings are kept as sent, never decoded here, so the daemon decodes
/// them again at each start with the decoders it then has.
public struct StoredPrivacy: Sendable, Equatable {
    /// The uid of the app that set it: only that uid reads or changes it.
    public var uid: UInt32
    /// The app's user; "" for the app as a whole.
    public var userID: String
    /// nil: the app did not say.
    public var gdprApplies: Bool?
    public var tcString: String?
    public var gpp: String?
    public var gppSid: [Int]
    public var usPrivacy: String?
    public var childDirected: Bool
    public var underAgeOfConsent: Bool
    public var nonPersonalized: Bool
    /// G, PG, T or MA, as sent; nil: no limit.
    public var maxContentRating: String?

    public init(uid: UInt32, userID: String, gdprApplies: Bool? = nil, tcString: String? = nil, gpp: String? = nil, gppSid: [Int] = [],
                usPrivacy: String? = nil, childDirected: Bool = false, underAgeOfConsent: Bool = false, nonPersonalized: Bool = false,
                maxContentRating: String? = nil) {
        self.uid = uid
        self.userID = userID
        self.gdprApplies = gdprApplies
        self.tcString = tcString
        self.gpp = gpp
        self.gppSid = gppSid
        self.usPrivacy = usPrivacy
        self.childDirected = childDirected
        self.underAgeOfConsent = underAgeOfConsent
        self.nonPersonalized = nonPersonalized
        self.maxContentRating = maxContentRating
    }
}

/// The privacy records apps set (SQLite in the state directory, beside the reward ledger),
/// one per uid and user id. WAL with synchronous FULL: a record is on disk when `set`
/// returns, so the app's OK means it survives a crash and a power loss alike.
public final class PrivacyStore: Sendable {
    private let database: DatabaseQueue
    public let path: String

    public init(path: String) throws {
        self.path = path
        database = try StateDatabase.open(path, sync: .full, migrations: { migrator in
            migrator.registerMigration("v1") { db in
                try db.create(table: "privacy") { t in
                    t.column("uid", .integer).notNull()
                    t.column("user_id", .text).notNull()
                    // NULL: the app did not say; else 0 or 1.
                    t.column("gdpr_applies", .integer)
                    t.column("tc_string", .text)
                    t.column("gpp", .text)
                    // The ids as decimal numbers joined by commas; "" for none.
                    t.column("gpp_sid", .text).notNull()
                    t.column("us_privacy", .text)
                    t.column("child_directed", .boolean).notNull()
                    t.column("under_age_of_consent", .boolean).notNull()
                    t.column("non_personalized", .boolean).notNull()
                    t.column("max_content_rating", .text)
                    t.primaryKey(["uid", "user_id"])
                }
            }
        }, table: "privacy", columns: ["uid", "user_id", "gdpr_applies", "tc_string", "gpp", "gpp_sid", "us_privacy", "child_directed",
                                      "under_age_of_consent", "non_personalized", "max_content_rating"])
    }

    /// Why `set` wrote nothing though the file works: the uid holds `limit` records already.
    public struct TooManyRecords: Error, Equatable {
        public var limit: Int
    }

    /// Writes `record` over the one for its uid and user id, or adds it if the uid holds fewer
    /// than `limit` records; in one transaction, so a refusal or a failure (a full disk)
    /// leaves the file as it was.
    public func set(_ record: StoredPrivacy, limit: Int) throws {
        try database.write { db in
            let exists = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM privacy WHERE uid = ? AND user_id = ?)",
                                           arguments: [Int64(record.uid), record.userID]) ?? false
            if !exists, try count(uid: record.uid, db) >= limit { throw TooManyRecords(limit: limit) }
            try db.execute(sql: """
                INSERT OR REPLACE INTO privacy (uid, user_id, gdpr_applies, tc_string, gpp, gpp_sid, us_privacy, child_directed,
                                                under_age_of_consent, non_personalized, max_content_rating)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Int64(record.uid), record.userID, record.gdprApplies, record.tcString, record.gpp,
                                 record.gppSid.map(String.init).joined(separator: ","), record.usPrivacy, record.childDirected,
                                 record.underAgeOfConsent, record.nonPersonalized, record.maxContentRating])
        }
    }

    /// Deletes the record of `uid` for `userID` ("" for the app's own); whether there was one.
    @discardableResult
    public func clear(uid: UInt32, userID: String) throws -> Bool {
        try clear([(uid, userID)]) > 0
    }

    /// Deletes the records of `keys` (uid, user id) in one transaction, so one write to disk
    /// however many there are, and all or none; how many there were.
    @discardableResult
    public func clear(_ keys: [(uid: UInt32, userID: String)]) throws -> Int {
        try database.write { db in
            var deleted = 0
            for key in keys {
                try db.execute(sql: "DELETE FROM privacy WHERE uid = ? AND user_id = ?", arguments: [Int64(key.uid), key.userID])
                deleted += db.changesCount
            }
            return deleted
        }
    }

    /// How many records `uid` holds.
    public func count(uid: UInt32) throws -> Int { try database.read { db in try count(uid: uid, db) } }

    private func count(uid: UInt32, _ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM privacy WHERE uid = ?", arguments: [Int64(uid)]) ?? 0
    }

    /// Every record, by uid then user id. Rows of the wrong types (a damaged file) are
    /// skipped, not trusted; `skipped` counts them.
    public func all() throws -> (records: [StoredPrivacy], skipped: Int) {
        try database.read { db in
            let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM privacy") ?? 0
            let records = try Row.fetchAll(db, sql: """
                SELECT * FROM privacy
                WHERE typeof(uid) = 'integer' AND uid BETWEEN 0 AND 4294967295 AND typeof(user_id) = 'text'
                  AND (gdpr_applies IS NULL OR gdpr_applies IN (0, 1))
                  AND (tc_string IS NULL OR typeof(tc_string) = 'text') AND (gpp IS NULL OR typeof(gpp) = 'text')
                  AND typeof(gpp_sid) = 'text' AND (us_privacy IS NULL OR typeof(us_privacy) = 'text')
                  AND child_directed IN (0, 1) AND under_age_of_consent IN (0, 1) AND non_personalized IN (0, 1)
                  AND (max_content_rating IS NULL OR typeof(max_content_rating) = 'text')
                ORDER BY uid, user_id
                """).compactMap { row -> StoredPrivacy? in
                let sid: String = row["gpp_sid"]
                let ids = sid.isEmpty ? [] : sid.split(separator: ",").map { Int($0) }
                guard !ids.contains(nil) else { return nil }
                return StoredPrivacy(uid: UInt32(row["uid"] as Int64), userID: row["user_id"], gdprApplies: row["gdpr_applies"],
                                     tcString: row["tc_string"], gpp: row["gpp"], gppSid: ids.compactMap { $0 }, usPrivacy: row["us_privacy"],
                                     childDirected: row["child_directed"], underAgeOfConsent: row["under_age_of_consent"],
                                     nonPersonalized: row["non_personalized"], maxContentRating: row["max_content_rating"])
            }
            return (records, total - records.count)
        }
    }

    /// Merges the WAL into the database file and empties it (a clean stop leaves one file).
    public func checkpoint() throws { _ = try database.writeWithoutTransaction { try $0.checkpoint(.truncate) } }
}
