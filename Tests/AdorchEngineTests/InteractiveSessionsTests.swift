import XCTest

@testable import AdorchEngine

/// Interactive sessions with a manual clock: the lifecycle, exactly one terminal event, the
/// ad-free-pod bookkeeping and both timeouts.
final class InteractiveSessionsTests: XCTestCase {
    private var sessions = InteractiveSessions(memory: .seconds(60))
    private var now = Moment(nanoseconds: 5_000_000_000)
    private var effects: [Effect] = []
    private let slot = SlotConfig(id: "i", format: .interactive, buffer: 0, waterfall: [WaterfallEntry(plugin: "p", adUnitID: "u")],
                                  fetchTimeout: .seconds(2), startTimeout: .seconds(3))
    /// The uid of the app that makes the sessions.
    private let app: UInt32 = 1000
    private let request = InteractiveRequest(creativeURL: "https://x.invalid/c.js", adParametersJSON: #"{"k":1}"#, slotType: .midroll)

    private func initiate(_ id: AdID) throws {
        effects += try sessions.initiate(id, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: app, now: now).get()
    }

    private func report(_ report: PluginReport, _ id: AdID) {
        effects += sessions.pluginReported(report, for: id, from: "p", now: now)
    }

    private func event(_ name: String, _ id: AdID, detail: String? = nil) { report(.other(name: name, detailJSON: detail), id) }

    private func fetched(_ id: AdID) {
        report(.loaded(payloadJSON: #"{"campaign_name":"c"}"#, expiresIn: nil, price: nil), id)
    }

    private func advance(_ d: Duration) {
        now = now + d
        effects += sessions.advance(to: now)
    }

    private var sessionEvents: [EngineEvent] {
        effects.compactMap { if case .emit(let e) = $0, e.kind == .session { e } else { nil } }
    }

    private var names: [String] { sessionEvents.compactMap(\.sessionEvent) }

    private var terminals: [EngineEvent] { sessionEvents.filter(\.terminal) }

    private var starts: Int { effects.filter { if case .startSession = $0 { true } else { false } }.count }

    private var destroys: [AdID] { effects.compactMap { if case .destroy(let id, _) = $0 { id } else { nil } } }

    func testInitFetchesAtOnceWithTheRequestAndTheFetchDeadline() throws {
        try initiate(7)
        guard case .load(let order)? = effects.first else { return XCTFail("expected a load, got \(effects)") }
        XCTAssertEqual(order.adID, 7)
        XCTAssertEqual(order.format, .interactive)
        XCTAssertEqual(order.interactive, request)
        XCTAssertEqual(order.deadline, now + .seconds(2))
        XCTAssertEqual(order.entry.timeout, .seconds(2), "the plugin hears the fetch timeout as its request timeout")
        XCTAssertEqual(sessions.nextWakeup(after: now), now + .seconds(2))
    }

    func testTheWholePathWithAnEarlyStartAndTheCreditOnTheTerminalEvent() throws {
        try initiate(1)
        effects += try sessions.start(1, by: app, now: now).get()
        XCTAssertEqual(starts, 0, "an early Start waits for the fetch")
        fetched(1)
        XCTAssertEqual(starts, 1, "the unit starts as soon as the fetch completed")
        for name in ["ads_available", "started", "opt_in", "user_cancel", "opt_in", "ad_free_pod", "completed"] { event(name, 1) }
        XCTAssertEqual(names, ["fetch_complete", "ads_available", "started", "opt_in", "user_cancel", "opt_in", "ad_free_pod", "completed"])
        XCTAssertEqual(terminals.count, 1)
        XCTAssertEqual(terminals.first?.sessionEvent, "completed")
        XCTAssertEqual(terminals.first?.adFreePod, true, "the credit came before the end")
        XCTAssertEqual(destroys, [1], "the session's object goes with its terminal event")
        XCTAssertEqual(sessions.counters["i"]?.completed, 1)
        XCTAssertEqual(sessions.counters["i"]?.adFreePods, 1)
        XCTAssertEqual(try? sessions.start(1, by: app, now: now).get(), nil)
        XCTAssertEqual(sessions.control(.pause, 1, by: app).failureValue, .sessionNotFound(1))
        XCTAssertEqual(sessions.stop(1, by: app, now: now).failureValue, .sessionNotFound(1))
    }

    func testOptingOutEndsWithoutTheCredit() throws {
        try initiate(1)
        fetched(1)
        effects += try sessions.start(1, by: app, now: now).get()
        XCTAssertEqual(starts, 1, "a Start after the fetch starts at once")
        for name in ["started", "opt_out", "completed"] { event(name, 1) }
        XCTAssertEqual(terminals.map(\.adFreePod), [false])
    }

    func testOnlyTheFirstTerminalEventCountsAndLaterReportsAreIgnored() throws {
        try initiate(1)
        fetched(1)
        effects += try sessions.start(1, by: app, now: now).get()
        event("started", 1)
        event("error", 1, detail: #"{"message":"boom"}"#)
        // Crossing the destroy on its way: allowed, dropped silently.
        event("completed", 1)
        XCTAssertEqual(terminals.map { $0.sessionEvent }, ["error"])
        XCTAssertTrue(effects.allSatisfy { if case .emit(let e) = $0 { e.kind != .callbackIgnored } else { true } })
        report(.destroyed, 1)
        // After the plugin's ad_destroy returned, a report is the plugin's fault.
        event("ad_free_pod", 1)
        XCTAssertEqual(terminals.count, 1)
        XCTAssertEqual(sessions.counters["i"]?.ignoredCallbacks, 1)
        XCTAssertTrue(sessions.owns(1), "an ended session's id is remembered for late reports")
        advance(.seconds(61))
        XCTAssertFalse(sessions.owns(1), "and forgotten after a while")
    }

    func testNoFillIsNoAdsAvailableAndOtherFailuresAreErrors() throws {
        try initiate(1)
        report(.failed(.noFill, networkCode: 20001, message: "no ads"), 1)
        try initiate(2)
        report(.failed(.network, networkCode: -2, message: "unreachable"), 2)
        try initiate(3)
        report(.loadedInvalid(reason: "not JSON"), 3)
        XCTAssertEqual(terminals.map { $0.sessionEvent }, ["no_ads_available", "error", "error"])
        XCTAssertEqual(terminals.map(\.errorCode), [nil, .network, .pluginFault])
        XCTAssertEqual(destroys, [1, 2, 3])
        XCTAssertEqual(sessions.counters["i"]?.noAds, 1)
        XCTAssertEqual(sessions.counters["i"]?.errors, 2)
        XCTAssertEqual(sessions.counters["i"]?.contractViolations, 1)
    }

    func testTheFetchTimeoutStopsTheSessionWithATerminalError() throws {
        try initiate(1)
        advance(.milliseconds(1999))
        XCTAssertTrue(terminals.isEmpty)
        advance(.milliseconds(1))
        XCTAssertEqual(terminals.count, 1)
        XCTAssertEqual(terminals.first?.sessionEvent, "error")
        XCTAssertEqual(terminals.first?.errorCode, .timeout)
        XCTAssertTrue(terminals.first?.message?.contains("fetch timeout") == true, "\(terminals)")
        XCTAssertEqual(destroys, [1])
        XCTAssertEqual(sessions.counters["i"]?.fetchTimeouts, 1)
        fetched(1)
        XCTAssertEqual(names, ["error"], "a fetch after the timeout is not a session event")
        XCTAssertEqual(sessions.start(1, by: app, now: now).failureValue, .sessionNotFound(1))
    }

    func testTheStartTimeoutRunsFromStartUntilStarted() throws {
        try initiate(1)
        advance(.seconds(1))
        fetched(1)
        advance(.seconds(10))
        XCTAssertTrue(terminals.isEmpty, "no start timeout before Start: the app may preload long before the break")
        effects += try sessions.start(1, by: app, now: now).get()
        XCTAssertEqual(sessions.nextWakeup(after: now), now + .seconds(3))
        advance(.seconds(3))
        XCTAssertEqual(terminals.map { $0.sessionEvent }, ["error"])
        XCTAssertTrue(terminals.first?.message?.contains("start timeout") == true)
        XCTAssertEqual(sessions.counters["i"]?.startTimeouts, 1)

        try initiate(2)
        fetched(2)
        effects += try sessions.start(2, by: app, now: now).get()
        advance(.seconds(2))
        event("started", 2)
        advance(.seconds(30))
        XCTAssertEqual(terminals.count, 1, "started in time: the session runs as long as the viewer wants")
    }

    func testStopEndsTheSessionWithStoppedAndTheIdIsNeverValidAgain() throws {
        try initiate(1)
        fetched(1)
        effects += try sessions.start(1, by: app, now: now).get()
        event("started", 1)
        event("ad_free_pod", 1)
        effects += try sessions.stop(1, by: app, now: now).get()
        XCTAssertEqual(terminals.map { $0.sessionEvent }, ["stopped"])
        XCTAssertEqual(terminals.first?.adFreePod, true)
        XCTAssertEqual(destroys, [1])
        for failure in [sessions.start(1, by: app, now: now).failureValue, sessions.control(.resume, 1, by: app).failureValue, sessions.stop(1, by: app, now: now).failureValue] {
            XCTAssertEqual(failure, .sessionNotFound(1))
        }
    }

    func testPauseAndResumeReachThePluginOnceEach() throws {
        try initiate(1)
        for control in [SessionControl.pause, .pause, .resume, .resume, .pause] { effects += try sessions.control(control, 1, by: app).get() }
        let sent = effects.compactMap { if case .controlSession(_, _, let c) = $0 { c } else { nil } }
        XCTAssertEqual(sent, [.pause, .resume, .pause])
    }

    func testAStartedBeforeStartAndAStartTwiceAreRefused() throws {
        try initiate(1)
        fetched(1)
        event("started", 1)
        XCTAssertFalse(names.contains("started"))
        XCTAssertEqual(sessions.counters["i"]?.ignoredCallbacks, 1)
        effects += try sessions.start(1, by: app, now: now).get()
        XCTAssertEqual(sessions.start(1, by: app, now: now).failureValue, .invalidParameter(name: "session_id", reason: "the session was started already"))
    }

    func testARefusedStartIsATerminalError() throws {
        try initiate(1)
        fetched(1)
        effects += try sessions.start(1, by: app, now: now).get()
        effects += sessions.startRefused(1, now: now)
        XCTAssertEqual(terminals.map { $0.sessionEvent }, ["error"])
        XCTAssertEqual(terminals.first?.errorCode, .notReady)
    }

    func testRefusalsBeforeAnySession() {
        let banner = SlotConfig(id: "b", format: .banner, waterfall: slot.waterfall)
        XCTAssertEqual(sessions.initiate(1, slot: banner, plugin: banner.waterfall[0], viewer: nil, request: request, owner: app, now: now).failureValue,
                       .invalidParameter(name: "slot", reason: "b is a banner slot: its ads are loaded on demand with Load"))
        XCTAssertEqual(sessions.initiate(1, slot: slot, plugin: nil, viewer: nil, request: request, owner: app, now: now).failureValue,
                       .unavailable(slot: "i", reason: "no plugin of i's waterfall that runs interactive sessions is loaded"))
        var small = InteractiveSessions(maxLive: 1)
        XCTAssertNotNil(try? small.initiate(1, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: app, now: now).get())
        XCTAssertEqual(small.initiate(2, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: app, now: now).failureValue,
                       .unavailable(slot: "i", reason: "1 sessions are live already: stop one first"))
    }

    func testShutdownAndReloadEndLiveSessionsWithAReason() throws {
        try initiate(1)
        try initiate(2)
        effects += sessions.endAll(where: { _, plugin in plugin == "p" }, reason: "the daemon is stopping", now: now)
        XCTAssertEqual(terminals.map { $0.message }, ["the daemon is stopping", "the daemon is stopping"])
        XCTAssertEqual(Set(destroys), [1, 2])
        // Ended sessions are remembered a minute (late plugin reports), then forgotten.
        XCTAssertEqual(sessions.nextWakeup(after: now + .seconds(61)), now + .seconds(61), "forgetting them is due")
        _ = sessions.advance(to: now + .seconds(61))
        XCTAssertNil(sessions.nextWakeup(after: now + .seconds(61)))
    }

    func testARendererThatNeverEndsIsEndedAfterTheMaximumLife() throws {
        var bounded = InteractiveSessions(maxLife: .seconds(100))
        effects += try bounded.initiate(1, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: app, now: now).get()
        effects += bounded.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), for: 1, from: "p", now: now)
        effects += try bounded.start(1, by: app, now: now).get()
        effects += bounded.pluginReported(.other(name: "started", detailJSON: nil), for: 1, from: "p", now: now)
        effects += bounded.advance(to: now + .seconds(100))
        XCTAssertEqual(terminals.map { $0.sessionEvent }, ["error"])
    }

    // MARK: Budgets per uid and ownership

    func testASessionIsItsMakersAndRootsOnly() throws {
        try initiate(1)
        let other = app + 1
        XCTAssertEqual(sessions.start(1, by: other, now: now).failureValue, .notOwner(app))
        XCTAssertEqual(sessions.control(.pause, 1, by: other).failureValue, .notOwner(app))
        XCTAssertEqual(sessions.stop(1, by: other, now: now).failureValue, .notOwner(app))
        XCTAssertTrue(effects.count == 1 && names.isEmpty, "a refused call changes nothing: \(effects)")
        effects += try sessions.control(.pause, 1, by: app).get()
        effects += try sessions.stop(1, by: 0, now: now).get()
        XCTAssertEqual(terminals.map(\.sessionEvent), ["stopped"], "root, the operator, may stop any session")
    }

    func testEachUidHasItsOwnSessionsBudgetAndRootNone() throws {
        sessions.budgets.maxSessions = 2
        try initiate(1)
        try initiate(2)
        XCTAssertEqual(sessions.initiate(3, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: app, now: now).failureValue,
                       .tooManySessions(uid: app, live: 2, limit: 2))
        XCTAssertEqual(sessions.liveCount(in: "i"), 2, "the refused session was never made")
        XCTAssertNoThrow(try sessions.initiate(3, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: app + 1, now: now).get())
        for id: AdID in 4...6 {
            XCTAssertNoThrow(try sessions.initiate(id, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: 0, now: now).get())
        }
        effects += try sessions.stop(1, by: app, now: now).get()
        try initiate(7)
    }

    func testASessionNeverStartedEndsAfterTheUnstartedTimeout() throws {
        sessions.budgets.unstartedSessionTimeout = .seconds(30)
        try initiate(1)
        try initiate(2)
        fetched(1)
        fetched(2)
        effects += try sessions.start(2, by: app, now: now).get()
        event("started", 2)
        XCTAssertEqual(sessions.nextWakeup(after: now), now + .seconds(30))
        advance(.seconds(29))
        XCTAssertTrue(terminals.isEmpty)
        advance(.seconds(1))
        XCTAssertEqual(terminals.map(\.adID), [1], "only the session never started")
        XCTAssertEqual(terminals.first?.sessionEvent, "error")
        XCTAssertEqual(terminals.first?.errorCode, .timeout)
        XCTAssertEqual(terminals.first?.message, "unstarted timeout: no Start within 30.0 seconds of InitInteractive")
        XCTAssertEqual(destroys, [1])
        XCTAssertEqual(sessions.counters["i"]?.unstartedTimeouts, 1)
        XCTAssertEqual(sessions.start(1, by: app, now: now).failureValue, .sessionNotFound(1))
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
