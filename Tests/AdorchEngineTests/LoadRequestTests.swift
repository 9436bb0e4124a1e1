import XCTest

@testable import AdorchEngine

/// On-demand formats (banner, splash, native): Load walks the waterfall within a deadline.
final class LoadRequestTests: XCTestCase {
    private var engine: Engine!
    private var now = Moment(nanoseconds: 1_000_000_000)
    private var effects: [Effect] = []

    private func start(_ slots: [SlotConfig]) {
        engine = Engine(slots: slots, plugins: ["a", "b", "c"], settings: .init(backoffJitter: 0), seed: 3)
        effects = engine.advance(to: now)
    }

    private func slot(_ id: String, _ format: AdFormat, entries: [(String, Duration)], timeout: Duration? = nil) -> SlotConfig {
        SlotConfig(id: id, format: format, buffer: 0, waterfall: entries.map { WaterfallEntry(plugin: $0.0, adUnitID: "u-\($0.0)", timeout: $0.1) },
                   width: format == .banner ? 320 : 0, height: format == .banner ? 50 : 0, count: format == .native ? 3 : 1,
                   loadTimeout: timeout)
    }

    private var loads: [LoadOrder] { effects.compactMap { if case .load(let o) = $0 { o } else { nil } } }
    private var completions: [(RequestID, Result<[ShownAd], LoadFailure>)] {
        effects.compactMap { if case .completeLoad(let r, let result) = $0 { (r, result) } else { nil } }
    }

    private func report(_ r: PluginReport, _ id: AdID) {
        let plugin = loads.first { $0.adID == id }!.plugin
        effects += engine.pluginReported(r, for: id, from: plugin, now: now)
    }

    private func advance(_ d: Duration) {
        now = now + d
        effects += engine.advance(to: now)
    }

