import AdorchPluginHost
import AdorchVarlink
import Foundation
import XCTest

/// plugin.h's evolution rule with real compilers and the real daemon: a plugin built
/// against the frozen 1.0 header (Fixtures/abi-1.0) still loads, serves and passes the
/// validator, and is never sent an event 1.0 did not have; a plugin of the next minor loads
/// with only the part of its entry this host knows.
final class PluginABIEvolutionTests: XCTestCase {
    private var build: URL!

    override func setUpWithError() throws {
        build = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-abi-minor-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: build, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: build) }

    private let fixtures = packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures")

    /// cc -shared with warnings as errors; the plugin's path.
    private func compile(_ source: URL, include: URL, defines: [String] = [], as name: String) throws -> String {
        let output = build.appendingPathComponent("libadorch-plugin-\(name).so").path
        let run = try runCommand("/usr/bin/env", ["cc", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-I", include.path]
            + defines + [source.path, "-o", output])
        guard run.status == 0 else { throw TestFailure("cc \(source.lastPathComponent): \(run.stderr)") }
        return output
    }

    private func validate(_ plugin: String) throws -> (status: Int32, stdout: String) {
        let run = try runCommand(productsDirectory.appendingPathComponent("adorch-plugin-validate").path, [plugin, "--iterations", "1000", "--call-bound-ms", String(validatorCallBoundMs)])
        return (run.status, run.stdout)
    }

    func testPluginsBuiltAgainstTheOneZeroHeaderLoadServeAndPassTheValidator() throws {
        let old = fixtures.appendingPathComponent("abi-1.0")
        XCTAssertTrue(try String(contentsOf: old.appendingPathComponent("adorch/plugin.h"), encoding: .utf8).contains("#define ADORCH_PLUGIN_ABI_MINOR 0"))
        let example = try compile(packageRoot.appendingPathComponent("plugins/example/example.c"), include: old, as: "oldexample")
        let minor = try compile(fixtures.appendingPathComponent("minor_plugin.c"), include: old, as: "minor")

        for plugin in [example, minor] {
            let (status, stdout) = try validate(plugin)
            XCTAssertEqual(status, 0, stdout)
            XCTAssertTrue(stdout.contains("ABI 1.0, formats"), stdout)
        }

        // A plugin older than 1.4 gets only loads that need no privacy signal: personalised
        // ones for viewers who set nothing, once the operator says such viewers allow that.
        let daemon = try DaemonProcess(config: """
        [privacy]
        unset_viewer = "personalized"

        [plugins.oldexample]
        path = "\(example)"
        [plugins.minor]
        path = "\(minor)"

        [[slots]]
        id = "example"
        format = "rewarded"
          [[slots.waterfall]]
          plugin = "oldexample"

        [[slots]]
        id = "minor"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "minor"
        """)
        try daemon.waitFor("both slots full") { try daemon.allSlotsFull() }
        XCTAssertEqual(try daemon.pluginStatus("oldexample")["abi"]?.stringValue, "1.0")
        XCTAssertEqual(try daemon.pluginStatus("minor")["state"]?.stringValue, "loaded")

        // The app reports 1.0's events and 1.1's video progress: the 1.0 plugin hears only the first.
        let ad = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "minor"])["ad"]?["id"]?.stringValue)
        for event in ["impression", "start", "first_quartile", "midpoint", "third_quartile", "click"] {
            let reply = try daemon.client().call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": .string(event)])
            XCTAssertNil(reply.error, "\(event): \(reply)")
        }
        // Click is the last reported and 1.0's: once it arrived, everything before it had.
        try daemon.waitFor("the click reaches the plugin") {
            try daemon.pluginStatus("minor")["stats"]?["highest_event"]?.intValue == 3
        }
        XCTAssertEqual(try daemon.pluginStatus("minor")["stats"]?["highest_event"]?.intValue, 3, "no event above 1.0's CLICK (3) came")
    }

    func testAPluginOfTheNextMinorLoadsWithOnlyTheKnownPartUsed() throws {
        let future = try compile(fixtures.appendingPathComponent("minor_plugin.c"), include: packageRoot.appendingPathComponent("Sources/CAdorchPlugin/include"),
                                 defines: ["-DFROM_THE_FUTURE"], as: "future")
        let (status, stdout) = try validate(future)
        XCTAssertEqual(status, 0, stdout)
        // The next minor after this host's: 1.2 when the host spoke 1.1, and so on.
        let next = "\(PluginABI.major).\(PluginABI.minor + 1)", this = "\(PluginABI.major).\(PluginABI.minor)"
        XCTAssertTrue(stdout.contains("ABI \(next), formats interstitial"), stdout)
        XCTAssertTrue(stdout.contains("format bit 20 unknown here and ignored"), stdout)

        let daemon = try DaemonProcess(config: """
        [plugins.future]
        path = "\(future)"

        [[slots]]
        id = "s"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "future"
        """)
        try daemon.waitFor("s full from the newer plugin") { try daemon.allSlotsFull() }
        let loaded = daemon.log.split(separator: "\n").filter { $0.contains("plugin future loaded") }
        XCTAssertEqual(loaded.count, 1, daemon.log)
        XCTAssertTrue(loaded.first?.contains("ABI \(next) (newer than this daemon's ABI \(this): what \(next) added is not used), interstitial, from") ?? false, "\(loaded)")
        // Shown and reported on: its unknown function (which aborts) is never called.
        let ad = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "s"])["ad"]?["id"]?.stringValue)
        XCTAssertNil(try daemon.client().call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "impression"]).error)
        XCTAssertEqual(try daemon.pluginStatus("future")["abi"]?.stringValue, next)
        XCTAssertTrue(daemon.isRunning)
    }
}
