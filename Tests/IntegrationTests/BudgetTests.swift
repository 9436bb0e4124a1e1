import AdorchVarlink
import Foundation
import XCTest

/// Issue 20: the budgets per uid over the real socket. The tests run as root, which is
/// exempt, so the offending app is another uid: python3 under setpriv, one connection each.
final class BudgetTests: XCTestCase {
    /// Sends each call in turn on one connection and prints each reply on a line of its own.
    private static let client = """
    import json, sys
    sys.path.insert(0, sys.argv.pop(1))
    import varlink
    connection = varlink.Connection(sys.argv[1], timeout=20)
    for call in sys.argv[2:]:
        message = json.loads(call)
        print(json.dumps(connection.call(message["method"], message.get("parameters"))), flush=True)
    """

    /// The replies to `calls` (method, parameters) made in order by `uid`.
    private func calls(as uid: Int, _ daemon: DaemonProcess, _ calls: [(String, JSONValue)]) throws -> [JSONValue] {
        let messages = calls.map { JSONValue.object(["method": .string($0.0), "parameters": $0.1]).jsonString }
        let argv = try pythonClient(Self.client, as: uid, [daemon.socket] + messages)
        let run = try runCommand(argv[0], Array(argv.dropFirst()))
        let replies = run.stdout.split(separator: "\n").compactMap { JSONValue.parse(Data($0.utf8)) }
        // The tests index these replies: fewer of them fails the test here, not the process.
        guard run.status == 0, replies.count == calls.count else {
            throw daemon.diagnosis("\(replies.count) replies to \(calls.count) calls as uid \(uid) (exit \(run.status)): \(run.stdout)\(run.stderr)")
        }
        return replies
    }

