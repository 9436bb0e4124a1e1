import XCTest

@testable import AdorchEngine

/// max_open_ads_per_uid on a manual clock: an ad handed to a uid (Show, Load) counts until
/// it ends; another uid and root are not held back by it.
final class OpenAdsBudgetTests: XCTestCase {
    private var engine = Engine(slots: [], plugins: [])
    private var now = Moment(nanoseconds: 1_000_000_000)
    private let app: UInt32 = 1000
    /// The ads `startShows` loaded.
    private var loaded: [AdID] = []

    private func settings(maxOpenAds: Int) -> SchedulerSettings {
        var settings = SchedulerSettings(backoffJitter: 0, shownLifetime: .seconds(100), maxLoadsInFlightPerNetwork: 100)
        settings.budgets.maxOpenAds = maxOpenAds
        return settings
    }

    /// An interstitial slot of `ready` valid ads.
    private func startShows(ready: Int, maxOpenAds: Int) {
        let config = SlotConfig(id: "s", format: .interstitial, buffer: ready, ttl: .seconds(600),
                                waterfall: [WaterfallEntry(plugin: "a", adUnitID: "u", timeout: .seconds(2))])
        engine = Engine(slots: [config], plugins: ["a"], settings: settings(maxOpenAds: maxOpenAds), seed: 3)
        for order in engine.advance(to: now).compactMap({ if case .load(let o) = $0 { o } else { nil } }) {
            _ = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1), for: order.adID, from: "a", now: now)
            loaded.append(order.adID)
        }
    }

    private func show(_ uid: UInt32) -> Result<ShownAd, ShowError> { engine.show(slot: "s", userID: nil, privacy: nil, holder: uid, now: now).0 }

    func testShowsStopAtTheBudgetUntilOneOfTheUidsAdsEnds() throws {
        startShows(ready: 8, maxOpenAds: 2)
        let first = try show(app).get()
        XCTAssertNoThrow(try show(app).get())
        XCTAssertEqual(engine.holder(of: first.id), app)
        let ready = engine.slotStatuses(at: now)[0].ready
        XCTAssertEqual(show(app).failureValue, .tooManyOpenAds(uid: app, open: 2, loading: 0, limit: 2))
        XCTAssertEqual(engine.slotStatuses(at: now)[0].ready, ready, "a refused Show takes no ad")
        XCTAssertEqual(engine.slotStatuses(at: now)[0].counters.shows, 2)
        // Another uid has a budget of its own, and root (the operator) none.
        XCTAssertNoThrow(try show(app + 1).get())
        for _ in 0..<3 { XCTAssertNoThrow(try show(0).get()) }
        // Closing one ad frees its place.
        let (closed, _) = engine.report(.close, for: first.id, now: now)
        XCTAssertNoThrow(try closed.get())
        XCTAssertNil(engine.holder(of: first.id), "an ended ad is no one's")
        XCTAssertNoThrow(try show(app).get())
        XCTAssertNotNil(show(app).failureValue)
    }

    /// Another uid learns nothing of an ad it was not handed (ids are sequential): live, ended
    /// or never handed to anyone, its Report is answered word for word as an id no ad ever
    /// had, and changes nothing. The holder is told the truth; root may report on any ad.
    func testAReportOnAnAdNotHandedToTheCallerAnswersAsAnUnknownId() throws {
        startShows(ready: 4, maxOpenAds: 8)
        let live = try show(app).get(), ended = try show(app).get()
        XCTAssertNoThrow(try engine.report(.close, for: ended.id, by: app, now: now).0.get())
        let ready = try XCTUnwrap(loaded.first { $0 != live.id && $0 != ended.id })
        func answer(_ id: AdID, by uid: UInt32?) -> String {
            switch engine.report(.impression, for: id, by: uid, now: now).0 {
            case .success: "ok"
            case .failure(.adNotValid(let reason)): reason
            }
        }
        let other = app + 1
        XCTAssertEqual(answer(AdID(999_999), by: other), Engine.unknownAd)
        for id in [live.id, ended.id, ready] {
            XCTAssertEqual(answer(id, by: other), Engine.unknownAd, "ad \(id)")
        }
        XCTAssertEqual(engine.slotStatuses(at: now)[0].counters.impressions, 0, "the refused reports changed nothing")
        XCTAssertEqual(answer(ended.id, by: app), "has ended (closed)")
        XCTAssertEqual(answer(live.id, by: app), "ok")
        XCTAssertEqual(answer(ready, by: app), Engine.unknownAd, "a ready ad is handed to no one yet")
        let another = try show(app).get()
        XCTAssertEqual(answer(another.id, by: nil), "ok", "root")
    }

    func testAShownAdNeverClosedStopsCountingWhenItsShownLifetimeEnds() throws {
        startShows(ready: 4, maxOpenAds: 1)
        XCTAssertNoThrow(try show(app).get())
        XCTAssertNotNil(show(app).failureValue)
        now = now + .seconds(100)
        _ = engine.advance(to: now)
        XCTAssertNoThrow(try show(app).get())
    }

    func testAnAdThatFailsToDisplayIsReplacedWithinTheBudget() throws {
        startShows(ready: 4, maxOpenAds: 1)
        var effects = engine.requestShow(slot: "s", userID: nil, privacy: nil, holder: app, request: 7, now: now)
        guard case .show(let failing, _, _)? = effects.last else { return XCTFail("\(effects)") }
        effects = engine.showAnswered(failing, presented: false, now: now)
        guard case .show(let next, _, _)? = effects.last else { return XCTFail("the call takes the next ad: \(effects)") }
        XCTAssertEqual(engine.holder(of: next), app)
        effects = engine.showAnswered(next, presented: true, now: now)
        XCTAssertTrue(effects.contains { if case .completeShow(7, .success) = $0 { true } else { false } })
        XCTAssertEqual(show(app).failureValue, .tooManyOpenAds(uid: app, open: 1, loading: 0, limit: 1))
    }

    func testLoadsCountWhatTheyLoadFromTheCallOnAndTheirAdsUntilEachEnds() throws {
        let config = SlotConfig(id: "n", format: .native, buffer: 0, waterfall: [WaterfallEntry(plugin: "a", adUnitID: "u", timeout: .seconds(2))],
                                count: 3)
        engine = Engine(slots: [config], plugins: ["a"], settings: settings(maxOpenAds: 4), seed: 3)
        _ = engine.advance(to: now)
        let (accepted, effects) = engine.load(slot: "n", LoadParameters(), holder: app, privacy: nil, request: 1, now: now)
        XCTAssertNoThrow(try accepted.get())
        XCTAssertEqual(engine.load(slot: "n", LoadParameters(), holder: app, privacy: nil, request: 2, now: now).0.failureValue,
                       .tooManyOpenAds(uid: app, open: 0, loading: 3, limit: 4), "what is loading counts")
        XCTAssertNoThrow(try engine.load(slot: "n", LoadParameters(count: 1), holder: app, privacy: nil, request: 3, now: now).0.get(), "one more fits")
        guard case .load(let order)? = effects.first else { return XCTFail("\(effects)") }
        let items = (1...3).map { PayloadItem(json: #"{"headline":"h\#($0)"}"#, hasHeadline: true) }
        let filled = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1, items: items), for: order.adID, from: "a", now: now)
        guard case .completeLoad(1, .success(let ads))? = filled.last else { return XCTFail("\(filled)") }
        XCTAssertEqual(ads.map { engine.holder(of: $0.id) }, [app, app, app])
        XCTAssertEqual(engine.load(slot: "n", LoadParameters(count: 1), holder: app, privacy: nil, request: 4, now: now).0.failureValue,
                       .tooManyOpenAds(uid: app, open: 3, loading: 1, limit: 4))
        XCTAssertNoThrow(try engine.load(slot: "n", LoadParameters(count: 3), holder: 0, privacy: nil, request: 5, now: now).0.get(), "root is exempt")
        _ = engine.report(.close, for: ads[0].id, now: now)
        XCTAssertNoThrow(try engine.load(slot: "n", LoadParameters(count: 1), holder: app, privacy: nil, request: 6, now: now).0.get())
    }
}
