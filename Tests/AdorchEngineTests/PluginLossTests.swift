import XCTest

@testable import AdorchEngine

/// docs/isolation.md, "When a plugin crashes": an isolated plugin's host died. Its loads fail
/// as plugin_fault, its ads end and are never shown, nothing is destroyed (the objects died
/// with the process), no load goes to it until it is back; every other plugin is untouched.
final class PluginLossTests: XCTestCase {
    private let start = Moment(nanoseconds: 1_000_000_000)

    private func loads(_ effects: [Effect]) -> [LoadOrder] { effects.compactMap { if case .load(let o) = $0 { o } else { nil } } }

    private func engine(_ slots: [SlotConfig], plugins: Set<String> = ["a", "b"]) -> (Engine, [LoadOrder]) {
        var engine = Engine(slots: slots, plugins: plugins, settings: .init(backoffJitter: 0), seed: 3)
        let orders = loads(engine.advance(to: start))
        return (engine, orders)
    }

    private func slot(_ id: String, buffer: Int, _ plugins: String...) -> SlotConfig {
        SlotConfig(id: id, format: .interstitial, buffer: buffer, ttl: .seconds(600),
                   waterfall: plugins.map { WaterfallEntry(plugin: $0, timeout: .seconds(5)) })
    }

    func testACrashFailsItsLoadsEndsItsAdsAndLeavesTheOtherPluginAlone() {
        var (engine, orders) = engine([slot("crashy", buffer: 2, "a"), slot("steady", buffer: 1, "b")])
        let ofA = orders.filter { $0.plugin == "a" }, ofB = orders.filter { $0.plugin == "b" }
        XCTAssertEqual(ofA.count, 2)
        XCTAssertEqual(ofB.count, 1)
        _ = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), for: ofA[0].adID, from: "a", now: start)
        _ = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), for: ofB[0].adID, from: "b", now: start)
        let shown = engine.show(slot: "crashy", userID: "u", privacy: nil, now: start)
        guard case .success(let open) = shown.0 else { return XCTFail("a's ready ad is shown before the crash: \(shown.0)") }
        _ = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), for: loads(shown.1)[0].adID, from: "a", now: start)

        let at = start + .milliseconds(10)
        let effects = engine.pluginLost("a", reason: "its plugin host died: killed by SIGSEGV", now: at)
        let failed = effects.compactMap { if case .emit(let e) = $0, e.kind == .adFailed { e } else { nil } }
        XCTAssertEqual(failed.map(\.adID), [ofA[1].adID], "the load in flight failed")
        XCTAssertEqual(failed.first?.errorCode, .pluginFault)
        XCTAssertTrue(failed.first?.message?.contains("killed by SIGSEGV") == true, failed.first?.message ?? "")
        XCTAssertFalse(effects.contains { if case .destroy(_, "a") = $0 { true } else { false } }, "nothing is left to destroy")
        XCTAssertTrue(loads(effects).isEmpty, "no load goes to a plugin whose host is down: \(loads(effects))")
        XCTAssertFalse(engine.isShown(open.id), "a shown ad of the dead host is ended too")

        let statuses = engine.slotStatuses(at: at)
        XCTAssertEqual(statuses.first { $0.config.id == "crashy" }?.ready, 0, "its ready ad ended")
        XCTAssertEqual(statuses.first { $0.config.id == "crashy" }?.counters.errors, 1)
        XCTAssertEqual(engine.show(slot: "crashy", userID: "u", privacy: nil, now: at).0, .failure(.noAdReady(slot: "crashy")), "never shown")
        XCTAssertEqual(statuses.first { $0.config.id == "steady" }?.ready, 1, "b's ad is untouched")
        guard case .success(let other) = engine.show(slot: "steady", userID: "u", privacy: nil, now: at).0 else { return XCTFail("b still serves") }
        XCTAssertEqual(other.id, ofB[0].adID)

        // Late reports for the dead host's ads are not held against the new one.
        _ = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), for: ofA[0].adID, from: "a", now: at)
        XCTAssertEqual(engine.slotStatuses(at: at).first { $0.config.id == "crashy" }?.ready, 0)

        let back = engine.pluginRestored("a", now: at + .milliseconds(20))
        XCTAssertEqual(loads(back).map(\.plugin), ["a", "a"], "it fills again once its host is back")
    }

    func testAWaterfallGoesOnToTheNextNetworkAtOnce() {
        var (engine, orders) = engine([slot("s", buffer: 1, "a", "b")])
        XCTAssertEqual(orders.map(\.plugin), ["a"])
        let effects = engine.pluginLost("a", reason: "killed by SIGABRT", now: start + .milliseconds(5))
        XCTAssertEqual(loads(effects).map(\.plugin), ["b"], "the next entry loads in the same turn: \(effects)")
        let more = engine.advance(to: start + .seconds(60))
        XCTAssertFalse(loads(more).contains { $0.plugin == "a" }, "nothing goes to a while it is down")
    }

    func testAReloadThatRemovesTheDownPluginClearsIt() {
        var (engine, _) = engine([slot("s", buffer: 1, "a")])
        _ = engine.pluginLost("a", reason: "exited with status 1", now: start)
        _ = engine.setAvailablePlugins([], now: start)
        let effects = engine.setAvailablePlugins(["a"], now: start + .seconds(1))
        XCTAssertEqual(loads(effects).map(\.plugin), ["a"], "loaded again by a reload, it is up")
    }
}

