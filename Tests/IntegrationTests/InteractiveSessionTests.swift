import AdorchVarlink
import Foundation
import XCTest

/// Issue 5, acceptance 4 and 5: interactive sessions through the real daemon, socket and sim
/// plugin's scripted renderer.
final class InteractiveSessionTests: XCTestCase {
    /// Each scripted viewer path of the sim renderer, the events a subscriber must hear for
    /// it, and whether it earns the ad-free pod.
    static let paths: [(script: String, events: [String], adFreePod: Bool)] = [
        ("opt_in_complete", ["fetch_complete", "ads_available", "started", "opt_in", "ad_free_pod", "completed"], true),
        ("opt_out", ["fetch_complete", "ads_available", "started", "opt_out", "completed"], false),
        ("countdown", ["fetch_complete", "ads_available", "started", "opt_out", "completed"], false),
        ("cancel_opt_in", ["fetch_complete", "ads_available", "started", "opt_in", "user_cancel", "opt_in", "ad_free_pod", "completed"], true),
        ("popup", ["fetch_complete", "ads_available", "started", "opt_in", "popup_website", "ad_free_pod", "completed"], true),
        ("skip_card", ["fetch_complete", "ads_available", "started", "skip_card_shown", "ad_free_pod", "completed"], true),
        ("error", ["fetch_complete", "ads_available", "started", "error"], false),
        ("no_ads", ["no_ads_available"], false),
    ]

    static func slot(_ id: String, _ parameter: String, fetchTimeoutMS: Int = 5000, startTimeoutMS: Int = 10_000) -> String {
        """
        [[slots]]
        id = "\(id)"
        format = "interactive"
        fetch_timeout_ms = \(fetchTimeoutMS)
        start_timeout_ms = \(startTimeoutMS)
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "\(parameter)"

        """
    }

    private func initSession(_ daemon: DaemonProcess, _ slot: String, slotType: String = "midroll") throws -> JSONValue {
        let reply = try daemon.call("io.adorch.Ads.InitInteractive", [
            "slot": .string(slot), "creative_url": "https://creative.invalid/unit.js?a=\"b\"",
            "ad_parameters": ["vast_config_url": "https://x.invalid/vast", "user": ["id": 7]], "slot_type": .string(slotType),
        ])
        return try XCTUnwrap(reply["session_id"])
    }

    /// Reads the subscription until the session's terminal event; returns the session's events.
    private func eventsUntilTerminal(_ events: VarlinkClient, session: JSONValue, timeout: Duration = .seconds(10)) throws -> [JSONValue] {
        let deadline = ContinuousClock.now + timeout
        var seen: [JSONValue] = []
        while ContinuousClock.now < deadline {
            guard let reply = try? events.nextReply() else { continue }
            guard let event = reply.parameters["event"], event["session_id"] == session else { continue }
            XCTAssertEqual(event["kind"], "session_event")
            seen.append(event)
            if event["terminal"] == true { return seen }
        }
        throw TestFailure("no terminal event for session \(session) within \(timeout); heard \(seen.compactMap { $0["name"]?.stringValue })")
    }

    private func subscribe(_ daemon: DaemonProcess) throws -> VarlinkClient {
        let events = try daemon.client(timeout: .milliseconds(250))
        let first = try events.call("io.adorch.Ads.Subscribe", [:], more: true)
        XCTAssertEqual(first.parameters["event"]?["kind"], "subscribed")
        return events
    }

    private func expectSessionNotFound(_ daemon: DaemonProcess, _ session: JSONValue, file: StaticString = #filePath, line: UInt = #line) throws {
        for method in ["Start", "Pause", "Resume", "Stop"] {
            let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.\(method)", ["session_id": session])
            XCTAssertEqual(error, "io.adorch.Ads.SessionNotFound", method, file: file, line: line)
            XCTAssertEqual(parameters["session_id"], session, file: file, line: line)
        }
    }

