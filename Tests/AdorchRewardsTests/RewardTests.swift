import Foundation
import XCTest

@testable import AdorchRewards

final class RewardCallbackTests: XCTestCase {
    // The network's documented example (docs/rules.md, "Server-to-server callback"); the
    // expected sign was computed outside adorch, as the network documents it.
    let key = "7ca31ab0a59d69a42dd8abc7cf2d8fbd"
    let transID = "6FEB23ACB0374985A2A52D282EDD5361u6643"
    let expected = "a35e8d8c11c784aa2573c9480d77a3d034936560b5ec0752a4124d9fedd8fbd2"

    func testTheSeedsExampleSignsAsItsPythonSampleDoes() {
        XCTAssertEqual(RewardCallback.sign(key: key, transID: transID), expected)
    }

    func testAQueryIsParsedAndItsSignatureChecked() throws {
        let query = try RewardCallback.parse("?user_id=u%2042&trans_id=\(transID)&reward_name=coins&reward_amount=10&extra=a%26b&sign=\(expected.uppercased())")
        XCTAssertEqual(query.userID, "u 42")
        XCTAssertEqual(query.extra, "a&b")
        XCTAssertEqual(query.rewardAmount, 10)
        XCTAssertTrue(RewardCallback.signatureIsValid(query, key: key))
        var tampered = query
        tampered.transID += "x"
        XCTAssertFalse(RewardCallback.signatureIsValid(tampered, key: key))
        XCTAssertFalse(RewardCallback.signatureIsValid(query, key: "another key"))
    }

    func testBrokenQueriesNameTheField() {
        func failure(_ q: String) -> RewardCallback.Failure? {
            do { _ = try RewardCallback.parse(q); return nil } catch { return error }
        }
        XCTAssertEqual(failure("user_id=u&sign=\(expected)"), .missing("trans_id"))
        XCTAssertEqual(failure("user_id=u&trans_id=t"), .missing("sign"))
        XCTAssertEqual(failure("user_id=u&trans_id=t&sign=xyz"), .malformed("sign"))
        XCTAssertEqual(failure("user_id=u&trans_id=t&reward_amount=-1&sign=\(expected)"), .malformed("reward_amount"))
        XCTAssertEqual(failure("user_id=u&user_id=v&trans_id=t&sign=\(expected)"), .malformed("user_id (given twice)"))
    }

