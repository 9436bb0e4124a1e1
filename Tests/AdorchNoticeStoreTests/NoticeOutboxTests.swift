import AdorchEngine
import AdorchNoticeStore
import Foundation
import XCTest

/// The outbox on a real SQLite file: which notices an ad's fate makes due, with their macros,
/// what a restart makes of the held ones, and the retry schedule.
final class NoticeOutboxTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-notices-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    private var path: String { dir.appendingPathComponent("notices.sqlite").path }

    private let notices = AdNotices(win: ["http://x.example/win?a=1"], billing: ["http://x.example/bill?ts=${AUCTION_IMP_TS}"],
                                    loss: ["http://x.example/loss?r=${AUCTION_LOSS}"], due: ["http://x.example/other?r=102"])

    private func urls(_ outbox: NoticeOutbox, now: Int64 = 10_000) throws -> [String] {
        try outbox.due(nowMS: now, room: { _ in 100 }, excluding: []).map(\.url)
    }

    func testAShownAdsWinAndBillingGoAndItsLossNever() throws {
        let outbox = try NoticeOutbox(path: path)
        try outbox.apply(.hold(notices), ad: 7, plugin: "openrtb", nowMS: 1000)
        XCTAssertEqual(try urls(outbox), ["http://x.example/other?r=102"], "only what the plugin's own auction decided is due at load")
        try outbox.apply(.win, ad: 7, plugin: "openrtb", nowMS: 1001)
        try outbox.apply(.billing, ad: 7, plugin: "openrtb", nowMS: 1234)
        try outbox.apply(.settle, ad: 7, plugin: "openrtb", nowMS: 1300)
        XCTAssertEqual(try urls(outbox), ["http://x.example/win?a=1", "http://x.example/bill?ts=1234", "http://x.example/other?r=102"],
                       "what bills first, then the losses")
        XCTAssertEqual(try outbox.counts().held, 0, "the loss went with the win")
    }

    func testAnAdEndedUnshownSendsItsLossWithTheReasonOnly() throws {
        let outbox = try NoticeOutbox(path: path)
        try outbox.apply(.hold(notices), ad: 1, plugin: "openrtb", nowMS: 1000)
        try outbox.apply(.hold(AdNotices(loss: ["http://y.example/l?r=${AUCTION_LOSS}"])), ad: 2, plugin: "openrtb", nowMS: 1000)
        try outbox.apply(.loss(.lostToHigherBid), ad: 1, plugin: "openrtb", nowMS: 1100)
        try outbox.apply(.loss(.belowFloor), ad: 2, plugin: "openrtb", nowMS: 1100)
        XCTAssertEqual(try urls(outbox).sorted(), ["http://x.example/loss?r=102", "http://x.example/other?r=102", "http://y.example/l?r=100"])
        XCTAssertEqual(try outbox.counts().held, 0)
    }

    func testARestartMakesHeldLossesDueAsExpiredAndDropsTheRest() throws {
        do {
            let outbox = try NoticeOutbox(path: path)
            try outbox.apply(.hold(notices), ad: 1, plugin: "openrtb", nowMS: 1000)   // ready when the daemon died
            try outbox.apply(.hold(notices), ad: 2, plugin: "openrtb", nowMS: 1000)   // shown, no impression yet
            try outbox.apply(.win, ad: 2, plugin: "openrtb", nowMS: 1001)
        }
        let outbox = try NoticeOutbox(path: path)
        XCTAssertEqual(try outbox.recoverHeld(nowMS: 5000), 1)
        XCTAssertEqual(try urls(outbox).sorted(), ["http://x.example/loss?r=2", "http://x.example/other?r=102", "http://x.example/other?r=102",
                                                   "http://x.example/win?a=1"])
        XCTAssertEqual(try outbox.counts().held, 0)
        // A new run's ad 1 is not the old one's: nothing of the old one is touched by it.
        try outbox.apply(.win, ad: 1, plugin: "openrtb", nowMS: 6000)
        XCTAssertEqual(try outbox.counts().due, 4)
    }

    func testANoticeAnsweredIsGoneAndOneFailedWaitsItsBackoff() throws {
        let outbox = try NoticeOutbox(path: path)
        try outbox.apply(.hold(AdNotices(due: ["http://a.example/1", "http://a.example/2"])), ad: 1, plugin: "p", nowMS: 1000)
        let due = try outbox.due(nowMS: 1000, room: { _ in 10 }, excluding: [])
        XCTAssertEqual(try outbox.due(nowMS: 1000, room: { _ in 10 }, excluding: [due[0].id]).map(\.url), ["http://a.example/2"], "one in flight is not sent twice")
        try outbox.remove(due[0].id)
        try outbox.retry(due[1].id, attempts: 1, nextMS: 2000)
        XCTAssertEqual(try outbox.due(nowMS: 1999, room: { _ in 10 }, excluding: []), [])
        XCTAssertEqual(try outbox.nextDueMS(), 2000)
        XCTAssertEqual(try outbox.due(nowMS: 2000, room: { _ in 10 }, excluding: []).map(\.attempts), [1])
        XCTAssertEqual((1...12).map { NoticeOutbox.backoff(afterAttempts: $0) },
                       [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300].map { Duration.seconds($0) })
    }
}