    func testEachScriptedViewerPathGivesItsEventsWithExactlyOneTerminalEvent() throws {
        let slots = Self.paths.map { Self.slot("i_\($0.script)", "script=\($0.script) latency_ms=5 step_ms=5") }.joined()
        let daemon = try DaemonProcess(config: simConfig(slots: slots))
        let events = try subscribe(daemon)
        var sessions: [String: JSONValue] = [:]
        for path in Self.paths {
            // Start right after init: the daemon holds it until the fetch completed.
            let session = try initSession(daemon, "i_\(path.script)", slotType: path.script == "skip_card" ? "midroll" : "preroll")
            sessions[path.script] = session
            _ = try daemon.call("io.adorch.Ads.Start", ["session_id": session])
            let heard = try eventsUntilTerminal(events, session: session)
            XCTAssertEqual(heard.compactMap { $0["name"]?.stringValue }, path.events, path.script)
            XCTAssertEqual(heard.filter { $0["terminal"] == true }.count, 1, "\(path.script): one terminal event, the last")
            XCTAssertEqual(heard.last?["ad_free_pod"], .bool(path.adFreePod), "\(path.script): ad_free_pod on the terminal event")
            XCTAssertTrue(heard.allSatisfy { $0["slot"]?.stringValue == "i_\(path.script)" && $0["network"] == "sim" })
            let byName = Dictionary(heard.map { ($0["name"]?.stringValue ?? "", $0) }, uniquingKeysWith: { first, _ in first })
            if let started = byName["started"] { XCTAssertNotNil(started["detail"]?["campaign_name"]?.stringValue, path.script) }
            if let optIn = byName["opt_in"] { XCTAssertEqual(optIn["detail"]?["ad_id"], 4242) }
            if let completed = byName["completed"] { XCTAssertNotNil(completed["detail"]?["time_spent_s"]?.intValue) }
            if let fetched = byName["fetch_complete"] {
                XCTAssertEqual(fetched["detail"]?["creative_url"], "https://creative.invalid/unit.js?a=\"b\"", "the init parameters reached the plugin")
                XCTAssertEqual(fetched["detail"]?["slot_type"], path.script == "skip_card" ? "midroll" : "preroll")
            }
            switch path.script {
            case "opt_out": XCTAssertEqual(byName["opt_out"]?["detail"]?["user_initiated"], true)
            case "countdown": XCTAssertEqual(byName["opt_out"]?["detail"]?["user_initiated"], false, "the countdown ran out")
            case "popup": XCTAssertEqual(byName["popup_website"]?["detail"]?["url"], "https://sim.invalid/landing")
            case "error": XCTAssertEqual(heard.last?["message"], "sim: the renderer failed on purpose (script=error)")
            default: break
            }
            try expectSessionNotFound(daemon, session)
        }
        try daemon.waitFor("every session's plugin object destroyed") { try daemon.simStats()["live"] == 0 }
        let sim = try daemon.simStats()
        XCTAssertEqual(sim["contract_violations"], 0, "\(sim)")
        XCTAssertEqual(sim["creates"], .int(Int64(Self.paths.count)), "one fresh object per session")
        for path in Self.paths {
            let counters = try daemon.slotStatus("i_\(path.script)")["sessions"]
            XCTAssertEqual(counters?["live"], 0)
            XCTAssertEqual(counters?["initiated"], 1)
            XCTAssertEqual(counters?["ad_free_pods"], path.adFreePod ? 1 : 0)
        }
        // The journal side: each end is logged with its session id (the daemon's log here).
        let log = daemon.log
        XCTAssertTrue(log.contains("session \(sessions["opt_in_complete"]!.stringValue!) in i_opt_in_complete from sim: completed"), log)
    }

