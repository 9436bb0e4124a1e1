import AdorchPrivacyStore
import AdorchStateDatabase
import Foundation
import GRDB
import XCTest

final class PrivacyStoreTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-privacy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: folder) }

    private var path: String { folder.appendingPathComponent("privacy.sqlite").path }

    private let full = StoredPrivacy(uid: 1000, userID: "", gdprApplies: true, tcString: "CO-tc", gpp: "DBAB", gppSid: [2, 6],
                                     usPrivacy: "1YNN", childDirected: true, underAgeOfConsent: true, nonPersonalized: true,
                                     maxContentRating: "PG")

    func testARecordReadsBackAsWrittenAfterTheFileIsOpenedAgain() throws {
        let store = try PrivacyStore(path: path)
        try store.set(full, limit: 10)
        let bare = StoredPrivacy(uid: 1000, userID: "u1")
        try store.set(bare, limit: 10)
        try store.checkpoint()
        let again = try PrivacyStore(path: path)
        let (records, skipped) = try again.all()
        XCTAssertEqual(records, [full, bare])
        XCTAssertEqual(skipped, 0)
    }

    func testSetReplacesTheRecordOfItsUidAndUserAndClearDeletesOnlyThat() throws {
        let store = try PrivacyStore(path: path)
        try store.set(full, limit: 10)
        var other = full
        other.uid = 1001
        try store.set(other, limit: 10)
        var changed = full
        changed.tcString = nil
        changed.gdprApplies = false
        try store.set(changed, limit: 10)
        XCTAssertEqual(try store.all().records, [changed, other])
        XCTAssertTrue(try store.clear(uid: 1000, userID: ""))
        XCTAssertFalse(try store.clear(uid: 1000, userID: ""))
        XCTAssertEqual(try store.all().records, [other])
    }

    func testClearingManyDeletesThoseNamedAndCountsThoseThereWere() throws {
        let store = try PrivacyStore(path: path)
        for user in ["", "a", "b"] { try store.set(StoredPrivacy(uid: 7, userID: user), limit: 10) }
        try store.set(StoredPrivacy(uid: 8, userID: "a"), limit: 10)
        XCTAssertEqual(try store.clear([(7, ""), (7, "b"), (8, "b"), (9, "")]), 2, "only those there were are counted")
        XCTAssertEqual(try store.all().records.map { "\($0.uid)/\($0.userID)" }, ["7/a", "8/a"])
        XCTAssertEqual(try store.clear([]), 0)
    }

    func testAUidAtItsLimitMayReplaceButNotAddAndTheRefusalChangesNothing() throws {
        let store = try PrivacyStore(path: path)
        for user in ["a", "b"] { try store.set(StoredPrivacy(uid: 7, userID: user), limit: 2) }
        XCTAssertThrowsError(try store.set(StoredPrivacy(uid: 7, userID: "c"), limit: 2)) { error in
            XCTAssertEqual((error as? PrivacyStore.TooManyRecords)?.limit, 2)
        }
        try store.set(StoredPrivacy(uid: 7, userID: "b", nonPersonalized: true), limit: 2)
        // Another uid's records do not count against this one's.
        try store.set(StoredPrivacy(uid: 8, userID: "c"), limit: 2)
        XCTAssertEqual(try store.count(uid: 7), 2)
        XCTAssertEqual(try store.all().records.map(\.userID), ["a", "b", "c"])
        XCTAssertEqual(try store.all().records[1].nonPersonalized, true)
    }

    func testAFileOfAnotherSchemaIsDamageAndNotSQLiteIsToo() throws {
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
            try db.execute(sql: "INSERT INTO grdb_migrations VALUES ('v1')")
            try db.execute(sql: "CREATE TABLE privacy (uid INTEGER)")
        }
        try queue.close()
        XCTAssertThrowsError(try PrivacyStore(path: path)) { XCTAssertTrue(StateDatabase.isDamage($0), "\($0)") }
        let text = folder.appendingPathComponent("text.sqlite").path
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: text))
        XCTAssertThrowsError(try PrivacyStore(path: text)) { XCTAssertTrue(StateDatabase.isDamage($0), "\($0)") }
    }

    func testRowsOfTheWrongTypesAreSkippedAndCounted() throws {
        let store = try PrivacyStore(path: path)
        try store.set(full, limit: 10)
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "INSERT INTO privacy (uid, user_id, gpp_sid, child_directed, under_age_of_consent, non_personalized) VALUES (-1, 'x', '', 0, 0, 0)")
            try db.execute(sql: "INSERT INTO privacy (uid, user_id, gpp_sid, child_directed, under_age_of_consent, non_personalized) VALUES (5, 'y', '2,z', 0, 0, 0)")
            try db.execute(sql: "INSERT INTO privacy (uid, user_id, gpp_sid, child_directed, under_age_of_consent, non_personalized) VALUES (5, 'z', '', 3, 0, 0)")
        }
        try queue.close()
        let (records, skipped) = try store.all()
        XCTAssertEqual(records, [full])
        XCTAssertEqual(skipped, 3)
    }
}