    private func occurrences(of text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

    func testLoadsAreRateLimitedAndOpenAdsBudgetedPerUidAndRootIsExempt() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [limits]
        loads_per_second_per_uid = 0.01
        load_burst_per_uid = 4
        max_open_ads_per_uid = 2

        [[slots]]
        id = "b"
        format = "banner"
        width = 320
        height = 50
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"

        [[slots]]
        id = "s"
        format = "interstitial"
        buffer = 2
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """))
        try daemon.waitFor("s full") { try daemon.slotStatus("s")["ready"]?.intValue == 2 }
        let load: (String, JSONValue) = ("io.adorch.Ads.Load", ["slot": "b"])
        let greedy = try calls(as: 4321, daemon, Array(repeating: load, count: 6) + [("io.adorch.Ads.Show", ["slot": "s"])])
        XCTAssertEqual(greedy.map { $0["error"]?.stringValue }, [
            nil, nil, "io.adorch.Ads.TooManyOpenAds", "io.adorch.Ads.TooManyOpenAds",
            "io.adorch.Ads.RateLimited", "io.adorch.Ads.RateLimited", "io.adorch.Ads.TooManyOpenAds",
        ], "two ads, the budget; a burst of four Loads, then one every 100 s; a Show counts against the same budget")
        let refusal = try XCTUnwrap(greedy[2]["parameters"])
        XCTAssertEqual(refusal["budget"], "max_open_ads_per_uid")
        XCTAssertEqual(refusal["limit"]?.intValue, 2)
        XCTAssertEqual(refusal["open"]?.intValue, 2)
        XCTAssertEqual(refusal["message"]?.stringValue?.hasPrefix("uid 4321 holds 2 ads not yet closed, expired or ended"), true, "\(refusal)")
        XCTAssertGreaterThan(greedy[4]["parameters"]?["retry_after_ms"]?.intValue ?? 0, 1000)
        XCTAssertEqual(try daemon.slotStatus("s")["ready"]?.intValue, 2, "the refused Show took no ad")

        // Another uid has budgets of its own; root, the operator, has none.
        XCTAssertEqual(try calls(as: 4322, daemon, [load, load]).map { $0["error"] }, [nil, nil])
        for _ in 0..<5 { _ = try daemon.call("io.adorch.Ads.Load", ["slot": "b"]) }

        let limits = try daemon.status()["limits"]
        XCTAssertEqual(limits?["loads_rate_limited"]?.intValue, 2)
        XCTAssertEqual(limits?["open_ads_refused"]?.intValue, 3)
        XCTAssertEqual(limits?["max_open_ads_per_uid"]?.intValue, 2)
        XCTAssertEqual(limits?["loads_per_second_per_uid"]?.doubleValue, 0.01)
        XCTAssertEqual(limits?["load_burst_per_uid"]?.doubleValue, 4)
        // One journal line per uid and kind a minute, however often it is refused.
        XCTAssertEqual(occurrences(of: "Load rate limit: uid 4321 may load again in", in: daemon.log), 1, daemon.log)
        XCTAssertEqual(occurrences(of: "open ads budget: uid 4321 holds 2 ads", in: daemon.log), 1, daemon.log)
    }

    func testASessionIsItsMakersAndEachUidHasASessionsBudget() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [limits]
        max_sessions_per_uid = 2
        """ + "\n" + InteractiveSessionTests.slot("i", "script=opt_in_complete latency_ms=5 step_ms=5")))
        let initiate: (String, JSONValue) = ("io.adorch.Ads.InitInteractive", [
            "slot": "i", "creative_url": "https://creative.invalid/unit.js", "ad_parameters": [:], "slot_type": "midroll",
        ])
        let made = try calls(as: 4321, daemon, [initiate, initiate, initiate])
        let sessions = made.prefix(2).compactMap { $0["parameters"]?["session_id"] }
        guard sessions.count == 2 else { throw TestFailure("two sessions made: \(made)") }
        XCTAssertEqual(made[2]["error"], "io.adorch.Ads.TooManySessions")
        XCTAssertEqual(made[2]["parameters"]?["budget"], "max_sessions_per_uid")
        XCTAssertEqual(made[2]["parameters"]?["live"]?.intValue, 2)

        // Another uid may neither start, pause, resume nor stop them, and has a budget of its own.
        let foreign = try calls(as: 4322, daemon, ["Start", "Pause", "Resume", "Stop", "Stop"].map {
            ("io.adorch.Ads.\($0)", ["session_id": sessions[0]])
        } + [initiate])
        // Answered as a session that never was: another app's are not there to count.
        let unknown = try calls(as: 4322, daemon, [("io.adorch.Ads.Start", ["session_id": .string("\(sessions[0].stringValue ?? "")0")])])[0]
        XCTAssertEqual(unknown["error"], "io.adorch.Ads.SessionNotFound")
        for reply in foreign.prefix(5) {
            XCTAssertEqual(reply["error"], unknown["error"])
            XCTAssertEqual(reply["parameters"]?["message"], unknown["parameters"]?["message"])
        }
        XCTAssertNil(foreign[5]["error"])
        XCTAssertEqual(occurrences(of: "called io.adorch.Ads.Stop: not the user session", in: daemon.log), 1, "a line a minute: \(daemon.log)")

        // Its maker may; root, the operator, may act on any session; a stopped one frees its place.
        XCTAssertNil(try calls(as: 4321, daemon, [("io.adorch.Ads.Pause", ["session_id": sessions[0]])])[0]["error"])
        _ = try daemon.call("io.adorch.Ads.Stop", ["session_id": sessions[1]])
        XCTAssertNil(try calls(as: 4321, daemon, [initiate])[0]["error"])

        let limits = try daemon.status()["limits"]
        XCTAssertEqual(limits?["sessions_refused"]?.intValue, 1)
        XCTAssertEqual(limits?["max_sessions_per_uid"]?.intValue, 2)
        XCTAssertEqual(occurrences(of: "sessions budget: uid 4321 has 2 live interactive sessions", in: daemon.log), 1, daemon.log)
    }

    func testASessionNeverStartedEndsAfterTheUnstartedTimeout() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [limits]
        unstarted_session_timeout_s = 1
        """ + "\n" + InteractiveSessionTests.slot("i", "script=opt_in_complete latency_ms=5 step_ms=5")))
        let made = try calls(as: 4321, daemon, [("io.adorch.Ads.InitInteractive", [
            "slot": "i", "creative_url": "https://creative.invalid/unit.js", "ad_parameters": [:], "slot_type": "midroll",
        ])])
        let session = try XCTUnwrap(made[0]["parameters"]?["session_id"])
        try daemon.waitFor("the unstarted session's end") { try daemon.slotStatus("i")["sessions"]?["unstarted_timeouts"]?.intValue == 1 }
        XCTAssertEqual(try daemon.slotStatus("i")["sessions"]?["live"]?.intValue, 0)
        let events = try daemon.call("io.adorch.Ads.ListEvents", ["slots": ["i"]])["events"]?.arrayValue ?? []
        let terminal = events.last { $0["session_id"] == session && $0["terminal"] == true }
        XCTAssertEqual(terminal?["name"], "error", "\(events)")
        XCTAssertEqual(terminal?["message"]?.stringValue?.hasPrefix("unstarted timeout: no Start within 1.0 seconds"), true, "\(events)")
    }

    /// ListEvents and ListRewards share one rate per uid: a reply of hundreds of events is the
    /// daemon's time, which every app shares. Another uid, and root, are not held to it.
    func testListsAreRateLimitedPerUid() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [limits]
        lists_per_second_per_uid = 0.01
        list_burst_per_uid = 3

        [[slots]]
        id = "s"
        format = "interstitial"
        buffer = 1
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """))
        let events: (String, JSONValue) = ("io.adorch.Ads.ListEvents", ["limit": 100])
        let rewards: (String, JSONValue) = ("io.adorch.Ads.ListRewards", [:])
        let eager = try calls(as: 4321, daemon, [events, rewards, events, rewards, events])
        XCTAssertEqual(eager.map { $0["error"]?.stringValue }, [nil, nil, nil, "io.adorch.Ads.RateLimited", "io.adorch.Ads.RateLimited"],
                       "a burst of three lists, then one every 100 s")
        XCTAssertGreaterThan(eager[3]["parameters"]?["retry_after_ms"]?.intValue ?? 0, 1000)
        XCTAssertEqual(try calls(as: 4322, daemon, [events, rewards]).map { $0["error"] }, [nil, nil])
        for _ in 0..<5 { _ = try daemon.call("io.adorch.Ads.ListEvents") }
        let limits = try daemon.status()["limits"]
        XCTAssertEqual(limits?["lists_rate_limited"]?.intValue, 2)
        XCTAssertEqual(occurrences(of: "List rate limit: uid 4321", in: daemon.log), 1, "one journal line for the three refusals")
    }

    /// Issue 31: Report, with the session controls, has a rate per uid, checked before the id
    /// is looked up (a flood of bad ids cost every app's Shows). Another uid's Shows and
    /// Reports go on, and root is not held to it.
    func testReportsAndSessionControlsAreRateLimitedPerUid() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [limits]
        reports_per_second_per_uid = 0.01
        report_burst_per_uid = 3

        [[slots]]
        id = "s"
        format = "interstitial"
        buffer = 1
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """))
        try daemon.waitFor("s full") { try daemon.slotStatus("s")["ready"]?.intValue == 1 }
        let bad: (String, JSONValue) = ("io.adorch.Ads.Report", ["ad_id": "no-such-ad", "event": "click"])
        let stop: (String, JSONValue) = ("io.adorch.Ads.Stop", ["session_id": "no-such-session"])
        let ack: (String, JSONValue) = ("io.adorch.Ads.AckReward", ["trans_id": "no-such-reward"])
        let eager = try calls(as: 4321, daemon, [bad, bad, bad, bad, stop, ack])
        XCTAssertEqual(eager.map { $0["error"]?.stringValue }, [
            "io.adorch.Ads.AdNotValid", "io.adorch.Ads.AdNotValid", "io.adorch.Ads.AdNotValid",
            "io.adorch.Ads.RateLimited", "io.adorch.Ads.RateLimited", "io.adorch.Ads.RateLimited",
        ], "a burst of three, then one every 100 s, Stop and AckReward counted with Report; refused before the id is looked up")
        XCTAssertGreaterThan(eager[3]["parameters"]?["retry_after_ms"]?.intValue ?? 0, 1000)
        XCTAssertEqual(eager[3]["parameters"]?["message"]?.stringValue?.hasPrefix(
            "uid 4321 called Report faster than [limits] reports_per_second_per_uid allows; try again in"), true, "\(eager[3])")
        XCTAssertEqual(eager[4]["parameters"]?["message"]?.stringValue?.hasPrefix(
            "uid 4321 called Stop faster than [limits] reports_per_second_per_uid allows"), true, "\(eager[4])")

        // Another uid has a bucket of its own: it is shown an ad and reports on it.
        let shown = try calls(as: 4322, daemon, [("io.adorch.Ads.Show", ["slot": "s"])])
        let ad = try XCTUnwrap(shown[0]["parameters"]?["ad"]?["id"], "\(shown)")
        let reported = try calls(as: 4322, daemon, [("io.adorch.Ads.Report", ["ad_id": ad, "event": "impression"]),
                                                    ("io.adorch.Ads.Report", ["ad_id": ad, "event": "close"])])
        XCTAssertEqual(reported.map { $0["error"] }, [nil, nil])
        // Root, the operator, is exempt: its bad ids are judged, not refused.
        for _ in 0..<5 {
            XCTAssertEqual(try daemon.callExpectingError("io.adorch.Ads.Report", ["ad_id": "no-such-ad", "event": "click"]).0,
                           "io.adorch.Ads.AdNotValid")
        }

        let limits = try daemon.status()["limits"]
        XCTAssertEqual(limits?["reports_rate_limited"]?.intValue, 3)
        XCTAssertEqual(limits?["reports_per_second_per_uid"]?.doubleValue, 0.01)
        XCTAssertEqual(limits?["report_burst_per_uid"]?.doubleValue, 3)
        let metrics = try runCommand(productsDirectory.appendingPathComponent("adorchctl").path, ["metrics", "--socket", daemon.socket])
        XCTAssertTrue(metrics.stdout.contains(#"adorch_limit_refusals_total{limit="reports_per_second_per_uid"} 3"#), metrics.stdout)
        XCTAssertEqual(occurrences(of: "Report rate limit: uid 4321", in: daemon.log), 1, "one journal line for the three refusals")
    }
}
