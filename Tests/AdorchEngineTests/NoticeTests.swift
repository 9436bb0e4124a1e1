import XCTest

@testable import AdorchEngine

/// docs/bidding.md, "Notices": which step of an ad's notices the engine asks the outbox for,
/// and when, on a manual clock.
final class NoticeTests: XCTestCase {
    private let notices = AdNotices(win: ["https://x.example/win"], billing: ["https://x.example/bill"], loss: ["https://x.example/loss"])

    private func slot(_ id: String = "s", format: AdFormat = .interstitial, buffer: Int = 1, floor: Double = 0) -> SlotConfig {
        var config = SlotConfig(id: id, format: format, buffer: buffer, ttl: .seconds(600),
                                waterfall: [WaterfallEntry(plugin: "a", adUnitID: "u", timeout: .seconds(2))])
        config.floor = floor
        return config
    }

    private func steps(_ h: Harness, of id: AdID) -> [NoticeStep] {
        h.effects.compactMap { if case .notice(id, _, let step) = $0 { step } else { nil } }
    }

    private func fill(_ h: inout Harness, _ id: AdID, expiresIn: Duration? = nil, price: Double? = nil, with notices: AdNotices?) {
        h.report(.loaded(payloadJSON: "{}", expiresIn: expiresIn, price: price, notices: notices), id)
    }

    func testAShownAdsWinIsWrittenBeforeItsShowIsAnsweredAndItsBillingAtTheImpression() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        fill(&h, id, with: notices)
        XCTAssertEqual(steps(h, of: id), [.hold(notices)])
        h.effects += h.engine.requestShow(slot: "s", userID: "u1", privacy: nil, request: 1, now: h.now)
        XCTAssertEqual(steps(h, of: id), [.hold(notices)], "no win before the plugin presented it")
        let answered = h.engine.showAnswered(id, presented: true, now: h.now)
        let win = answered.firstIndex { if case .notice(id, _, .win) = $0 { true } else { false } }
        let reply = answered.firstIndex { if case .completeShow(1, .success) = $0 { true } else { false } }
        XCTAssertNotNil(win)
        XCTAssertLessThan(try XCTUnwrap(win), try XCTUnwrap(reply), "durable before anyone is told")
        h.effects += answered
        _ = h.reportViewer(.impression, id)
        _ = h.reportViewer(.impression, id)
        _ = h.reportViewer(.close, id)
        XCTAssertEqual(steps(h, of: id), [.hold(notices), .win, .billing, .settle], "billing once; what is left is dropped at the end")
    }

    func testAnAdEndedUnshownLosesWithItsReason() {
        var h = Harness(slots: [slot()])
        let expiring = h.loads[0].adID
        fill(&h, expiring, expiresIn: .seconds(30), with: notices)
        h.advance(.seconds(31))
        XCTAssertEqual(steps(h, of: expiring).last, .loss(.expired), "expired to the millisecond it said")

        var floored = Harness(slots: [slot(floor: 2)])
        let cheap = floored.loads[0].adID
        fill(&floored, cheap, price: 1, with: notices)
        XCTAssertEqual(steps(floored, of: cheap), [.hold(notices), .loss(.belowFloor)])

        var failed = Harness(slots: [slot()])
        let broken = failed.loads[0].adID
        fill(&failed, broken, with: notices)
        failed.effects += failed.engine.requestShow(slot: "s", userID: "u1", privacy: nil, request: 1, now: failed.now)
        failed.effects += failed.engine.showAnswered(broken, presented: false, now: failed.now)
        XCTAssertEqual(steps(failed, of: broken), [.hold(notices), .loss(.expired)], "never handed to a viewer: a loss, not a win")
    }

    /// The outbox could not take the win: the Show is refused, and the ad, never seen, loses.
    func testAWinTheShellCouldNotWriteEndsAsALoss() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        fill(&h, id, with: notices)
        h.effects += h.engine.requestShow(slot: "s", userID: "u1", privacy: nil, request: 1, now: h.now)
        h.effects += h.engine.showAnswered(id, presented: true, now: h.now)
        h.engine.winUnwritten(id)
        h.effects += h.engine.displayFailed(id, reason: "the outbox is full", now: h.now)
        XCTAssertEqual(steps(h, of: id), [.hold(notices), .win, .loss(.expired)])
    }

    func testAnAdWithoutNoticesAsksNothingOfTheOutbox() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        fill(&h, id, with: nil)
        guard case .success = h.show("s") else { return XCTFail("no ad") }
        _ = h.reportViewer(.impression, id)
        _ = h.reportViewer(.close, id)
        XCTAssertFalse(h.effects.contains { if case .notice = $0 { true } else { false } })
    }

    func testALoadsAdsAreWonAsTheyAreHandedToTheApp() throws {
        var h = Harness(slots: [slot("b", format: .banner, buffer: 0)])
        h.effects += h.engine.load(slot: "b", LoadParameters(width: 320, height: 50), privacy: nil, request: 1, now: h.now).1
        let object = h.loads[0].adID
        h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1, items: [PayloadItem(json: "{}", hasHeadline: false, notices: notices)]), object)
        let child = try XCTUnwrap(h.effects.compactMap { if case .completeLoad(1, .success(let ads)) = $0 { ads.first?.id } else { nil } }.first)
        XCTAssertEqual(steps(h, of: child), [.hold(notices), .win])
        _ = h.reportViewer(.impression, child)
        XCTAssertEqual(steps(h, of: child).last, .billing)
    }
}