extension NoticeOutboxTests {
    /// A plugin cannot fill the state directory: past its bound a hold is refused whole, and
    /// what its answered notices free is its again.
    func testAPluginsNoticesAreBoundedInBytes() throws {
        let outbox = try NoticeOutbox(path: dir.appendingPathComponent("bound.sqlite").path)
        let url = "https://x.example/" + String(repeating: "a", count: 4096 - 18)
        let perAd = AdNotices(due: Array(repeating: url, count: 16))
        let fits = NoticeOutbox.maxBytesPerPlugin / NoticeOutbox.bytes(of: perAd)
        for ad in 0..<fits { try outbox.apply(.hold(perAd), ad: UInt64(ad), plugin: "flood", nowMS: 1) }
        XCTAssertThrowsError(try outbox.apply(.hold(perAd), ad: 9999, plugin: "flood", nowMS: 1)) { error in
            XCTAssertTrue(error is NoticeOutbox.OverBound, "\(error)")
        }
        XCTAssertEqual(try outbox.counts().due, fits * 16, "the refused hold wrote nothing")
        try outbox.apply(.hold(AdNotices(win: ["https://y.example/1"])), ad: 1, plugin: "other", nowMS: 1)
        let first = try XCTUnwrap(outbox.due(nowMS: 1, room: { $0 == "flood" ? 1 : 0 }, excluding: []).first)
        try outbox.remove(first.id)
        try outbox.apply(.hold(AdNotices(win: ["https://x.example/1"])), ad: 9999, plugin: "flood", nowMS: 1)
    }
}

extension NoticeOutboxTests {
    /// A slow exchange's plugin holds its share of the sender: the next due are others'; and
    /// within a plugin, what bills goes before its losses, however many of those wait.
    func testDueNoticesAreSharedAmongPluginsAndBillingGoesFirst() throws {
        let outbox = try NoticeOutbox(path: dir.appendingPathComponent("share.sqlite").path)
        try outbox.apply(.hold(AdNotices(due: (1...5).map { "https://slow.example/\($0)" })), ad: 1, plugin: "slow", nowMS: 1)
        try outbox.apply(.hold(AdNotices(due: ["https://fast.example/1"])), ad: 2, plugin: "fast", nowMS: 1)
        let first = try outbox.due(nowMS: 1, room: { _ in 2 }, excluding: [])
        XCTAssertEqual(first.map(\.url).sorted(), ["https://fast.example/1", "https://slow.example/1", "https://slow.example/2"])
        let next = try outbox.due(nowMS: 1, room: { $0 == "slow" ? 0 : 2 }, excluding: Set(first.filter { $0.plugin == "slow" }.map(\.id)))
        XCTAssertEqual(next.map(\.url), ["https://fast.example/1"], "the slow plugin's two in flight are its share")
        try outbox.apply(.hold(AdNotices(win: ["https://slow.example/win"])), ad: 3, plugin: "slow", nowMS: 5)
        try outbox.apply(.win, ad: 3, plugin: "slow", nowMS: 5)
        XCTAssertEqual(try outbox.due(nowMS: 5, room: { $0 == "slow" ? 1 : 0 }, excluding: []).map(\.url), ["https://slow.example/win"],
                       "the win goes before the five older losses")
    }
}
