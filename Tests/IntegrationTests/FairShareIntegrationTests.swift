import AdorchVarlink
import Foundation
import XCTest

/// docs/rules.md, "Fair share" through the real daemon: a greedy uid Shows in a loop on a slot
/// of 2 ads that a polite uid shares. Before the rule the polite uid got 12 to 14 of its 40 Shows.
final class FairShareIntegrationTests: XCTestCase {
    private static let politeShows = 40

    /// The polite app: `count` Shows, each after the last one's answer and its ad's close, at
    /// its own pace (an app showing an ad now and then, not a wait for the daemon); prints
    /// the error name of each Show (null for an ad), then exits.
    private static let politeApp = """
    import json, sys, time
    sys.path.insert(0, sys.argv.pop(1))
    import varlink
    socket, slot, count, pace_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    connection = varlink.Connection(socket, timeout=10)
    answers = []
    for _ in range(count):
        reply = connection.call("io.adorch.Ads.Show", {"slot": slot})
        answers.append(varlink.error_of(reply))
        if answers[-1] is None:
            connection.call("io.adorch.Ads.Report", {"ad_id": reply["parameters"]["ad"]["id"], "event": "close"})
        time.sleep(pace_s)
    print(json.dumps({"answers": answers}), flush=True)
    """

    func testAGreedyUidLeavesAPoliteUidItsShare() throws {
        guard getuid() == 0 else { throw XCTSkip("the greedy and the polite app must be two other uids, which only root can become") }
        let daemon = try DaemonProcess(config: simConfig(slots: """
            [[slots]]
            id = "shared"
            format = "interstitial"
            buffer = 2
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "fill=1 latency_ms=100 ttl_s=3600"
            """))
        try daemon.waitFor("the slot full") { try daemon.slotStatus("shared")["ready"]?.intValue == 2 }
        let greedy = try HostileScript("attackers.py", ["show-flood", "--socket", daemon.socket, "--slot", "shared"], as: HostileUID.attacker)
        _ = try greedy.line("the flood's first ad", timeout: .seconds(10)) { $0["flooding"] == true }

        // A Show every 250 ms, longer than a refill (100 ms): the held ad is back before each.
        let argv = try pythonClient(Self.politeApp, as: HostileUID.polite, [daemon.socket, "shared", "\(Self.politeShows)", "0.25"])
        let run = try runCommand(argv[0], Array(argv.dropFirst()))
        greedy.stop()
        let flood = try greedy.result(timeout: .seconds(5))
        let answers = JSONValue.parse(Data(run.stdout.utf8))?["answers"]?.arrayValue
        guard run.status == 0, let answers, answers.count == Self.politeShows else {
            throw daemon.diagnosis("the polite app (exit \(run.status)): \(run.stdout)\(run.stderr)")
        }
        let served = answers.filter { $0 == .null }.count
        print("fair share: the polite uid got \(served) of \(Self.politeShows) Shows; the greedy uid: \(flood)")
        XCTAssertGreaterThanOrEqual(served, 35, "the polite uid's answers: \(answers); the greedy uid's: \(flood)")
        // The slot loads what it holds on top of its buffer: the greedy uid still gets the
        // buffer's worth each refill (about 16 a second here, the polite uid's 4 aside).
        XCTAssertGreaterThan(flood["ads"]?.intValue ?? 0, Int64(2 * Self.politeShows), "the greedy uid is still served: \(flood)")

        // The greedy uid hears why, and nothing of the other app's numbers.
        let messages = flood["no_ad_messages"]?.arrayValue?.compactMap(\.stringValue) ?? []
        XCTAssertTrue(messages.contains("no ad of shared is free for this app now: its ready ads are held for other apps by the fair share; "
                                        + "it is being refilled"), "\(messages)")
        XCTAssertFalse(messages.contains { $0.contains("\(HostileUID.polite)") }, "\(messages)")
        let limits = try daemon.status()["limits"]
        let refused = limits?["fair_share_refused"]?.intValue ?? 0
        XCTAssertGreaterThan(refused, 0, "\(String(describing: limits))")
        XCTAssertEqual(limits?["fair_share_window_s"]?.intValue, 60)
        let metrics = try runCommand(productsDirectory.appendingPathComponent("adorchctl").path, ["metrics", "--socket", daemon.socket]).stdout
        XCTAssertTrue(metrics.contains("adorch_limit_refusals_total{limit=\"fair_share_window_s\"} \(refused)\n"), metrics)
        try daemon.waitForLog(["fair share: uid \(HostileUID.attacker) would take what shared holds for other uids; Show refused"])
    }
}