    func testBothTimeoutsEndTheSessionWithANamedErrorAndCleanUp() throws {
        let daemon = try DaemonProcess(config: simConfig(slots:
            Self.slot("hang_fetch", "script=hang_fetch latency_ms=5", fetchTimeoutMS: 300)
            + Self.slot("hang_start", "script=hang_start latency_ms=5 step_ms=5", startTimeoutMS: 300)))
        let events = try subscribe(daemon)

        let fetching = try initSession(daemon, "hang_fetch")
        let fetchEnd = try eventsUntilTerminal(events, session: fetching)
        XCTAssertEqual(fetchEnd.compactMap { $0["name"]?.stringValue }, ["error"])
        XCTAssertEqual(fetchEnd.last?["error"], "timeout")
        XCTAssertTrue(fetchEnd.last?["message"]?.stringValue?.hasPrefix("fetch timeout") == true, "\(fetchEnd)")
        try expectSessionNotFound(daemon, fetching)

        let starting = try initSession(daemon, "hang_start")
        _ = try daemon.call("io.adorch.Ads.Start", ["session_id": starting])
        let startEnd = try eventsUntilTerminal(events, session: starting)
        XCTAssertEqual(startEnd.compactMap { $0["name"]?.stringValue }, ["fetch_complete", "ads_available", "error"])
        XCTAssertEqual(startEnd.last?["error"], "timeout")
        XCTAssertTrue(startEnd.last?["message"]?.stringValue?.hasPrefix("start timeout") == true, "\(startEnd)")
        try expectSessionNotFound(daemon, starting)

        // Cleaned up: the plugin's objects are destroyed and the counters say why.
        try daemon.waitFor("both timed-out sessions destroyed in the plugin") { try daemon.simStats()["destroys"] == 2 }
        XCTAssertEqual(try daemon.simStats()["live"], 0)
        XCTAssertEqual(try daemon.slotStatus("hang_fetch")["sessions"]?["fetch_timeouts"], 1)
        XCTAssertEqual(try daemon.slotStatus("hang_start")["sessions"]?["start_timeouts"], 1)
        XCTAssertEqual(try daemon.slotStatus("hang_start")["sessions"]?["live"], 0)
    }

    func testPauseHoldsTheRendererResumeContinuesAndStopEndsIt() throws {
        let daemon = try DaemonProcess(config: simConfig(slots:
            Self.slot("steps", "script=cancel_opt_in latency_ms=5 step_ms=5")
            + Self.slot("slow", "script=opt_in_complete latency_ms=5 step_ms=600000")))
        let events = try subscribe(daemon)

        // Paused before the break: Start shows the unit, but the viewer's steps wait for Resume.
        let session = try initSession(daemon, "steps")
        _ = try daemon.call("io.adorch.Ads.Pause", ["session_id": session])
        _ = try daemon.call("io.adorch.Ads.Pause", ["session_id": session])  // already paused: nothing new reaches the plugin
        try daemon.waitFor("the pause reached the plugin") { try daemon.simStats()["paused"] == 1 }
        _ = try daemon.call("io.adorch.Ads.Start", ["session_id": session])
        try daemon.waitFor("the start reached the plugin") { try daemon.simStats()["shows"] == 1 }
        XCTAssertEqual(try daemon.simStats()["notifies"], 1, "one pause, however often the app asked")
        let before = try daemon.call("io.adorch.Ads.ListEvents", ["slots": ["steps"], "limit": 50])["events"]?.arrayValue ?? []
        XCTAssertFalse(before.contains { $0["name"] == "started" }, "nothing runs while paused")
        _ = try daemon.call("io.adorch.Ads.Resume", ["session_id": session])
        let heard = try eventsUntilTerminal(events, session: session)
        XCTAssertEqual(heard.compactMap { $0["name"]?.stringValue },
                       ["fetch_complete", "ads_available", "started", "opt_in", "user_cancel", "opt_in", "ad_free_pod", "completed"])

        // Stop mid-unit: the last event is stopped, carrying the credit state; the object goes.
        let slow = try initSession(daemon, "slow")
        _ = try daemon.call("io.adorch.Ads.Start", ["session_id": slow])
        try daemon.waitFor("the slow unit started") {
            try (daemon.call("io.adorch.Ads.ListEvents", ["slots": ["slow"]])["events"]?.arrayValue ?? []).contains { $0["name"] == "started" }
        }
        _ = try daemon.call("io.adorch.Ads.Stop", ["session_id": slow])
        let stopped = try eventsUntilTerminal(events, session: slow)
        XCTAssertEqual(stopped.last?["name"], "stopped")
        XCTAssertEqual(stopped.last?["ad_free_pod"], false)
        try expectSessionNotFound(daemon, slow)
        try daemon.waitFor("the stopped session's object destroyed") { try daemon.simStats()["live"] == 0 }
        XCTAssertEqual(try daemon.slotStatus("slow")["sessions"]?["stopped"], 1)
    }

