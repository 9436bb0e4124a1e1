import AdorchVarlink
import Foundation
import XCTest

/// A viewer who watched a rewarded ad is rewarded when the app's complete comes after the
/// daemon restarted, by a clean stop or a `kill -9` (docs/rules.md, "Across a restart").
final class RewardAcrossRestartTests: XCTestCase {
    private func stateDir() -> URL {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-promise-\(UUID().uuidString.prefix(8))")
        addTeardownBlock { try? FileManager.default.removeItem(at: state) }
        return state
    }

    /// Shows a rewarded ad to `user` and reports its impression; returns the ad's id.
    private func watch(_ daemon: DaemonProcess, user: String) throws -> String {
        try daemon.waitFor("rewarded_main ready") { try daemon.slotStatus("rewarded_main")["ready"]?.intValue ?? 0 > 0 }
        let ad = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": .string(user)])["ad"]?["id"]?.stringValue)
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "impression"])
        return ad
    }

    private func rewards(_ daemon: DaemonProcess, user: String) throws -> [JSONValue] {
        try daemon.call("io.adorch.Ads.ListRewards", ["user_id": .string(user)])["rewards"]?.arrayValue ?? []
    }

    func testCompleteAfterACleanRestartGrantsTheRewardOnce() throws {
        let state = stateDir()
        var ad = ""
        do {
            let daemon = try DaemonProcess(stateDir: state)
            ad = try watch(daemon, user: "u-restart")
            XCTAssertEqual(daemon.stop(), 0)
        }
        let daemon = try DaemonProcess(stateDir: state)
        XCTAssertTrue(daemon.log.contains("1 rewarded ads shown before this start may still be completed"), daemon.log)
        XCTAssertNil(try daemon.client().call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"]).error)
        let rows = try rewards(daemon, user: "u-restart")
        XCTAssertEqual(rows.map { "\($0["ad_id"]?.stringValue ?? "") \($0["reward_amount"]?.intValue ?? 0) \($0["reward_name"]?.stringValue ?? "")" },
                       ["\(ad) 10 coins"], "granted under the id the app was given, with the slot's reward")
        let (again, parameters) = try daemon.callExpectingError("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"])
        XCTAssertEqual(again, "io.adorch.Ads.AdNotValid", "\(parameters)")
        XCTAssertNil(try daemon.client().call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "close"]).error)
    }

    func testCompleteAfterAKillGrantsTheRewardAndACloseBeforeItVoidsIt() throws {
        let state = stateDir()
        var (watched, closed) = ("", "")
        do {
            let daemon = try DaemonProcess(stateDir: state)
            watched = try watch(daemon, user: "u-kill")
            closed = try watch(daemon, user: "u-closed")
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(closed), "event": "close"])
            kill(daemon.pid, SIGKILL)
            XCTAssertEqual(daemon.stop(), SIGKILL)
        }
        let daemon = try DaemonProcess(stateDir: state)
        XCTAssertNil(try daemon.client().call("io.adorch.Ads.Report", ["ad_id": .string(watched), "event": "complete"]).error)
        XCTAssertEqual(try rewards(daemon, user: "u-kill").compactMap { $0["ad_id"]?.stringValue }, [watched])
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Report", ["ad_id": .string(closed), "event": "complete"])
        XCTAssertEqual(error, "io.adorch.Ads.AdNotValid", "closed before the kill, it earns nothing: \(parameters)")
        XCTAssertEqual(try rewards(daemon, user: "u-closed").count, 0)
    }

    /// Only the uid the ad was handed to may complete it after the restart, as before it.
    func testOnlyTheHolderMayCompleteAnEarlierRunsAd() throws {
        let state = stateDir()
        let config = simConfig(slots: """
        [access]
        ads_users = ["4321", "4322"]

        [[slots]]
        id = "r"
        format = "rewarded"
        buffer = 1
        reward_name = "coins"
        reward_amount = 10
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """)
        var ad = ""
        do {
            let daemon = try DaemonProcess(config: config, stateDir: state)
            try daemon.waitFor("slots full") { try daemon.allSlotsFull() }
            let shown = try adorchctl(as: 4321, daemon, ["show", "r", "--user", "u-4321", "--json"])
            ad = try XCTUnwrap(JSONValue.parse(Data(shown.stdout.utf8))?["ad"]?["id"]?.stringValue, shown.stderr)
            XCTAssertEqual(daemon.stop(), 0)
        }
        let daemon = try DaemonProcess(config: config, stateDir: state)
        let foreign = try adorchctl(as: 4322, daemon, ["report", ad, "complete"])
        XCTAssertTrue(foreign.stderr.contains("io.adorch.Ads.AdNotValid: ad \(ad) is not known"), foreign.stderr)
        XCTAssertEqual(try rewards(daemon, user: "u-4321").count, 0, "a refused report changes nothing")
        let own = try adorchctl(as: 4321, daemon, ["report", ad, "complete"])
        XCTAssertEqual(own.status, 0, own.stderr)
        XCTAssertEqual(try rewards(daemon, user: "u-4321").compactMap { $0["ad_id"]?.stringValue }, [ad])
    }
}
