import AdorchVarlink
import Foundation
import XCTest

/// The plugin author's path end to end: `make install DESTDIR=…`, then the guide's own
/// mynet.c (plugins/README.md), kept outside the repository, built with cc and pkg-config
/// against the installed header; it passes the installed validator and serves a real daemon.
final class PluginKitTests: XCTestCase {
    func testAPluginBuiltOutOfTreeWithPkgConfigLoadsAndPassesTheValidator() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-kit-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let stage = scratch.appendingPathComponent("stage")
        let prefix = stage.appendingPathComponent("usr/local")

        // The build this test runs from (a sanitizer run's too) is what gets installed. Its
        // compile step is the one `swift test` already ran, and must not run again: SwiftPM
        // holds the build folder's lock while tests run, so SWIFT=true stands in for it.
        let install = try runCommand("/usr/bin/env", ["make", "-s", "-C", packageRoot.path, "install", "SWIFT=true", "CONFIGURATION=debug",
                                                      "BUILD_PATH=\(buildPath.path)", "DESTDIR=\(stage.path)"])
        XCTAssertEqual(install.status, 0, install.stderr)
        for file in ["include/adorch/plugin.h", "share/pkgconfig/adorch-plugin.pc", "bin/adorch-plugin-validate", "share/doc/adorch/plugins/README.md"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(file).path), "installed \(file)")
        }

        // The guide's plugin, in a folder of its own.
        let source = scratch.appendingPathComponent("mynet")
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        let guide = try String(contentsOf: packageRoot.appendingPathComponent("plugins/README.md"), encoding: .utf8)
        let code = try XCTUnwrap(guide.firstMatch(of: /<!-- guide:mynet\.c[^\n]*-->\n```c\n(?<code>[\s\S]*?)```/)?.code)
        try String(code).write(to: source.appendingPathComponent("mynet.c"), atomically: true, encoding: .utf8)

        let pkgConfig = ["PKG_CONFIG_PATH": prefix.appendingPathComponent("share/pkgconfig").path, "PKG_CONFIG_SYSROOT_DIR": stage.path]
        let header = try String(contentsOf: prefix.appendingPathComponent("include/adorch/plugin.h"), encoding: .utf8)
        let abi = ["MAJOR", "MINOR"].compactMap { header.firstMatch(of: try! Regex("#define ADORCH_PLUGIN_ABI_\($0) (\\d+)"))?.output[1].substring }.joined(separator: ".")
        let version = try runCommand("/usr/bin/env", ["pkg-config", "--modversion", "adorch-plugin"], environment: pkgConfig)
        XCTAssertEqual(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines), abi, version.stderr)
        let build = try runCommand("/bin/sh", ["-c", """
            cd '\(source.path)' && cc $(pkg-config --cflags adorch-plugin) -shared -fPIC -fvisibility=hidden -O2 -Wall -Wextra -Werror \
              -o libadorch-plugin-mynet.so mynet.c -pthread
            """], environment: pkgConfig)
        XCTAssertEqual(build.status, 0, build.stderr)
        let plugin = source.appendingPathComponent("libadorch-plugin-mynet.so").path

        let validate = try runCommand(prefix.appendingPathComponent("bin/adorch-plugin-validate").path, [plugin, "--iterations", "2000", "--call-bound-ms", String(validatorCallBoundMs)])
        XCTAssertEqual(validate.status, 0, validate.stdout)
        XCTAssertTrue(validate.stdout.contains("PASS  entry: mynet 0.1.0, ABI \(abi), formats interstitial"), validate.stdout)
        // All run but the one for plugins that track impressions themselves, which mynet does not.
        XCTAssertNotNil(validate.stdout.firstMatch(of: /(\d+) checks: \d+ passed, 0 failed, 1 skipped\n$/), validate.stdout)
        XCTAssertTrue(validate.stdout.contains("SKIP  impressions: a self-tracking plugin reports each once: the payload leaves impressions to the host"), validate.stdout)

        // Installed where the daemon looks for plugins, and served.
        let pluginDir = prefix.appendingPathComponent("lib/adorch/plugins")
        let installPlugin = try runCommand("/usr/bin/env", ["install", "-m644", plugin, pluginDir.path + "/"])
        XCTAssertEqual(installPlugin.status, 0, installPlugin.stderr)
        let daemon = try DaemonProcess(config: """
        [plugins.mynet]

        [[slots]]
        id = "level_end"
        format = "interstitial"
        buffer = 2
          [[slots.waterfall]]
          plugin = "mynet"
        """, pluginDir: pluginDir.path)
        try daemon.waitFor("level_end full from mynet") { try daemon.allSlotsFull() }
        XCTAssertTrue(daemon.log.contains("plugin mynet loaded: mynet 0.1.0, ABI \(abi), interstitial, from \(pluginDir.path)/libadorch-plugin-mynet.so"), daemon.log)
        let shown = try daemon.call("io.adorch.Ads.Show", ["slot": "level_end"])
        XCTAssertEqual(shown["ad"]?["network"]?.stringValue, "mynet", "\(shown)")
        XCTAssertEqual(daemon.stop(), 0)
    }
}
