import XCTest

@testable import AdorchEngine

/// A Show call as the engine decides it: the plugin's answer, the fallback to the next valid
/// ad, the retry limit and the answer deadline, on a manual clock.
final class ShowRequestTests: XCTestCase {
    private var engine = Engine(slots: [], plugins: [])
    private var now = Moment(nanoseconds: 1_000_000_000)
    private var effects: [Effect] = []

    /// A slot of `ready` valid ads (prices descending, so the pick order is known).
    private func start(ready: Int, format: AdFormat = .interstitial) -> [AdID] {
        let config = SlotConfig(id: "s", format: format, buffer: ready, ttl: .seconds(600),
                                waterfall: [WaterfallEntry(plugin: "a", adUnitID: "u", timeout: .seconds(2))])
        engine = Engine(slots: [config], plugins: ["a"], settings: .init(backoffJitter: 0, maxLoadsInFlightPerNetwork: 100), seed: 3)
        let orders = engine.advance(to: now).compactMap { if case .load(let o) = $0 { o } else { nil } }
        XCTAssertEqual(orders.count, ready)
        for (n, order) in orders.enumerated() {
            _ = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: Double(100 - n)), for: order.adID, from: "a", now: now)
        }
        return orders.map(\.adID)
    }

    private var shows: [AdID] { effects.compactMap { if case .show(let id, _, _) = $0 { id } else { nil } } }
    private var answers: [Result<ShownAd, ShowError>] {
        effects.compactMap { if case .completeShow(7, let result) = $0 { result } else { nil } }
    }

    func testAPresentedAdAnswersTheCallAndNothingElseIsAsked() {
        let ids = start(ready: 3)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        XCTAssertEqual(shows, [ids[0]])
        XCTAssertTrue(answers.isEmpty, "the call waits for the plugin's answer")
        if case .show = effects.last {} else { XCTFail("ad_show is the call's last effect, after its own events: \(effects)") }
        effects = engine.showAnswered(ids[0], presented: true, now: now)
        XCTAssertEqual(answers.map { try? $0.get().id }, [ids[0]])
        XCTAssertTrue(engine.isShown(ids[0]))
    }

    /// Issue 32: every event about an ad a Show handed to a uid names that uid, so that no
    /// other app reads who watched it (docs/rules.md, "Who sees what"); a ready ad's name none.
    func testEveryEventAboutAShownAdNamesItsHolder() {
        let ids = start(ready: 3)
        func emitted(_ effects: [Effect]) -> [EngineEvent] { effects.compactMap { if case .emit(let e) = $0 { e } else { nil } } }
        effects = engine.requestShow(slot: "s", userID: "viewer-secret-1", privacy: nil, holder: 4321, request: 7, now: now)
        effects += engine.showAnswered(ids[0], presented: false, now: now)  // failed_to_display, then the next ad
        effects += engine.showAnswered(ids[1], presented: true, now: now)
        effects += engine.report(.impression, for: ids[1], now: now).1
        effects += engine.pluginReported(.other(name: "presented", detailJSON: nil), for: ids[1], from: "a", now: now)
        effects += engine.report(.close, for: ids[1], now: now).1
        now = now + .seconds(3600)
        effects += engine.advance(to: now)
        let events = emitted(effects)
        let aboutShown = events.filter { $0.adID == ids[0] || $0.adID == ids[1] }
        XCTAssertEqual(Set(aboutShown.map(\.kind)), [.adShown, .adEvent, .adFailed], "\(aboutShown)")
        XCTAssertEqual(aboutShown.filter { $0.holder != 4321 }, [], "each names the uid that holds the ad")
        XCTAssertEqual(aboutShown.first { $0.kind == .adShown }?.userID, "viewer-secret-1")
        let expired = events.filter { $0.kind == .adExpired }
        XCTAssertFalse(expired.isEmpty, "the ad nobody took expired")
        XCTAssertEqual(expired.compactMap(\.holder), [], "an ad no app holds is no app's")
    }

    func testAnAdThePluginCannotPresentEndsAndTheNextValidOneIsTriedInTheSameCall() {
        let ids = start(ready: 3)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        effects = engine.showAnswered(ids[0], presented: false, now: now)
        XCTAssertTrue(effects.contains(.destroy(ids[0], plugin: "a")), "the failed ad's object ends")
        XCTAssertEqual(shows, [ids[1]])
        XCTAssertTrue(answers.isEmpty)
        effects = engine.showAnswered(ids[1], presented: true, now: now)
        XCTAssertEqual(answers.map { try? $0.get().id }, [ids[1]])
        let status = engine.slotStatuses(at: now)[0]
        XCTAssertEqual(status.counters.displayFailures, 1)
        XCTAssertEqual(status.counters.shows, 2, "each ad handed to a plugin is a show")
        XCTAssertEqual(status.readyAds, [ids[2]])
    }

    func testTheCallGivesUpAfterShowAttemptsAdsAndNeverAnswersSuccessForAnAdNotPresented() {
        let ids = start(ready: Engine.showAttempts + 2)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        var asked: [AdID] = []
        while let id = shows.last, answers.isEmpty {
            asked.append(id)
            effects = engine.showAnswered(id, presented: false, now: now)
        }
        XCTAssertEqual(asked, Array(ids.prefix(Engine.showAttempts)))
        XCTAssertEqual(answers, [.failure(.displayFailed(slot: "s", tries: Engine.showAttempts))])
        XCTAssertEqual(engine.slotStatuses(at: now)[0].readyAds, Array(ids.suffix(2)), "ads never handed out stay valid")
    }

    func testWhenTheLastValidAdFailsTheCallAnswersDisplayFailedNotAMiss() {
        let ids = start(ready: 1)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        effects = engine.showAnswered(ids[0], presented: false, now: now)
        XCTAssertEqual(answers, [.failure(.displayFailed(slot: "s", tries: 1))], "an ad was tried: the metrics count display_failed")
        XCTAssertEqual(engine.slotStatuses(at: now)[0].loading, 1, "the slot is refilling")
    }

    func testAPluginThatDoesNotAnswerInTimeCostsItsAdAndTheCallMovesOn() {
        let ids = start(ready: 2)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        XCTAssertEqual(engine.nextWakeup(after: now), now + Engine.showAnswerTimeout)
        now = now + Engine.showAnswerTimeout - .milliseconds(1)
        effects = engine.advance(to: now)
        XCTAssertTrue(shows.isEmpty)
        now = now + .milliseconds(1)
        effects = engine.advance(to: now)
        XCTAssertEqual(shows, [ids[1]], "the next ad, in the same call")
        XCTAssertTrue(effects.contains(.destroy(ids[0], plugin: "a")))
        XCTAssertEqual(effects.first, .withdrawShow(ids[0], plugin: "a"), "an ad_show not started yet is dropped: one Show, one ad")
        // The stuck plugin's answer, when it finally comes, changes nothing.
        XCTAssertEqual(engine.showAnswered(ids[0], presented: true, now: now), [])
        effects = engine.showAnswered(ids[1], presented: true, now: now)
        XCTAssertEqual(answers.map { try? $0.get().id }, [ids[1]])
    }

    func testACallWithNothingReadyOrABadSlotIsAnsweredAtOnce() {
        _ = start(ready: 1)
        effects = engine.requestShow(slot: "nope", userID: "u", privacy: nil, request: 7, now: now)
        XCTAssertEqual(answers, [.failure(.slotNotFound("nope"))])
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        XCTAssertEqual(answers, [.failure(.noAdReady(slot: "s"))])
    }

    func testAnAnswerNoCallWaitsForIsDropped() {
        let ids = start(ready: 1)
        XCTAssertEqual(engine.showAnswered(ids[0], presented: false, now: now), [], "a ready ad no Show took")
        XCTAssertEqual(engine.slotStatuses(at: now)[0].readyAds, ids)
    }

    func testAnAnswerThatComesAfterTheDeadlineCountsAsNotPresented() {
        // A plugin called on the engine's own thread that blocked past the deadline: no timer
        // could fire meanwhile, its late "presented" must not answer the call.
        let ids = start(ready: 2)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        now = now + Engine.showAnswerTimeout + .seconds(5)
        effects = engine.showAnswered(ids[0], presented: true, now: now)
        XCTAssertTrue(answers.isEmpty)
        XCTAssertEqual(shows, [ids[1]])
        XCTAssertEqual(engine.slotStatuses(at: now)[0].counters.displayFailures, 1)
    }

    func testShowsWaitingWhenTheDaemonStopsAreAnsweredShuttingDown() {
        let ids = start(ready: 2)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        effects = engine.shutdown(now: now)
        XCTAssertEqual(answers, [.failure(.shuttingDown)])
        XCTAssertTrue(effects.contains(.withdrawShow(ids[0], plugin: "a")))
        XCTAssertEqual(engine.showAnswered(ids[0], presented: true, now: now), [], "the plugin's late answer changes nothing")
    }

    func testAShowWhoseAdAReloadRemovesIsAnsweredAtOnce() {
        let ids = start(ready: 2)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        effects = engine.reconfigure(slots: [], settings: engine.settings, now: now)
        XCTAssertEqual(answers, [.failure(.interrupted(slot: "s", reason: "removed"))])
        XCTAssertTrue(effects.contains(.withdrawShow(ids[0], plugin: "a")))
    }

    func testAReportOnAnAdWhoseShowHasNotAnsweredIsRefused() {
        let ids = start(ready: 1)
        effects = engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 7, now: now)
        for event in [ViewerEvent.impression, .close] {
            guard case .failure(.adNotValid(let reason)) = engine.report(event, for: ids[0], now: now).0 else { return XCTFail("\(event) accepted") }
            XCTAssertTrue(reason.contains("still being presented"), reason)
        }
        effects = engine.showAnswered(ids[0], presented: true, now: now)
        XCTAssertNoThrow(try engine.report(.impression, for: ids[0], now: now).0.get())
        XCTAssertEqual(engine.slotStatuses(at: now)[0].counters.impressions, 1)
    }
}