    func testASecondTerminalEventFromThePluginNeverReachesApps() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: Self.slot("twice", "script=opt_out latency_ms=5 step_ms=5 misbehave=twice")))
        let events = try subscribe(daemon)
        let session = try initSession(daemon, "twice")
        _ = try daemon.call("io.adorch.Ads.Start", ["session_id": session])
        XCTAssertEqual(try eventsUntilTerminal(events, session: session).last?["name"], "completed")
        // Once sim counts the stray terminal event as sent, the host has queued it: a call
        // queued after that sees every event it led to.
        try daemon.waitFor("the stray second terminal event sent") { try daemon.simStats()["misbehaviours"] == 1 }
        let all = try daemon.call("io.adorch.Ads.ListEvents", ["slots": ["twice"], "limit": 100])["events"]?.arrayValue ?? []
        let terminals = all.filter { $0["session_id"] == session && $0["terminal"] == true }
        XCTAssertEqual(terminals.count, 1, "\(all)")
    }

    func testBadCallsGetNamedErrorsAndChangeNothing() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: Self.slot("i", "latency_ms=5") + """
        [[slots]]
        id = "r"
        format = "banner"
        width = 320
        height = 50
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5"
        """))
        let good: [String: JSONValue] = ["slot": "i", "creative_url": "https://c.invalid/", "ad_parameters": [:], "slot_type": "preroll"]
        func expect(_ method: String, _ change: [String: JSONValue], _ error: String, _ parameter: String? = nil, line: UInt = #line) throws {
            let (got, parameters) = try daemon.callExpectingError(method, good.merging(change) { $1 })
            XCTAssertEqual(got, error, line: line)
            if let parameter { XCTAssertEqual(parameters["parameter"]?.stringValue, parameter, line: line) }
        }
        try expect("io.adorch.Ads.InitInteractive", ["slot_type": "postroll"], "io.adorch.Ads.InvalidParameter", "slot_type")
        try expect("io.adorch.Ads.InitInteractive", ["ad_parameters": "k=v"], "io.adorch.Ads.InvalidParameter", "ad_parameters")
        try expect("io.adorch.Ads.InitInteractive", ["creative_url": ""], "io.adorch.Ads.InvalidParameter", "creative_url")
        try expect("io.adorch.Ads.InitInteractive", ["slot": "r"], "io.adorch.Ads.InvalidParameter", "slot")
        try expect("io.adorch.Ads.InitInteractive", ["slot": "nope"], "io.adorch.Ads.SlotNotFound")
        try expect("io.adorch.Ads.InitInteractive", ["extra": 1], "org.varlink.service.InvalidParameter")
        let (showError, _) = try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "i"])
        XCTAssertEqual(showError, "io.adorch.Ads.InvalidParameter", "an interactive slot has no ads to Show")
        for id in ["", "nonsense", "00000000-1", "\(String(repeating: "9", count: 40))"] {
            try expectSessionNotFound(daemon, .string(id))
        }
        XCTAssertEqual(try daemon.simStats()["creates"], 0, "nothing reached the plugin")
        XCTAssertEqual(try daemon.slotStatus("i")["sessions"]?["initiated"], 0)
    }

    func testAReloadKeepsSessionsOfKeptSlotsAndEndsThoseOfRemovedOnes() throws {
        let kept = Self.slot("kept", "script=opt_out latency_ms=5 step_ms=5")
        let daemon = try DaemonProcess(config: simConfig(slots: kept + Self.slot("gone", "script=opt_out latency_ms=5 step_ms=600000")))
        let events = try subscribe(daemon)
        let keptSession = try initSession(daemon, "kept")
        let goneSession = try initSession(daemon, "gone")
        _ = try daemon.call("io.adorch.Ads.Start", ["session_id": goneSession])
        try simConfig(slots: kept).write(to: daemon.dir.appendingPathComponent("adorchd.toml"), atomically: true, encoding: .utf8)
        _ = try daemon.call("io.adorch.Manager.Reload")
        let gone = try eventsUntilTerminal(events, session: goneSession)
        XCTAssertEqual(gone.last?["name"], "error")
        XCTAssertEqual(gone.last?["message"], "the reload removed its slot or its plugin")
        try expectSessionNotFound(daemon, goneSession)
        _ = try daemon.call("io.adorch.Ads.Start", ["session_id": keptSession])
        XCTAssertEqual(try eventsUntilTerminal(events, session: keptSession).last?["name"], "completed", "a kept slot's session runs on")
    }

    func testAdorchctlRunsASessionToItsEnd() throws {
        let daemon = try DaemonProcess(config: simConfig(slots:
            Self.slot("good", "script=popup latency_ms=5 step_ms=5") + Self.slot("bad", "script=error latency_ms=5 step_ms=5")))
        let ctl = productsDirectory.appendingPathComponent("adorchctl").path
        let good = try runCommand(ctl, ["interactive", "run", "good", "--slot-type", "preroll", "--socket", daemon.socket])
        XCTAssertEqual(good.status, 0, good.stderr)
        let lines = good.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.dropFirst().map { String($0.prefix { $0 != " " && $0 != ":" }) },
                       ["fetch_complete", "ads_available", "started", "opt_in", "popup_website", "ad_free_pod", "completed", "ad_free_pod"],
                       good.stdout)
        XCTAssertEqual(lines.last, "ad_free_pod: yes, skip the pod's other ads")
        let bad = try runCommand(ctl, ["interactive", "run", "bad", "--socket", daemon.socket])
        XCTAssertEqual(bad.status, 1, "a session that did not complete fails the command")
        XCTAssertTrue(bad.stdout.contains("error {\"message\":\"sim: the renderer failed on purpose (script=error)\"}"), bad.stdout)
        let id = try runCommand(ctl, ["interactive", "init", "good", "--socket", daemon.socket]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try runCommand(ctl, ["interactive", "call", "stop", id, "--socket", daemon.socket]).status, 0)
        let again = try runCommand(ctl, ["interactive", "call", "stop", id, "--socket", daemon.socket])
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.stderr.contains("io.adorch.Ads.SessionNotFound"), again.stderr)
        let badJSON = try runCommand(ctl, ["interactive", "init", "good", "--ad-parameters", "[1]", "--socket", daemon.socket])
        XCTAssertTrue(badJSON.stderr.contains("--ad-parameters must be a JSON object"), badJSON.stderr)
    }

    func testTheDemoSlotOfTheDefaultConfigRunsASession() throws {
        let daemon = try DaemonProcess()
        let events = try subscribe(daemon)
        let slot = try XCTUnwrap(daemon.slots().first { $0["id"] == "interactive_main" })
        XCTAssertEqual(slot["format"], "interactive")
        let session = try initSession(daemon, "interactive_main")
        _ = try daemon.call("io.adorch.Ads.Start", ["session_id": session])
        let heard = try eventsUntilTerminal(events, session: session, timeout: .seconds(30))
        XCTAssertEqual(heard.compactMap { $0["name"]?.stringValue },
                       ["fetch_complete", "ads_available", "started", "opt_in", "ad_free_pod", "completed"])
        XCTAssertEqual(heard.last?["ad_free_pod"], true)
    }
}
