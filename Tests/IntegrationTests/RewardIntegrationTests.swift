import AdorchVarlink
import Foundation
import XCTest

/// Issue 5's rewards through the real daemon, socket and SQLite file.
final class RewardIntegrationTests: XCTestCase {
    private func waitForReward(_ events: VarlinkClient, ad: String) throws -> JSONValue {
        while true {
            let event = try events.nextReply().parameters["event"]
            if event?["name"]?.stringValue == "reward", event?["ad_id"]?.stringValue == ad { return event! }
        }
    }

    func testARewardIsWrittenBeforeItIsAnnouncedAndSurvivesAKill() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-rewards-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        var trans = ""
        do {
            let daemon = try DaemonProcess(stateDir: state)
            try daemon.waitFor("rewarded_main ready") { try daemon.slotStatus("rewarded_main")["ready"]?.intValue ?? 0 > 0 }
            let events = try daemon.client(timeout: .seconds(5))
            _ = try events.call("io.adorch.Ads.Subscribe", ["slots": ["rewarded_main"]], more: true)
            let ad = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": "u-kill"])["ad"]?["id"]?.stringValue)
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"])
            let reward = try waitForReward(events, ad: ad)
            XCTAssertEqual(reward["user_id"]?.stringValue, "u-kill")
            XCTAssertEqual(reward["detail"]?["reward_name"]?.stringValue, "coins")
            XCTAssertEqual(reward["detail"]?["reward_amount"]?.intValue, 10)
            trans = try XCTUnwrap(reward["detail"]?["trans_id"]?.stringValue)
            // A crash right after the announcement: nothing a subscriber heard may be lost.
            kill(daemon.process.processIdentifier, SIGKILL)
            XCTAssertEqual(daemon.stop(), SIGKILL)
        }
        let daemon = try DaemonProcess(stateDir: state)
        let rows = try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-kill"])["rewards"]?.arrayValue ?? []
        XCTAssertEqual(rows.compactMap { $0["trans_id"]?.stringValue }, [trans], "exactly once, after the kill")
        // A new subscriber of the slot gets the unacknowledged reward again.
        let events = try daemon.client(timeout: .seconds(5))
        _ = try events.call("io.adorch.Ads.Subscribe", ["slots": ["rewarded_main"]], more: true)
        let again = try events.nextReply().parameters["event"]
        XCTAssertEqual(again?["name"]?.stringValue, "reward")
        XCTAssertEqual(again?["detail"]?["trans_id"]?.stringValue, trans)
        _ = try daemon.call("io.adorch.Ads.AckReward", ["trans_id": .string(trans)])
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-kill"])["rewards"]?.arrayValue?.count, 0)
        let (error, _) = try daemon.callExpectingError("io.adorch.Ads.AckReward", ["trans_id": "no-such"])
        XCTAssertEqual(error, "io.adorch.Ads.RewardNotFound")
        let (badSince, _) = try daemon.callExpectingError("io.adorch.Ads.ListRewards", ["since": "yesterday"])
        XCTAssertEqual(badSince, "io.adorch.Ads.InvalidParameter")
    }

    func testANetworkGrantedRewardCarriesTheNetworksTransactionAndAnOverride() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [[slots]]
        id = "r"
        format = "rewarded"
        reward_name = "coins"
        reward_amount = 10
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5 reward=network seed=77"
        """))
        try daemon.waitFor("r ready") { try daemon.allSlotsFull() }
        let events = try daemon.client(timeout: .seconds(5))
        _ = try events.call("io.adorch.Ads.Subscribe", ["slots": ["r"]], more: true)
        let ad = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "r", "user_id": "u9", "reward": ["name": "gems", "amount": 3]])["ad"]?["id"]?.stringValue)
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"])
        let reward = try waitForReward(events, ad: ad)
        XCTAssertEqual(reward["detail"]?["trans_id"]?.stringValue?.hasPrefix("sim-77-"), true, "the network's own transaction id")
        XCTAssertEqual(reward["detail"]?["reward_name"]?.stringValue, "gems")
        XCTAssertEqual(reward["detail"]?["reward_amount"]?.intValue, 3)
        XCTAssertEqual(try daemon.slotStatus("r")["counters"]?["rewards"]?.intValue, 1)
    }

    /// Acceptance 3: the seed's own example is accepted once; a wrong sign, a tampered
    /// trans_id and a replay are not; adorchctl agrees.
    func testTheServerCallbackOfTheSeed() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-key-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyFile = dir.appendingPathComponent("reward.key").path
        try "7ca31ab0a59d69a42dd8abc7cf2d8fbd\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let trans = "6FEB23ACB0374985A2A52D282EDD5361u6643"
        let sign = "a35e8d8c11c784aa2573c9480d77a3d034936560b5ec0752a4124d9fedd8fbd2"  // the seed's Python sample
        let query = "user_id=123&trans_id=\(trans)&reward_name=coins&reward_amount=10&extra=&sign=\(sign)"

        let ctl = productsDirectory.appendingPathComponent("adorchctl").path
        let signed = try runCommand(ctl, ["reward", "sign", "--key-file", keyFile, trans])
        XCTAssertEqual(signed.stdout.trimmingCharacters(in: .whitespacesAndNewlines), sign)
        let verified = try runCommand(ctl, ["reward", "verify", "--key-file", keyFile, query])
        XCTAssertEqual(verified.status, 0)
        XCTAssertEqual(verified.stdout.trimmingCharacters(in: .whitespacesAndNewlines), #"{"isValid": true}"#)
        let forged = try runCommand(ctl, ["reward", "verify", "--key-file", keyFile, query.replacingOccurrences(of: "sign=a3", with: "sign=b3")])
        XCTAssertEqual(forged.status, 1)
        XCTAssertEqual(forged.stdout.trimmingCharacters(in: .whitespacesAndNewlines), #"{"isValid": false}"#)

        let daemon = try DaemonProcess(config: simConfig(slots: """
        [[slots]]
        id = "r"
        format = "rewarded"
          [[slots.waterfall]]
          plugin = "sim"
        """, daemon: "") + "\n[rewards]\nkey_file = \"\(keyFile)\"\n")
        func verify(_ q: String) throws -> [String: JSONValue] { try daemon.call("io.adorch.Manager.VerifyRewardCallback", ["query": .string(q)]) }
        let accepted = try verify(query)
        XCTAssertEqual(accepted["is_valid"], true)
        XCTAssertEqual(accepted["body"]?.stringValue, #"{"isValid": true}"#)
        let replay = try verify(query)
        XCTAssertEqual(replay["is_valid"], false)
        XCTAssertEqual(replay["reason"]?.stringValue?.contains("replay"), true)
        XCTAssertEqual(replay["body"]?.stringValue, #"{"isValid": false}"#)
        XCTAssertEqual(try verify(query.replacingOccurrences(of: "sign=a3", with: "sign=b3"))["is_valid"], false)
        XCTAssertEqual(try verify(query.replacingOccurrences(of: "u6643", with: "u6644"))["reason"]?.stringValue, "the sign does not match")
        XCTAssertEqual(try verify("user_id=1")["is_valid"], false)
    }
}
