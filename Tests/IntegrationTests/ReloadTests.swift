import AdorchVarlink
import Foundation
import XCTest

/// Issue 3, acceptance 4: a reload keeps the ready ads of unchanged slots (same ids),
/// applies a changed slot keeping what is still valid, drains a removed one through its
/// plugin, and a broken config changes nothing.
final class ReloadTests: XCTestCase {
    private func slot(_ id: String, buffer: Int, unit: String = "u") -> String {
        """
        [[slots]]
        id = "\(id)"
        format = "interstitial"
        buffer = \(buffer)
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "\(unit)"
          server_parameter = "fill=1 latency_ms=5..20"

        """
    }

    private func readyAds(_ daemon: DaemonProcess, _ slot: String) throws -> [String] {
        try daemon.slotStatus(slot)["ready_ads"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    func testReloadKeepsUnchangedAdsAppliesChangesAndDrainsRemovedSlots() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: slot("same", buffer: 2) + slot("grow", buffer: 1) + slot("gone", buffer: 2)))
        try daemon.waitFor("all full") { try daemon.allSlotsFull() }
        let same = try readyAds(daemon, "same")
        let grow = try readyAds(daemon, "grow")
        let liveBefore = try daemon.simStats()["live"]?.intValue ?? 0
        XCTAssertEqual(liveBefore, 5)

        try simConfig(slots: slot("same", buffer: 2) + slot("grow", buffer: 3) + slot("new", buffer: 1))
            .write(to: daemon.dir.appendingPathComponent("adorchd.toml"), atomically: true, encoding: .utf8)
        let reply = try daemon.call("io.adorch.Manager.Reload")
        XCTAssertEqual(reply["summary"]?.stringValue?.hasPrefix("3 slots"), true)
        XCTAssertEqual(try daemon.slots().map { $0["id"]?.stringValue }, ["same", "grow", "new"])
        XCTAssertEqual(try readyAds(daemon, "same"), same, "an unchanged slot keeps its very ads")
        try daemon.waitFor("grow and new full") { try daemon.allSlotsFull() }
        let grown = try readyAds(daemon, "grow")
        XCTAssertEqual(grown.count, 3)
        XCTAssertTrue(Set(grow).isSubset(of: Set(grown)), "a changed slot keeps the ads still valid")
        XCTAssertEqual(try readyAds(daemon, "same"), same)
        let sim = try daemon.simStats()
        XCTAssertEqual(sim["destroys"]?.intValue, 2, "the removed slot's two ads were destroyed through the plugin")
        XCTAssertEqual(sim["live"]?.intValue, 6)
        XCTAssertTrue(daemon.log.contains("reload done: 3 slots"), daemon.log)

        // A broken config is refused as a whole.
        try (simConfig(slots: slot("same", buffer: 2)) + "\n[[slots]]\nid = \"x\"\nformat = \"popup\"\n")
            .write(to: daemon.dir.appendingPathComponent("adorchd.toml"), atomically: true, encoding: .utf8)
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Manager.Reload")
        XCTAssertEqual(error, "io.adorch.Manager.ReloadFailed")
        XCTAssertEqual(parameters["message"]?.stringValue?.contains("key slots[1].format: expected one of rewarded, fullscreen, interstitial"), true)
        XCTAssertEqual(try daemon.slots().map { $0["id"]?.stringValue }, ["same", "grow", "new"], "the old config keeps serving")
        XCTAssertEqual(try readyAds(daemon, "same"), same)
        XCTAssertTrue(daemon.log.contains("reload failed, keeping the running config"), daemon.log)

        // A header on which TOMLKit's parser would abort (found by the config fuzzer) is
        // refused the same way, with where and why.
        try (simConfig(slots: slot("same", buffer: 2)) + "\n[[[slots]]\n")
            .write(to: daemon.dir.appendingPathComponent("adorchd.toml"), atomically: true, encoding: .utf8)
        let (crashError, crashParameters) = try daemon.callExpectingError("io.adorch.Manager.Reload")
        XCTAssertEqual(crashError, "io.adorch.Manager.ReloadFailed")
        XCTAssertEqual(crashParameters["message"]?.stringValue?.contains(", column 3: not valid TOML: a table header must start with a key (a letter, digit, '-', '_' or a quoted key), saw '['"), true, "\(crashParameters)")
        XCTAssertEqual(try readyAds(daemon, "same"), same, "still serving the old config")
    }
}
