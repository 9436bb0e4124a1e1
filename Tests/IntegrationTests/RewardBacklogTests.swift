import AdorchVarlink
import Foundation
import XCTest

/// Issue 20, a reward backlog (docs/rules.md, "Redelivery until acknowledged"): a uid that
/// never acknowledges its rewards had every one of them sent again on each Subscribe, a
/// megabyte per subscriber for a thousand rewards, which stalled every call of every uid. A
/// new subscriber now gets the newest 32 and a count of the rest; ListRewards pages.
final class RewardBacklogTests: XCTestCase {
    /// The bound RewardDesk.redeliveredAtMost documents in the interface.
    private let redeliveredAtMost = 32

    /// `earn N USER`: N rewarded Shows on slot r, each completed and closed, never
    /// acknowledged. `redelivery`: Subscribe, then a Show on slot m as a marker; prints the
    /// subscribed event and the trans_ids of the rewards the stream held before the marker.
    /// `pages LIMIT`: ListRewards a page at a time, after the last row; prints each page.
    private static let client = #"""
    import json, sys
    sys.path.insert(0, sys.argv.pop(1))
    import varlink
    def Connection(path):
        return varlink.Connection(path, timeout=20)
    path, mode = sys.argv[1], sys.argv[2]
    calls = Connection(path)
    if mode == "earn":
        loads = Connection(path)
        loads.send("io.adorch.Ads.Subscribe", {"slots": ["r"]}, more=True)
        earned = 0
        while earned < int(sys.argv[3]):
            reply = calls.call("io.adorch.Ads.Show", {"slot": "r", "user_id": sys.argv[4]})
            if reply.get("error") == "io.adorch.Ads.NoAdReady":
                while loads.receive()["parameters"]["event"].get("name") != "loaded":
                    pass
                continue
            if "error" in reply:
                sys.exit("Show: " + json.dumps(reply))
            ad = reply["parameters"]["ad"]["id"]
            for event in ["complete", "close"]:
                reply = calls.call("io.adorch.Ads.Report", {"ad_id": ad, "event": event})
                if "error" in reply:
                    sys.exit("Report: " + json.dumps(reply))
            earned += 1
    elif mode == "redelivery":
        stream = Connection(path)
        stream.send("io.adorch.Ads.Subscribe", {}, more=True)
        subscribed = stream.receive()["parameters"]["event"]
        ad = calls.call("io.adorch.Ads.Show", {"slot": "m"})["parameters"]["ad"]["id"]
        rewards = []
        while True:
            event = stream.receive()["parameters"]["event"]
            if event["kind"] == "reward_granted":
                rewards.append(event["detail"]["trans_id"])
            if event["kind"] == "ad_shown" and event["ad_id"] == ad:
                break
        print(json.dumps({"subscribed": subscribed, "rewards": rewards}))
    else:
        pages, after = [], None
        while True:
            parameters = {"limit": int(sys.argv[3])}
            if after:
                parameters["after"] = after
            reply = calls.call("io.adorch.Ads.ListRewards", parameters)
            if "error" in reply:
                sys.exit("ListRewards: " + json.dumps(reply))
            rows = [row["trans_id"] for row in reply["parameters"]["rewards"]]
            pages.append({"rows": rows, "more": reply["parameters"]["more"]})
            if not reply["parameters"]["more"]:
                break
            after = rows[-1]
        print(json.dumps(pages))
    """#

    /// Runs the client as `uid` (0: as the test itself, root); its output as JSON.
    private func run(as uid: Int, _ daemon: DaemonProcess, _ rest: [String]) throws -> JSONValue {
        let argv = try pythonClient(Self.client, as: uid, [daemon.socket] + rest)
        let result = try runCommand(argv[0], Array(argv.dropFirst()))
        guard result.status == 0 else { throw TestFailure("\(rest) as uid \(uid): \(result.stderr)") }
        return JSONValue.parse(Data(result.stdout.utf8)) ?? .null
    }

    func testASubscriberGetsTheNewestRewardsAndHowManyWaitAndListRewardsPagesThroughAll() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [[slots]]
        id = "r"
        format = "rewarded"
        buffer = 8
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
        try daemon.waitFor("slots full") { try daemon.allSlotsFull() }
        // 4321 earns more than the bound; 4322 earns a few after it, so the newest rows of
        // the ledger are not 4321's: its redelivery must be chosen among its own rows.
        _ = try run(as: 4321, daemon, ["earn", "40", "u-4321"])
        _ = try run(as: 4322, daemon, ["earn", "5", "u-4322"])
        let all = try listAllRewards(daemon)
        XCTAssertEqual(all.count, 45)
        let own = Array(all.prefix(40)), others = Array(all.suffix(5))

        // A new subscriber of 4321's: its newest 32, oldest first, and the 8 others counted.
        try daemon.waitFor("m full") { try daemon.allSlotsFull() }
        let redelivery = try run(as: 4321, daemon, ["redelivery"])
        XCTAssertEqual(redelivery["rewards"]?.arrayValue?.compactMap(\.stringValue), Array(own.suffix(redeliveredAtMost)))
        XCTAssertEqual(redelivery["subscribed"]?["rewards_waiting"]?.intValue, Int64(40 - redeliveredAtMost))
        // Root sees every uid's: the newest 32 of all 45.
        try daemon.waitFor("m full again") { try daemon.allSlotsFull() }
        let operator_ = try run(as: 0, daemon, ["redelivery"])
        XCTAssertEqual(operator_["rewards"]?.arrayValue?.compactMap(\.stringValue), Array(all.suffix(redeliveredAtMost)))
        XCTAssertEqual(operator_["subscribed"]?["rewards_waiting"]?.intValue, Int64(45 - redeliveredAtMost))

        // ListRewards pages through all of 4321's, and only 4321's.
        let pages = try run(as: 4321, daemon, ["pages", "15"]).arrayValue ?? []
        XCTAssertEqual(pages.map { $0["rows"]?.arrayValue?.count ?? -1 }, [15, 15, 10])
        XCTAssertEqual(pages.map { $0["more"]?.boolValue }, [true, true, false])
        XCTAssertEqual(pages.flatMap { $0["rows"]?.arrayValue?.compactMap(\.stringValue) ?? [] }, own)
        XCTAssertEqual(try run(as: 4322, daemon, ["pages", "1000"]).arrayValue?.first?["rows"]?.arrayValue?.compactMap(\.stringValue), others)

        // The default page, the largest, and what is refused.
        let first = try daemon.call("io.adorch.Ads.ListRewards", ["limit": 10])
        XCTAssertEqual(first["rewards"]?.arrayValue?.compactMap { $0["trans_id"]?.stringValue }, Array(all.prefix(10)))
        XCTAssertEqual(first["more"], true)
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards")["more"], false, "45 fit the default page of 100")
        for (parameters, parameter) in [(["limit": 0], "limit"), (["limit": 1001], "limit"), (["after": "no-such-reward"], "after")]
            as [([String: JSONValue], String)] {
            let (error, reply) = try daemon.callExpectingError("io.adorch.Ads.ListRewards", parameters)
            XCTAssertEqual(error, "io.adorch.Ads.InvalidParameter", "\(parameters)")
            XCTAssertEqual(reply["parameter"]?.stringValue, parameter)
        }
    }
}
