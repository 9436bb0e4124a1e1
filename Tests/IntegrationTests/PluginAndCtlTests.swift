import AdorchPluginHost
import AdorchVarlink
import Foundation
import XCTest

/// The example plugin (the template authors copy) really works, and adorchctl's commands
/// do what their help says against a running daemon.
final class PluginAndCtlTests: XCTestCase {
    func testTheExamplePluginFillsAndServesASlot() throws {
        let daemon = try DaemonProcess(config: """
        [plugins.example]

        [[slots]]
        id = "house"
        format = "fullscreen"
        buffer = 2
          [[slots.waterfall]]
          plugin = "example"
        """)
        try daemon.waitFor("house full") { try daemon.allSlotsFull() }
        let ad = try daemon.call("io.adorch.Ads.Show", ["slot": "house"])["ad"]
        XCTAssertEqual(ad?["network"]?.stringValue, "example")
        XCTAssertEqual(ad?["payload"]?["slot"]?.stringValue, "house")
        let plugin = try daemon.status()["plugins"]?.arrayValue?.first
        XCTAssertEqual(plugin?["state"]?.stringValue, "loaded")
        XCTAssertEqual(plugin?["version"]?.stringValue, "1.0.0")
        XCTAssertNil(plugin?["stats"], "example keeps no counters")
        try daemon.waitFor("house refilled") { try daemon.allSlotsFull() }
    }

    func testAdorchctlShowReportAndEvents() throws {
        let daemon = try DaemonProcess()
        try daemon.waitFor("demo slots full") { try daemon.allSlotsFull() }
        let ctl = productsDirectory.appendingPathComponent("adorchctl").path
        let env = ["ADORCH_SOCKET": daemon.socket]

        let show = try runCommand(ctl, ["show", "fullscreen_main", "--json"], environment: env)
        XCTAssertEqual(show.status, 0, show.stderr)
        let id = try XCTUnwrap(JSONValue.parse(Data(show.stdout.utf8))?["ad"]?["id"]?.stringValue)

        XCTAssertEqual(try runCommand(ctl, ["report", id, "impression"], environment: env).status, 0)
        let twice = try runCommand(ctl, ["report", id, "impression"], environment: env)
        XCTAssertEqual(twice.status, 1)
        XCTAssertTrue(twice.stderr.contains("io.adorch.Ads.AdNotValid: ad \(id) already reported impression"), twice.stderr)

        let rewarded = try runCommand(ctl, ["show", "rewarded_main"], environment: env)
        XCTAssertEqual(rewarded.status, 1)
        XCTAssertTrue(rewarded.stderr.contains("io.adorch.Ads.InvalidParameter: a rewarded slot needs a non-empty user_id"), rewarded.stderr)

        let events = try runCommand(ctl, ["events", "--json", "--slot", "fullscreen_main", "--lines", "100"], environment: env)
        let names = events.stdout.split(separator: "\n").compactMap { JSONValue.parse(Data($0.utf8)) }
            .filter { $0["ad_id"]?.stringValue == id }.compactMap { $0["name"]?.stringValue }
        XCTAssertEqual(names.filter { $0 != "media_cached" }, ["loaded", "shown", "will_present", "presented", "impression"], events.stdout)

        let loaded = try runCommand(ctl, ["load", "native_main", "--count", "2", "--json"], environment: env)
        XCTAssertEqual(loaded.status, 0, loaded.stderr)
        XCTAssertEqual(JSONValue.parse(Data(loaded.stdout.utf8))?["ads"]?.arrayValue?.count, 2)
        let badCount = try runCommand(ctl, ["load", "native_main", "--count", "11"], environment: env)
        XCTAssertEqual(badCount.status, 1)
        XCTAssertTrue(badCount.stderr.contains("io.adorch.Ads.InvalidParameter: a native load takes 1 to 10 ads"), badCount.stderr)

        let status = try runCommand(ctl, ["status"], environment: env)
        XCTAssertTrue(status.stdout.contains("sim     loaded  1.2.0    \(PluginABI.major).\(PluginABI.minor)"), status.stdout)
        XCTAssertTrue(status.stdout.contains("contract_violations=0"), status.stdout)

        let unreachable = try runCommand(ctl, ["slots", "--socket", daemon.dir.appendingPathComponent("nope.sock").path])
        XCTAssertEqual(unreachable.status, 1)
        XCTAssertTrue(unreachable.stderr.contains("cannot reach adorchd at"), unreachable.stderr)
    }
}