    private func item(_ headline: String?) -> PayloadItem {
        PayloadItem(json: headline.map { #"{"headline":"\#($0)"}"# } ?? "{}", hasHeadline: headline != nil)
    }

    func testNothingIsPreloadedForOnDemandFormats() {
        start([slot("b", .banner, entries: [("a", .seconds(1))]), slot("n", .native, entries: [("a", .seconds(1))])])
        XCTAssertEqual(loads.count, 0)
        XCTAssertEqual(engine.show(slot: "b", userID: nil, privacy: nil, now: now).0,
                       .failure(.invalidParameter(name: "slot", reason: "b is a banner slot: its ads are loaded on demand with Load")))
    }

    func testAnAttemptCutByTheRequestsDeadlineTellsThePluginTheTimeItHas() {
        start([slot("b", .banner, entries: [("a", .seconds(2)), ("b", .seconds(2))], timeout: .seconds(3))])
        effects += engine.load(slot: "b", LoadParameters(), privacy: nil, request: 7, now: now).1
        XCTAssertEqual(loads[0].entry.timeout, .seconds(2), "the entry's own timeout, within the request's")
        advance(.seconds(2))
        XCTAssertEqual(loads.map(\.plugin), ["a", "b"])
        XCTAssertEqual(loads[1].deadline, now + .seconds(1))
        XCTAssertEqual(loads[1].entry.timeout, .seconds(1), "timeout_ms and the deadline say the same")
    }

    /// An app's own short timeout_ms is its choice: the shared entry neither backs off nor
    /// learns a failure from it, so other apps' Loads still reach it. The entry's own timeout
    /// is the network's, and counts.
    func testALoadsOwnShortTimeoutDoesNotBackOffTheEntryEveryAppShares() {
        start([slot("b", .banner, entries: [("a", .seconds(2))], timeout: .seconds(5))])
        for request in 1...5 as ClosedRange<RequestID> {
            effects += engine.load(slot: "b", LoadParameters(timeout: .milliseconds(1)), privacy: nil, request: request, now: now).1
            advance(.milliseconds(1))
        }
        XCTAssertEqual(loads.count, 5, "every Load reached the entry")
        XCTAssertEqual(completions.count, 5)
        let entry = engine.slotStatuses(at: now)[0].entries[0]
        XCTAssertEqual(entry.failuresInRow, 0)
        XCTAssertEqual(entry.backoff, .zero)
        XCTAssertNil(entry.lastError)

        effects += engine.load(slot: "b", LoadParameters(), privacy: nil, request: 6, now: now).1
        XCTAssertEqual(loads.count, 6, "another app's Load is still sent to it")
        advance(.seconds(2))  // the entry's own timeout: the network did not answer
        let timedOut = engine.slotStatuses(at: now)[0].entries[0]
        XCTAssertEqual(timedOut.failuresInRow, 1)
        XCTAssertEqual(timedOut.lastError, .timeout)
    }

    func testTheWaterfallMovesOnAfterNoFillAndTimeoutAndFillsWithinTheDeadline() {
        start([slot("b", .banner, entries: [("a", .seconds(1)), ("b", .seconds(1)), ("c", .seconds(1))], timeout: .seconds(5))])
        let (accepted, out) = engine.load(slot: "b", LoadParameters(), privacy: nil, request: 7, now: now)
        XCTAssertNoThrow(try accepted.get())
        effects += out
        XCTAssertEqual(loads.map(\.plugin), ["a"])
        XCTAssertEqual(loads[0].width, 320)
        report(.failed(.noFill, networkCode: 20001, message: "no ads"), loads[0].adID)
        XCTAssertEqual(loads.map(\.plugin), ["a", "b"])
        advance(.seconds(1))  // b never answers
        XCTAssertEqual(loads.map(\.plugin), ["a", "b", "c"])
        report(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1, tracksItself: false, items: [item(nil)]), loads[2].adID)
        guard case .success(let ads)? = completions.first?.1 else { return XCTFail("\(completions)") }
        XCTAssertEqual(completions.first?.0, 7)
        XCTAssertEqual(ads.count, 1)
        XCTAssertEqual(ads[0].network, "c")
        let entries = engine.slotStatuses(at: now)[0].entries
        XCTAssertEqual(entries.map(\.loads), [1, 1, 1], "tried in order")
        XCTAssertEqual(entries.map(\.lastError), [.noFill, .timeout, nil])
    }

    /// Issue 32: the events of a Load, from its attempts to the ads handed out and their
    /// object's own reports, are its caller's: each names the uid (docs/rules.md, "Who sees what").
    func testEveryEventOfALoadNamesTheUidItIsFor() {
        start([slot("n", .native, entries: [("a", .seconds(1)), ("b", .seconds(1)), ("c", .seconds(1))], timeout: .seconds(5))])
        effects += engine.load(slot: "n", LoadParameters(count: 2), holder: 4321, privacy: nil, request: 7, now: now).1
        report(.failed(.noFill, networkCode: 1, message: "none"), loads[0].adID)
        report(.mediaCached, loads[1].adID)
        advance(.seconds(1))  // b never answers
        let object = loads[2].adID
        report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, tracksItself: false, items: [item("x"), item("y")]), object)
        guard case .success(let ads)? = completions.first?.1 else { return XCTFail("\(completions)") }
        effects += engine.pluginReported(.other(name: "presented", detailJSON: nil), for: object, from: "c", now: now)
        effects += engine.report(.click, for: ads[0].id, now: now).1
        for ad in ads { effects += engine.report(.close, for: ad.id, now: now).1 }
        let events = effects.compactMap { if case .emit(let e) = $0 { e } else { nil } }
        XCTAssertEqual(Set(events.map(\.kind)), [.adFailed, .mediaCached, .adTimedOut, .adLoaded, .adShown, .adEvent], "\(events)")
        XCTAssertEqual(events.filter { $0.holder != 4321 }, [], "every one names the uid the Load is for")
    }

    func testASplashWhoseEntriesAreAllTooSlowFailsAtItsDeadline() {
        start([slot("sp", .splash, entries: [("a", .seconds(3)), ("b", .seconds(3))])])
        effects += engine.load(slot: "sp", LoadParameters(), privacy: nil, request: 1, now: now).1
        XCTAssertEqual(loads[0].deadline, now + .seconds(2), "the attempt may not outlive the splash's 2 s")
        advance(.milliseconds(1999))
        XCTAssertTrue(completions.isEmpty)
        advance(.milliseconds(1))
        guard case .failure(let failure)? = completions.first?.1 else { return XCTFail("\(completions)") }
        XCTAssertEqual(failure.code, .timeout)
        XCTAssertEqual(failure.attempts.map(\.plugin), ["a"])
        XCTAssertEqual(loads.count, 1, "no time was left for b")
    }

    func testNativeLoadsSeveralAdsEachWithItsOwnIdAndOneObject() {
        start([slot("n", .native, entries: [("a", .seconds(1))])])
        effects += engine.load(slot: "n", LoadParameters(count: 3), privacy: nil, request: 2, now: now).1
        XCTAssertEqual(loads[0].count, 3)
        let object = loads[0].adID
        report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, tracksItself: false, items: [item("x"), item("y"), item("z")]), object)
        guard case .success(let ads)? = completions.first?.1 else { return XCTFail("\(completions)") }
        XCTAssertEqual(ads.map { $0.payloadJSON }, [#"{"headline":"x"}"#, #"{"headline":"y"}"#, #"{"headline":"z"}"#])
        XCTAssertEqual(Set(ads.map(\.id)).count, 3)
        XCTAssertFalse(ads.map(\.id).contains(object))
        XCTAssertEqual(effects.filter { if case .show(object, _, _) = $0 { true } else { false } }.count, 1, "ad_show once per object")
        effects += engine.report(.impression, for: ads[1].id, now: now).1
        XCTAssertTrue(effects.contains(.notify(object, plugin: "a", event: .impression)), "reports reach the object")
        for ad in ads.dropLast() { effects += engine.report(.close, for: ad.id, now: now).1 }
        XCTAssertFalse(effects.contains(.destroy(object, plugin: "a")), "not while one of its ads is out")
        effects += engine.report(.close, for: ads.last!.id, now: now).1
        XCTAssertTrue(effects.contains(.destroy(object, plugin: "a")))
    }

    func testNativeCountsOutsideOneToTenAndOtherBadParametersAreRefused() {
        start([slot("n", .native, entries: [("a", .seconds(1))]), slot("b", .banner, entries: [("a", .seconds(1))]),
               SlotConfig(id: "i", format: .interstitial, waterfall: [WaterfallEntry(plugin: "a")])])
        for count in [0, 11] {
            guard case .failure(.invalidParameter(name: "count", _)) = engine.load(slot: "n", LoadParameters(count: count), privacy: nil, request: 1, now: now).0
            else { return XCTFail("count \(count) accepted") }
        }
        guard case .failure(.invalidParameter(name: "count", _)) = engine.load(slot: "b", LoadParameters(count: 2), privacy: nil, request: 1, now: now).0
        else { return XCTFail("a banner of 2") }
        guard case .failure(.invalidParameter(name: "slot", _)) = engine.load(slot: "i", LoadParameters(), privacy: nil, request: 1, now: now).0
        else { return XCTFail("Load of a preloaded slot") }
        guard case .failure(.slotNotFound("zz")) = engine.load(slot: "zz", LoadParameters(), privacy: nil, request: 1, now: now).0
        else { return XCTFail("unknown slot") }
    }

    func testANativeAdWithoutAHeadlineIsAPluginFaultAndTheNextEntryServes() {
        start([slot("n", .native, entries: [("a", .seconds(1)), ("b", .seconds(1))])])
        effects += engine.load(slot: "n", LoadParameters(count: 1), privacy: nil, request: 4, now: now).1
        report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, tracksItself: false, items: [item(nil)]), loads[0].adID)
        XCTAssertEqual(engine.slotStatuses(at: now)[0].counters.contractViolations, 1)
        XCTAssertEqual(loads.last?.plugin, "b")
        report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, tracksItself: false, items: [item("ok")]), loads[1].adID)
        guard case .success(let ads)? = completions.first?.1 else { return XCTFail("\(completions)") }
        XCTAssertEqual(ads.count, 1)
    }
}