/// The supervisor's rule: restart at once after a first crash, then after a doubling
/// backoff; at the budget's last crash within the window, disabled until a reload.
final class PluginSupervisorTests: XCTestCase {
    private let t0 = Moment(nanoseconds: 5_000_000_000)

    func testRestartsAtOnceThenBacksOffThenDisables() {
        var s = PluginSupervisor()
        s.supervise("p", policy: .init(crashBudget: 4, window: .seconds(60)))
        XCTAssertEqual(s.crashed("p", exit: "killed by SIGSEGV", now: t0), .restarting(at: t0))
        XCTAssertEqual(s.nextWakeup(after: t0), t0)
        XCTAssertEqual(s.dueRestarts(at: t0), ["p"])
        XCTAssertEqual(s.state(of: "p"), .starting)
        XCTAssertEqual(s.dueRestarts(at: t0), [], "one restart at a time")
        s.restarted("p")

        let t1 = t0 + .seconds(1)
        XCTAssertEqual(s.crashed("p", exit: "killed by SIGABRT", now: t1), .restarting(at: t1 + .milliseconds(250)))
        XCTAssertEqual(s.dueRestarts(at: t1 + .milliseconds(249)), [])
        XCTAssertEqual(s.dueRestarts(at: t1 + .milliseconds(250)), ["p"])
        s.restarted("p")
        let t2 = t1 + .seconds(1)
        XCTAssertEqual(s.crashed("p", exit: "x", now: t2), .restarting(at: t2 + .milliseconds(500)))
        s.restarted("p")
        guard case .disabled(let reason) = s.crashed("p", exit: "stopped answering", now: t2 + .seconds(1)) else {
            return XCTFail("the fourth crash in the window disables it")
        }
        XCTAssertTrue(reason.contains("4 crashes within 60") && reason.contains("stopped answering"), reason)
        XCTAssertNil(s.nextWakeup(after: t2), "a disabled plugin is not restarted")
        XCTAssertEqual(s.records["p"]?.crashes, 4)

        s.supervise("p", policy: .init(crashBudget: 4, window: .seconds(60)))
        XCTAssertEqual(s.state(of: "p"), .running, "a reload starts it again")
        XCTAssertEqual(s.crashed("p", exit: "x", now: t2 + .seconds(2)), .restarting(at: t2 + .seconds(2)), "with a new window")
        XCTAssertEqual(s.records["p"]?.crashes, 5, "its count goes on")
    }

    func testCrashesOutsideTheWindowDoNotCount() {
        var s = PluginSupervisor()
        s.supervise("p", policy: .init(crashBudget: 2, window: .seconds(10)))
        _ = s.crashed("p", exit: "x", now: t0)
        s.restarted("p")
        XCTAssertEqual(s.crashed("p", exit: "x", now: t0 + .seconds(10)), .restarting(at: t0 + .seconds(10)),
                       "the first crash left the window: this is a first crash again")
    }

    func testTheBackoffDoublesUpToItsCap() {
        XCTAssertEqual(PluginSupervisor.backoff(afterCrashes: 1), .zero)
        XCTAssertEqual(PluginSupervisor.backoff(afterCrashes: 2), .milliseconds(250))
        XCTAssertEqual(PluginSupervisor.backoff(afterCrashes: 5), .seconds(2))
        XCTAssertEqual(PluginSupervisor.backoff(afterCrashes: 100), PluginSupervisor.Policy.maxBackoff)
    }
}
