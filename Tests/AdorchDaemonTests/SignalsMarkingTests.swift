@testable import AdorchDaemon
import AdorchEngine
import AdorchPluginHost
import Foundation
import Logging
import XCTest

/// The daemon marks the waterfall entries of a plugin that cannot receive a load's privacy
/// signals (built for ABI 1.3 or older, or never loaded) for the engine (NetworkPrivacy.receivesSignals),
/// from the real plugin files: sim, built for this header, and a plugin built against the
/// frozen 1.3 header (Tests/IntegrationTests/Fixtures/abi-1.3).
final class SignalsMarkingTests: XCTestCase {
    private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Fixtures/minor_plugin.c built with cc against the 1.3 header, in a folder of the test's own.
    private func oneThreePlugin() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-marking-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        let fixtures = packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures")
        let output = dir.appendingPathComponent("libadorch-plugin-old.so").path
        let cc = Process()
        cc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        cc.arguments = ["cc", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-I", fixtures.appendingPathComponent("abi-1.3").path,
                        fixtures.appendingPathComponent("minor_plugin.c").path, "-o", output]
        try cc.run()
        cc.waitUntilExit()
        XCTAssertEqual(cc.terminationStatus, 0, "cc minor_plugin.c against the 1.3 header")
        return output
    }

    func testEntriesOfAOneThreePluginAndOfOneNeverLoadedAreMarkedAsReceivingNoSignals() throws {
        let old = try oneThreePlugin()
        let sim = Bundle.main.bundleURL.appendingPathComponent("libadorch-plugin-sim.so").path
        // The files' owners are not the subject here (PluginFileTrust has its own tests).
        let registry = PluginRegistry(logger: Logger(label: "test"), options: DaemonOptions(insecurePlugins: true))
        registry.load([PluginConfig(name: "sim", path: sim, configJSON: "{}"), PluginConfig(name: "old", path: old, configJSON: "{}"),
                       PluginConfig(name: "absent", path: "/nonexistent/libadorch-plugin-absent.so", configJSON: "{}")], dirs: nil)
        defer { registry.shutdownAll() }
        XCTAssertEqual(registry.infos["sim"]?.abiMinor, PluginABI.minor)
        XCTAssertEqual(registry.infos["old"]?.abiMinor, 3)
        XCTAssertNotNil(registry.refusals["absent"])

        let entries = [WaterfallEntry(plugin: "old", adUnitID: "o", privacy: NetworkPrivacy(gvlID: 7, servesChildren: true)),
                       WaterfallEntry(plugin: "sim", adUnitID: "s"), WaterfallEntry(plugin: "absent")]
        let slots = [SlotConfig(id: "a", format: .interstitial, waterfall: entries), SlotConfig(id: "b", format: .rewarded, waterfall: entries.reversed())]
        let marked = registry.markingSignals(slots)
        XCTAssertEqual(marked[0].waterfall.map(\.privacy.receivesSignals), [false, true, false])
        XCTAssertEqual(marked[1].waterfall.map(\.privacy.receivesSignals), [false, true, false])
        // Only the mark changes: what the network declared stays as the config said.
        XCTAssertEqual(marked[0].waterfall[0].privacy.gvlID, 7)
        XCTAssertTrue(marked[0].waterfall[0].privacy.servesChildren)
        var unmarked = marked
        for s in unmarked.indices { for e in unmarked[s].waterfall.indices { unmarked[s].waterfall[e].privacy.receivesSignals = true } }
        XCTAssertEqual(unmarked, slots)
    }
}
