import AdorchVarlink
import Foundation
import XCTest

/// Issue 8, acceptance 1: callers are told apart by SO_PEERCRED. The tests run as root, so
/// adorchctl is started as other users with setpriv, the way a real app would connect.
final class AccessTests: XCTestCase {
    private func adID(_ json: String) throws -> String {
        try XCTUnwrap(JSONValue.parse(Data(json.utf8))?["ad"]?["id"]?.stringValue, json)
    }

    func testCallersAreAdmittedByUidGroupAndSlotAndOnlyTheHolderMayActOnAnAd() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [access]
        ads_users = ["4321", 4322]
        ads_groups = ["7000"]
        manager_users = ["4330"]

        [[slots]]
        id = "r"
        format = "rewarded"
        buffer = 2
        reward_name = "coins"
        reward_amount = 10
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"

        [[slots]]
        id = "private"
        format = "interstitial"
        buffer = 1
        users = ["4322"]
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """))
        try daemon.waitFor("slots full") { try daemon.allSlotsFull() }

        // A uid in no list: refused on both interfaces, named in the log with the method.
        let stranger = try adorchctl(as: 5555, daemon, ["show", "r", "--user", "u"])
        XCTAssertNotEqual(stranger.status, 0)
        XCTAssertTrue(stranger.stderr.contains("io.adorch.Ads.PermissionDenied: uid 5555 is not allowed to use io.adorch.Ads"), stranger.stderr)
        let strangerStatus = try adorchctl(as: 5555, daemon, ["status"])
        XCTAssertTrue(strangerStatus.stderr.contains("io.adorch.Manager.PermissionDenied: uid 5555 is not allowed to use io.adorch.Manager"), strangerStatus.stderr)
        XCTAssertTrue(daemon.log.contains("permission denied: uid 5555 (pid "), daemon.log)
        XCTAssertTrue(daemon.log.contains(") called io.adorch.Ads.Show: not allowed to use io.adorch.Ads"), daemon.log)
        XCTAssertTrue(daemon.log.contains(") called io.adorch.Manager.GetStatus: not allowed to use io.adorch.Manager"), daemon.log)
        XCTAssertEqual(try daemon.slotStatus("r")["ready"]?.intValue, 2, "a refused Show takes nothing")

        // An app user is not an admin; the configured admin is; a member of the Ads group is admitted.
        XCTAssertTrue(try adorchctl(as: 4321, daemon, ["status"]).stderr.contains("io.adorch.Manager.PermissionDenied"))
        let admin = try adorchctl(as: 4330, daemon, ["status"])
        XCTAssertEqual(admin.status, 0, admin.stderr)
        let member = try adorchctl(as: 6000, groups: [7000], daemon, ["slots"])
        XCTAssertEqual(member.status, 0, member.stderr)

        // A slot's own list narrows it further.
        let notThisSlot = try adorchctl(as: 4321, daemon, ["show", "private"])
        XCTAssertTrue(notThisSlot.stderr.contains("uid 4321 is not allowed to use slot private"), notThisSlot.stderr)
        XCTAssertEqual(try adorchctl(as: 4322, daemon, ["show", "private"]).status, 0)

        // The ad is 4321's: 4322 may not report on it, nor acknowledge its reward.
        let shown = try adorchctl(as: 4321, daemon, ["show", "r", "--user", "u-4321", "--json"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        let ad = try adID(shown.stdout)
        let foreignReport = try adorchctl(as: 4322, daemon, ["report", ad, "complete"])
        XCTAssertNotEqual(foreignReport.status, 0)
        // Answered as an id no ad ever had: another app's ads are not there to count.
        XCTAssertTrue(foreignReport.stderr.contains("io.adorch.Ads.AdNotValid: ad \(ad) is not known"), foreignReport.stderr)
        XCTAssertTrue(daemon.log.contains("permission denied: uid 4322"), "the operator's log says who tried")
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-4321"])["rewards"]?.arrayValue?.count, 0,
                       "a refused report changes nothing: no reward")
        XCTAssertEqual(try adorchctl(as: 4321, daemon, ["report", ad, "complete"]).status, 0)
        var trans = ""
        try daemon.waitFor("the reward in the ledger") {
            let rows = try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-4321"])["rewards"]?.arrayValue ?? []
            trans = rows.first?["trans_id"]?.stringValue ?? ""
            return !trans.isEmpty
        }
        // To another uid the reward is one that does not exist: it learns nothing of it, not even its holder.
        let foreignAck = try adorchctl(as: 4322, daemon, ["reward", "ack", trans])
        XCTAssertTrue(foreignAck.stderr.contains("io.adorch.Ads.RewardNotFound"), foreignAck.stderr)
        XCTAssertFalse(foreignAck.stderr.contains("4321"), foreignAck.stderr)
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-4321"])["rewards"]?.arrayValue?.count, 1, "still unacknowledged")
        let ack = try adorchctl(as: 4321, daemon, ["reward", "ack", trans])
        XCTAssertEqual(ack.status, 0, ack.stderr)
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-4321"])["rewards"]?.arrayValue?.count, 0)
    }

    func testUnknownUserOrGroupNamesAreConfigErrors() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-access-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("a.toml").path
        try "[access]\nmanager_groups = [\"no-such-group-here\"]\n".write(toFile: path, atomically: true, encoding: .utf8)
        let result = try runCommand(productsDirectory.appendingPathComponent("adorchd").path, ["--config", path, "--check-config"])
        XCTAssertEqual(result.status, 78)
        XCTAssertTrue(result.stderr.contains("key access.manager_groups: no group \"no-such-group-here\" on this host"), result.stderr)
    }
}
