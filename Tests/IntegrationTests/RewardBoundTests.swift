import AdorchVarlink
import Foundation
import XCTest

/// Issue 31 (docs/rules.md, "A bound on unacknowledged rewards"): an app that completed
/// rewarded ads and never acknowledged them grew the ledger without end. At
/// max_unacknowledged_rewards_per_uid its rewarded Shows are refused, named, until it
/// acknowledges some; nothing it earned is dropped, and nothing else of it or of another uid
/// is held back.
final class RewardBoundTests: XCTestCase {
    private let bound = 5

    /// `earn N BATCH USER`: N rewarded Shows on slot r, BATCH of them handed out before their
    /// ads are completed and closed, never acknowledged. `show SLOT USER`: one Show; its ad,
    /// if any, closed. `ack K`: AckReward on the oldest K rewards. Each prints its replies as
    /// JSON; a Show that finds no ad ready waits for the slot's next `loaded` event.
    private static let client = #"""
    import json, sys
    sys.path.insert(0, sys.argv.pop(1))
    import varlink
    path, mode = sys.argv[1], sys.argv[2]
    calls = varlink.Connection(path, timeout=20)
    events = {}
    def show(slot, user):
        while True:
            parameters = {"slot": slot, "user_id": user} if user else {"slot": slot}
            reply = calls.call("io.adorch.Ads.Show", parameters)
            if reply.get("error") != "io.adorch.Ads.NoAdReady":
                return reply
            if slot not in events:
                events[slot] = varlink.Connection(path, timeout=20)
                events[slot].send("io.adorch.Ads.Subscribe", {"slots": [slot]}, more=True)
                continue
            while events[slot].receive()["parameters"]["event"].get("name") != "loaded":
                pass
    def report(ad, event):
        reply = calls.call("io.adorch.Ads.Report", {"ad_id": ad, "event": event})
        if "error" in reply:
            sys.exit("Report " + event + ": " + json.dumps(reply))
    if mode == "earn":
        left, batch, user = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        while left > 0:
            ads = []
            for _ in range(min(batch, left)):
                reply = show("r", user)
                if "error" in reply:
                    sys.exit("Show: " + json.dumps(reply))
                ads.append(reply["parameters"]["ad"]["id"])
            for ad in ads:
                report(ad, "complete")
                report(ad, "close")
            left -= len(ads)
        print(json.dumps({"earned": int(sys.argv[3])}))
    elif mode == "show":
        reply = show(sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
        if "error" not in reply:
            report(reply["parameters"]["ad"]["id"], "close")
        print(json.dumps(reply))
    else:
        rows = calls.call("io.adorch.Ads.ListRewards", {"limit": int(sys.argv[3])})["parameters"]["rewards"]
        print(json.dumps([calls.call("io.adorch.Ads.AckReward", {"trans_id": row["trans_id"]}) for row in rows]))
    """#

    /// Runs the client as `uid`; its output as JSON.
    private func run(as uid: Int, _ daemon: DaemonProcess, _ rest: [String]) throws -> JSONValue {
        let argv = try pythonClient(Self.client, as: uid, [daemon.socket] + rest)
        let result = try runCommand(argv[0], Array(argv.dropFirst()))
        guard result.status == 0, let output = JSONValue.parse(Data(result.stdout.utf8)) else {
            throw daemon.diagnosis("\(rest) as uid \(uid) (exit \(result.status)): \(result.stdout)\(result.stderr)")
        }
        return output
    }

    private func occurrences(of text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

    func testAUidAtItsBoundIsRefusedRewardedShowsUntilItAcknowledgesAndNothingEarnedIsLost() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [limits]
        max_unacknowledged_rewards_per_uid = \(bound)

        [[slots]]
        id = "r"
        format = "rewarded"
        buffer = 4
        reward_name = "coins"
        reward_amount = 1
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"

        [[slots]]
        id = "m"
        format = "interstitial"
        buffer = 2
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """))
        let (app, other) = (4331, 4332)
        // One short of the bound, then two ads handed out at once: both were shown below it,
        // so both completes are rewarded and written, one past it.
        _ = try run(as: app, daemon, ["earn", "\(bound - 1)", "1", "u-app"])
        _ = try run(as: app, daemon, ["earn", "2", "2", "u-app"])
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards")["rewards"]?.arrayValue?.count, bound + 1,
                       "no reward earned was dropped")

        // At the bound: the rewarded Show is refused, named, and takes no ad.
        let ready = try daemon.slotStatus("r")["ready"]?.intValue
        for _ in 0..<2 {
            let refused = try run(as: app, daemon, ["show", "r", "u-app"])
            XCTAssertEqual(refused["error"], "io.adorch.Ads.TooManyOpenAds", "\(refused)")
            let parameters = refused["parameters"]
            XCTAssertEqual(parameters?["budget"], "max_unacknowledged_rewards_per_uid")
            XCTAssertEqual(parameters?["limit"]?.intValue, Int64(bound))
            XCTAssertEqual(parameters?["open"]?.intValue, Int64(bound + 1))
            XCTAssertEqual(parameters?["loading"]?.intValue, 0)
            XCTAssertEqual(parameters?["message"]?.stringValue?.contains("acknowledges them with AckReward"), true, "\(refused)")
        }
        XCTAssertEqual(try daemon.slotStatus("r")["ready"]?.intValue, ready, "the refused Shows took no ad")

        // Its interstitial Shows go on, and another uid's rewarded Shows are its own.
        XCTAssertNil(try run(as: app, daemon, ["show", "m"])["error"])
        XCTAssertEqual(try run(as: other, daemon, ["earn", "1", "1", "u-other"])["earned"]?.intValue, 1)

        // Acknowledging two brings the app below the bound: one more rewarded Show, then at it again.
        let acks = try run(as: app, daemon, ["ack", "2"]).arrayValue ?? []
        XCTAssertEqual(acks.count, 2)
        XCTAssertTrue(acks.allSatisfy { $0["error"] == nil }, "\(acks)")
        XCTAssertEqual(try run(as: app, daemon, ["earn", "1", "1", "u-app"])["earned"]?.intValue, 1)
        XCTAssertEqual(try run(as: app, daemon, ["show", "r", "u-app"])["parameters"]?["open"]?.intValue, Int64(bound))

        // Counted and logged like the other budgets: three refusals, one journal line a minute.
        let limits = try daemon.status()["limits"]
        XCTAssertEqual(limits?["max_unacknowledged_rewards_per_uid"]?.intValue, Int64(bound))
        XCTAssertEqual(limits?["unacknowledged_rewards_refused"]?.intValue, 3)
        let metrics = try runCommand(productsDirectory.appendingPathComponent("adorchctl").path, ["metrics", "--socket", daemon.socket])
        XCTAssertTrue(metrics.stdout.contains(#"adorch_limit_refusals_total{limit="max_unacknowledged_rewards_per_uid"} 3"#), metrics.stdout)
        XCTAssertEqual(occurrences(of: "unacknowledged rewards budget: uid \(app) has", in: daemon.log), 1, daemon.log)
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards")["rewards"]?.arrayValue?.count, bound + 1,
                       "the app's five and the other uid's one wait")
    }
}