    func testConstantTimeComparison() {
        XCTAssertTrue(RewardCallback.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        XCTAssertFalse(RewardCallback.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        XCTAssertFalse(RewardCallback.constantTimeEqual(Array("abc".utf8), Array("abcd".utf8)))
    }
}

final class RewardLedgerTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-ledger-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    private func record(_ trans: String, ad: String, user: String = "u1", slot: String = "r", at seconds: Double = 0) -> RewardRecord {
        RewardRecord(transID: trans, adID: ad, userID: user, slot: slot, network: "sim", rewardName: "coins", rewardAmount: 10,
                     extra: "", grantedAt: Date(timeIntervalSince1970: 1_800_000_000 + seconds))
    }

    func testARewardIsGrantedOncePerTransactionAndPerAd() throws {
        let ledger = try RewardLedger(path: dir.appendingPathComponent("ledger.sqlite").path)
        XCTAssertEqual(try ledger.grant(record("t1", ad: "a1")), .granted)
        XCTAssertEqual(try ledger.grant(record("t1", ad: "a2")), .duplicate("transaction t1 was granted before"))
        XCTAssertEqual(try ledger.grant(record("t2", ad: "a1")), .duplicate("ad a1 was rewarded before"))
        XCTAssertEqual(try ledger.count(), 1)
    }

    /// A uid's unacknowledged rewards, the count its rewarded Shows are bounded by
    /// (docs/rules.md, "A bound on unacknowledged rewards"): its own rows only, and an
    /// acknowledged one no more.
    func testUnacknowledgedRowsAreCountedPerHolder() throws {
        let path = dir.appendingPathComponent("ledger.sqlite").path
        let ledger = try RewardLedger(path: path)
        for (i, holder) in [1000, 1000, 1000, 1001, nil].enumerated() {
            var row = record("t\(i)", ad: "a\(i)", at: Double(i))
            row.holderUID = holder.map(Int64.init)
            XCTAssertEqual(try ledger.grant(row), .granted)
        }
        XCTAssertEqual(try ledger.unacknowledgedCount(heldBy: 1000), 3)
        XCTAssertEqual(try ledger.unacknowledgedCount(heldBy: 1001), 1)
        XCTAssertEqual(try ledger.unacknowledgedCount(heldBy: 1002), 0, "a row of no recorded holder counts for no one")
        XCTAssertTrue(try ledger.acknowledge(transID: "t1"))
        XCTAssertEqual(try ledger.unacknowledgedCount(heldBy: 1000), 2)
        XCTAssertEqual(try RewardLedger(path: path).unacknowledgedCount(heldBy: 1000), 2, "read back after a reopen")
    }

    /// A promise survives a reopen until its ad's grant takes it (in the grant's own write),
    /// it is dropped, or its ad's life ends.
    func testAPromiseLastsUntilItsGrantItsDropOrItsAdsEnd() throws {
        let path = dir.appendingPathComponent("ledger.sqlite").path
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func promise(_ ad: String, endsIn seconds: Double) -> PromisedRewardRecord {
            PromisedRewardRecord(adID: ad, slot: "r", network: "sim", userID: "u1", rewardName: "coins", rewardAmount: 10, extra: "",
                                 holderUID: 1000, endsAt: now + seconds, capPlugin: "sim", capAdUnitID: "", takenAt: now - 5, counted: false)
        }
        do {
            let ledger = try RewardLedger(path: path)
            for (ad, life) in [("granted", 60.0), ("dropped", 60), ("ended", 1), ("kept", 60)] { try ledger.keep(promise(ad, endsIn: life)) }
            var counted = promise("kept", endsIn: 60)
            counted.counted = true
            try ledger.keep(counted)
            XCTAssertEqual(try ledger.grant(record("t1", ad: "granted")), .granted)
            try ledger.dropPromise(adID: "dropped")
        }
        let ledger = try RewardLedger(path: path)
        XCTAssertEqual(try ledger.promises(at: now + 1).map { "\($0.adID) \($0.counted)" }, ["kept true"])
        XCTAssertEqual(try ledger.promises(at: now + 61).count, 0, "past its ad's life")
    }

    func testUnacknowledgedRewardsSurviveAReopenUntilAcknowledged() throws {
        let path = dir.appendingPathComponent("ledger.sqlite").path
        do {
            let ledger = try RewardLedger(path: path)
            _ = try ledger.grant(record("t1", ad: "a1", user: "u1", slot: "r", at: 1))
            _ = try ledger.grant(record("t2", ad: "a2", user: "u2", slot: "r", at: 2))
            _ = try ledger.grant(record("t3", ad: "a3", user: "u1", slot: "other", at: 3))
        }
        let ledger = try RewardLedger(path: path)
        XCTAssertEqual(try ledger.unacknowledged().map(\.transID), ["t1", "t2", "t3"])
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(userID: "u1")).map(\.transID), ["t1", "t3"])
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(since: Date(timeIntervalSince1970: 1_800_000_002))).map(\.transID), ["t2", "t3"])
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(slots: ["r"])).map(\.transID), ["t1", "t2"])
        XCTAssertTrue(try ledger.acknowledge(transID: "t1"))
        XCTAssertFalse(try ledger.acknowledge(transID: "nope"))
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(userID: "u1")).map(\.transID), ["t3"])
        XCTAssertEqual(try ledger.reward(transID: "t1")?.acknowledged, true)
    }

    func testAHolderIsReadItsOwnRewardsAndThoseWithNoHolderRecorded() throws {
        let ledger = try RewardLedger(path: dir.appendingPathComponent("ledger.sqlite").path)
        for (trans, holder) in [("t1", 1000), ("t2", 1001), ("t3", nil)] as [(String, Int64?)] {
            var row = record(trans, ad: "a-\(trans)", at: Double(trans.dropFirst())!)
            row.holderUID = holder
            _ = try ledger.grant(row)
        }
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(reader: .holder(1000))).map(\.transID), ["t1", "t3"])
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(reader: .holder(1001))).map(\.transID), ["t2", "t3"])
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(reader: .holder(0))).map(\.transID), ["t3"])
        XCTAssertEqual(try ledger.unacknowledged().map(\.transID), ["t1", "t2", "t3"])
        // Rows with no holder recorded go by their slot: hidden where the reader may not use it, or all of them.
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(reader: .holder(1000, unheldHiddenIn: ["r"]))).map(\.transID), ["t1"])
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(reader: .holder(1000, unheldHiddenIn: ["other"]))).map(\.transID), ["t1", "t3"])
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(reader: .holder(1001, unheldHiddenIn: nil))).map(\.transID), ["t2"])
    }

    /// A read is bounded in its SQL: the oldest or the newest `limit` rows, oldest first, with
    /// the count of all; `after` pages on from a row, those granted in the same millisecond included.
    func testReadsAreLimitedInTheQueryAndPageOnAfterARow() throws {
        let ledger = try RewardLedger(path: dir.appendingPathComponent("ledger.sqlite").path)
        // Ten rows, the last four granted in the same millisecond.
        let rows = (0..<10).map { i in
            var row = record(String(format: "t%02d", i), ad: "a\(i)", at: Double(min(i, 6)))
            row.holderUID = i % 2 == 0 ? 1000 : 1001
            return row
        }
        for row in rows.shuffled() { _ = try ledger.grant(row) }
        let all = rows.map(\.transID)
        XCTAssertEqual(try ledger.unacknowledged(limit: 3).map(\.transID), ["t00", "t01", "t02"])
        XCTAssertEqual(try ledger.unacknowledged(limit: 3, newest: true).map(\.transID), ["t07", "t08", "t09"])
        XCTAssertEqual(try ledger.unacknowledgedCount(), 10)
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(after: "t06"), limit: 2).map(\.transID), ["t07", "t08"])
        var paged: [String] = []
        while true {
            let page = try ledger.unacknowledged(RewardFilter(after: paged.last), limit: 3).map(\.transID)
            if page.isEmpty { break }
            paged += page
        }
        XCTAssertEqual(paged, all)
        // The holder filter is applied before the limit: the reader's own newest rows.
        let own = RewardFilter(reader: .holder(1001))
        XCTAssertEqual(try ledger.unacknowledged(own, limit: 2, newest: true).map(\.transID), ["t07", "t09"])
        XCTAssertEqual(try ledger.unacknowledgedCount(own), 5)
        XCTAssertTrue(try ledger.acknowledge(transID: "t09"))
        XCTAssertEqual(try ledger.unacknowledged(own, limit: 2, newest: true).map(\.transID), ["t05", "t07"])
        XCTAssertEqual(try ledger.unacknowledgedCount(own), 4)
        // Paging on after a row acknowledged meanwhile still works: the row stays in the ledger.
        XCTAssertTrue(try ledger.acknowledge(transID: "t06"))
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(after: "t06"), limit: 5).map(\.transID), ["t07", "t08"])
    }

    func testRowsOverTheBoundsAreNotReadBackButNamedAndStillAcknowledged() throws {
        let ledger = try RewardLedger(path: dir.appendingPathComponent("ledger.sqlite").path)
        let bounds = RewardRowBounds(userID: 8, rewardName: 4, extra: 2)
        var rows = [record("fits", ad: "a1", user: "12345678", at: 1), record("long-user", ad: "a2", user: "123456789", at: 2),
                    record("long-name", ad: "a3", at: 3), record("long-extra", ad: "a4", at: 4)]
        rows[0].rewardName = "abcd"
        rows[1].rewardName = "abcd"
        rows[2].rewardName = "abcde"
        rows[3].rewardName = "abcd"
        rows[3].extra = "éé"  // two characters, four bytes: bounds count bytes
        for row in rows { _ = try ledger.grant(row) }
        XCTAssertEqual(try ledger.unacknowledged(RewardFilter(within: bounds)).map(\.transID), ["fits"])
        XCTAssertEqual(try ledger.oversized(beyond: bounds), ["long-user", "long-name", "long-extra"])
        XCTAssertTrue(try ledger.acknowledge(transID: "long-user"))
        XCTAssertEqual(try ledger.oversized(beyond: bounds), ["long-name", "long-extra"])
        XCTAssertEqual(try ledger.unacknowledged().count, 3, "without bounds every row is read")
    }

    func testACallbackIsAcceptedOnceThenItIsAReplay() throws {
        let ledger = try RewardLedger(path: dir.appendingPathComponent("ledger.sqlite").path)
        XCTAssertTrue(try ledger.acceptCallback(transID: "t9", at: Date()))
        XCTAssertFalse(try ledger.acceptCallback(transID: "t9", at: Date()))
    }
}
