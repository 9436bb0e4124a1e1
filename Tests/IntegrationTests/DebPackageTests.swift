import AdorchPluginHost
import AdorchVarlink
import Foundation
import VASTFixtures
import XCTest

/// The Debian package (`make deb`): lintian, then `dpkg -i` into a private root where no Swift
/// toolchain is visible, a real systemd runs the installed units, and a client calls the daemon.
/// The namespace work is in Tests/system/deb.sh; the checks are here.
final class DebPackageTests: XCTestCase {
    func testThePackageInstallsRunsAndGoesAwayWithoutTheToolchain() throws {
        try XCTSkipIf(Sanitizer.isActive, "the package is built from the release build, which a sanitizer run (make asan, make tsan) does not make")
        let out = try scratch("deb")
        let docs = out.appendingPathComponent("vast-docs")
        try FileManager.default.createDirectory(at: docs, withIntermediateDirectories: true)
        try Docs(base: "{BASE}/t").inline().write(to: docs.appendingPathComponent("inline.xml"), atomically: true, encoding: .utf8)
        try runScript("deb.sh", [out.path, packageRoot.path])
        func text(_ name: String) -> String {
            ((try? String(contentsOf: out.appendingPathComponent(name), encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        XCTAssertEqual(text("done.txt"), "done", text("launcher.log") + text("console.log"))

        // The package: lintian finds no error, Depends is computed, the files are where Debian wants them.
        let lintian = text("lintian.txt")
        XCTAssertEqual(text("lintian-exit.txt"), "0", lintian)
        XCTAssertFalse(lintian.split(separator: "\n").contains { $0.hasPrefix("E:") }, lintian)
        let fields = text("fields.txt")
        for dependency in ["libsystemd0", "libsqlite3-0", "libcurl4", "libxml2", "libjansson4", "python3", "systemd", "procps"] {
            XCTAssertNotNil(fields.range(of: "\\b\(dependency)\\b", options: .regularExpression), "Depends names \(dependency): \(fields)")
        }
        let contents = text("contents.txt")
        let libdir = "/usr/lib/" + text("multiarch.txt")
        for path in ["./usr/bin/adorchd", "./usr/bin/adorchctl", "./usr/bin/adorch-plugin-validate",
                     "./usr/lib/adorch/plugins/libadorch-plugin-sim.so", "./usr/lib/adorch/plugins/libadorch-plugin-vast.so",
                     "./usr/lib/adorch/plugins/libadorch-plugin-swift-example.so",
                     "./usr/lib/systemd/system/adorchd.service", "./usr/lib/systemd/system/adorchd.socket",
                     "./usr/lib/sysusers.d/adorch.conf", "./usr/lib/systemd/catalog/adorchd.catalog", "./etc/adorch/adorchd.toml",
                     "./usr/include/adorch/plugin.h", "./usr/share/pkgconfig/adorch-plugin.pc",
                     "./usr/include/adorch/client.h", ".\(libdir)/pkgconfig/adorch-client.pc", ".\(libdir)/libadorch-client.so.0", "./usr/share/doc/adorch/docs/rules.md",
                     "./usr/share/doc/adorch/examples/python/rewarded.py",
                     "./usr/lib/python3/dist-packages/adorch/__init__.py",
                     "./usr/share/doc/adorch/copyright", "./usr/share/doc/adorch/changelog.Debian.gz", "./usr/share/man/man1/adorchd.1.gz"] {
            XCTAssertTrue(contents.split(separator: "\n").contains { $0.hasSuffix(" " + path) || $0.contains(" " + path + " -> ") },
                          "the package holds \(path)")
        }

        // The private root shows no toolchain, and every installed ELF file resolves without it.
        XCTAssertEqual(text("toolchain.txt").split(separator: "\n"), ["no swift", "0"], "no swift on PATH, /opt/swift empty")
        let ldd = text("ldd.txt")
        for file in ["/usr/bin/adorchd", "/usr/bin/adorchctl", "/usr/bin/adorch-plugin-validate", "/usr/lib/adorch/plugins/libadorch-plugin-sim.so",
                     "/usr/lib/adorch/plugins/libadorch-plugin-swift-example.so", "/usr/lib/adorch/plugins/libadorch-plugin-vast.so",
                     "\(libdir)/libadorch-client.so.0"] {
            XCTAssertTrue(ldd.contains("== \(file)\n"), "ldd ran on \(file)")
        }
        XCTAssertFalse(ldd.contains("not found"), ldd)
        XCTAssertFalse(ldd.contains("/opt/swift"), ldd)
        XCTAssertFalse(ldd.contains("libswift") || ldd.contains("libFoundation") || ldd.contains("libdispatch"), ldd)

        // dpkg -i: the maintainer scripts made the user and the catalog and enabled the socket,
        // and started nothing.
        XCTAssertEqual(text("dpkg-install-exit.txt"), "0", text("dpkg-install.log"))
        XCTAssertTrue(text("user.txt").hasPrefix("adorch:"), text("user.txt"))
        XCTAssertTrue(text("catalog.txt").contains("3b28691854264dadac70945aed5cc4e2"), "journalctl --update-catalog ran")
        XCTAssertEqual(text("enabled.txt"), "enabled")
        XCTAssertEqual(text("after-install.txt").split(separator: "\n"), ["inactive", "inactive"], "nothing was started")

        // The client call through the socket, which started the service.
        XCTAssertEqual(text("socket-active.txt"), "active")
        let status = try XCTUnwrap(JSONValue.parse(Data(text("status.json").utf8)), text("status.err"))
        XCTAssertEqual(status["slots"]?.arrayValue?.count, 7, text("status.json"))
        let plugins = status["plugins"]?.arrayValue ?? []
        XCTAssertEqual(plugins.filter { $0["state"]?.stringValue == "loaded" }.compactMap { $0["name"]?.stringValue }.sorted(),
                       ["sim", "swift-example", "vast"], "the daemon loaded the C plugin and both Swift plugins: \(text("status.json"))")
        XCTAssertEqual(text("service-after-call.txt"), "active")
        // The client libraries, installed by the package, each showed a rewarded ad and got its reward.
        XCTAssertEqual(text("python-module.txt"), "/usr/lib/python3/dist-packages/adorch/__init__.py", "the installed package, not the repository's")
        XCTAssertEqual(text("python-client-exit.txt"), "0", text("python-client.txt"))
        XCTAssertNotNil(text("python-client.txt").firstMatch(of: /reward: \d+ \w+ for example-user/), text("python-client.txt"))
        XCTAssertEqual(text("c-client-exit.txt"), "0", text("c-client.txt"))
        XCTAssertTrue(text("c-client.txt").contains("reward: "), text("c-client.txt"))
        // Both Swift plugins, each with its private runtime, pass the validator (as many checks
        // as PluginValidatorTests asks of them): vast fetched and parsed its documents.
        for (plugin, minimum) in [("swift", 25), ("vast", 35)] {
            let report = text("validate-\(plugin).txt")
            XCTAssertEqual(text("validate-\(plugin)-exit.txt"), "0", report)
            let summary = report.firstMatch(of: /(\d+) checks: (\d+) passed, 0 failed/)
            XCTAssertGreaterThanOrEqual(summary.map { Int($0.2)! } ?? 0, minimum, report)
        }

        // Remove stops everything and keeps the config; purge takes the config and the state.
        XCTAssertEqual(text("dpkg-remove-exit.txt"), "0", text("dpkg-remove.log"))
        XCTAssertEqual(text("after-remove.txt").split(separator: "\n").filter { $0 == "active" }, [], text("after-remove.txt"))
        XCTAssertEqual(text("leftover.txt"), "", "no adorchd process left")
        XCTAssertTrue(text("after-remove-files.txt").contains("adorchd.toml"), text("after-remove-files.txt"))
        XCTAssertEqual(text("dpkg-purge-exit.txt"), "0", text("dpkg-purge.log"))
        XCTAssertEqual(text("after-purge.txt").split(separator: "\n"), ["/etc/adorch gone", "/var/lib/adorch gone"])

        let cgroup = text("cgroup.txt")
        XCTAssertTrue(cgroup.hasPrefix("/sys/fs/cgroup/unified/adorch-deb-"), cgroup)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cgroup), "the test's cgroups are removed")
    }
}
