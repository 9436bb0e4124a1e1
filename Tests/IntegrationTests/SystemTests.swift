import AdorchPrivacy
import AdorchVarlink
import Foundation
import XCTest

/// For the scripts of Tests/system (SystemTests, DebPackageTests): a scratch folder per test.
extension XCTestCase {
    func scratch(_ name: String) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }

    /// Runs a script of Tests/system; its exit 77 means "cannot be done on this machine".
    func runScript(_ name: String, _ arguments: [String]) throws {
        let result = try runCommand(packageRoot.appendingPathComponent("Tests/system/\(name)").path, arguments)
        if result.status == 77 { throw XCTSkip("\(name): \(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines))") }
        XCTAssertEqual(result.status, 0, "\(name) failed:\n\(result.stdout)\n\(result.stderr)")
    }
}

/// Issue 3 against the real thing: journald, the catalog, systemd-analyze, and a real
/// systemd booted in private namespaces. The namespace work is in Tests/system/*.sh; the
/// checks are here.
final class SystemTests: XCTestCase {
    private func entries(_ file: URL) throws -> [[String: JSONValue]] {
        try String(contentsOf: file, encoding: .utf8).split(separator: "\n").compactMap { JSONValue.parse(Data($0.utf8))?.objectValue }
    }

    private var messageIDs: [String: String] {
        // The ids as the daemon defines them, read from its source: the catalog must cover each.
        let source = (try? String(contentsOf: packageRoot.appendingPathComponent("Sources/AdorchDaemon/MessageID.swift"), encoding: .utf8)) ?? ""
        var ids: [String: String] = [:]
        for match in source.matches(of: /case (\w+) = "([0-9a-f]{32})"/) { ids[String(match.1)] = String(match.2) }
        return ids
    }

    /// Acceptance 1: every log line is a journal entry with its fields and MESSAGE_ID, and
    /// journalctl -x explains them from the catalog.
    func testEveryLogLineIsAJournalEntryWithFieldsAndACatalogExplanation() throws {
        let out = try scratch("journald")
        // A TC string (consented to purposes 1 to 10, for vendors 1 to 10): for the check that the journal never holds it whole.
        let tcString = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA"
        try tcString.write(to: out.appendingPathComponent("tc-string"), atomically: true, encoding: .utf8)
        try runScript("journald.sh", [out.path, productsDirectory.path, packageRoot.path])
        XCTAssertEqual(try String(contentsOf: out.appendingPathComponent("exit"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), "0")
        XCTAssertEqual(try String(contentsOf: out.appendingPathComponent("stderr"), encoding: .utf8), "", "nothing went to stderr: every line is in the journal")
        let ids = messageIDs
        XCTAssertEqual(ids.count, 17)

        let all = try entries(out.appendingPathComponent("all.json"))
        func with(_ id: String?) -> [[String: JSONValue]] { all.filter { $0["MESSAGE_ID"]?.stringValue == id } }
        XCTAssertEqual(with(ids["daemonReady"]).count, 1)
        XCTAssertEqual(with(ids["daemonStopping"]).count, 1)
        XCTAssertEqual(with(ids["pluginLoaded"]).first?["PLUGIN"]?.stringValue, "sim")

        let shownAd = try XCTUnwrap(JSONValue.parse(try Data(contentsOf: out.appendingPathComponent("ad.json")))?["ad"]?["id"]?.stringValue)
        let slot = try entries(out.appendingPathComponent("slot.json"))
        XCTAssertTrue(slot.allSatisfy { $0["SLOT"]?.stringValue == "rewarded_main" })
        let loaded = slot.filter { $0["MESSAGE_ID"]?.stringValue == ids["adLoaded"] }
        let shown = slot.filter { $0["MESSAGE_ID"]?.stringValue == ids["adShown"] }
        XCTAssertGreaterThanOrEqual(loaded.count, 1)
        XCTAssertEqual(shown.count, 1)
        XCTAssertEqual(shown.first?["AD_ID"]?.stringValue, shownAd)
        // The user id is personal data: the journal has a tag in its place, and nowhere the id.
        XCTAssertNil(shown.first?["USER_ID"])
        XCTAssertEqual(shown.first?["USER_TAG"]?.stringValue?.count, 16)
        XCTAssertFalse(slot.contains { JSONValue.object($0).jsonString.contains("u-journal") }, "the user id reached the journal")
        XCTAssertTrue(loaded.contains { $0["AD_ID"]?.stringValue == shownAd }, "the shown ad's load is there too")
        // A consent string is personal data too: the SetPrivacy line is there, the string only redacted.
        let privacySet = (try? String(contentsOf: out.appendingPathComponent("privacy.txt"), encoding: .utf8)) ?? ""
        let setLine = all.compactMap { $0["MESSAGE"]?.stringValue }.first { $0.contains("privacy: uid 0 set the signals of one of its users") }
        XCTAssertTrue(setLine?.contains("tc_string=\(ConsentRedaction.redact(tcString))") == true, "\(setLine ?? "no SetPrivacy line") \(privacySet)")
        XCTAssertFalse(all.contains { JSONValue.object($0).jsonString.contains(tcString) }, "the TC string reached the journal whole")
        for entry in loaded + shown {
            XCTAssertEqual(entry["NETWORK"]?.stringValue, "sim")
            XCTAssertEqual(entry["PRIORITY"]?.stringValue, "6")
            XCTAssertEqual(entry["SYSLOG_IDENTIFIER"]?.stringValue, "adorchd")
            for field in ["CODE_FILE", "CODE_LINE", "CODE_FUNC"] { XCTAssertNotNil(entry[field], field) }
        }

        // Issue 8: a refused caller is a warning naming the uid, its pid and the method.
        let denied = try String(contentsOf: out.appendingPathComponent("denied.txt"), encoding: .utf8)
        XCTAssertTrue(denied.contains("io.adorch.Manager.PermissionDenied: uid 5555 is not allowed to use io.adorch.Manager"), denied)
        let refusal = try XCTUnwrap(with(ids["permissionDenied"]).first, "a permission_denied entry")
        XCTAssertEqual(refusal["PEER_UID"]?.stringValue, "5555")
        XCTAssertEqual(refusal["METHOD"]?.stringValue, "io.adorch.Manager.GetStatus")
        XCTAssertNotNil(refusal["PEER_PID"]?.stringValue.flatMap { Int($0) })
        XCTAssertEqual(refusal["PRIORITY"]?.stringValue, "4")

        let explained = try String(contentsOf: out.appendingPathComponent("explained.txt"), encoding: .utf8)
        for subject in ["Subject: adorchd is ready", "Subject: An ad was loaded", "Subject: An ad was shown", "Subject: adorchd is stopping",
                        "Subject: A caller was refused a method"] {
            XCTAssertTrue(explained.contains(subject), "journalctl -x explains: \(subject)")
        }
        let catalog = try String(contentsOf: out.appendingPathComponent("catalog.txt"), encoding: .utf8)
        for (name, id) in ids { XCTAssertTrue(catalog.contains("-- \(id)"), "the catalog explains \(name)") }
    }

    /// Acceptance 6: a real systemd in private namespaces runs the project's own units from
    /// a DESTDIR install: socket start, activation by the first call, STATUS in systemctl
    /// status, a reload that keeps ad ids, and a stop with exit 0 and nothing left running.
    func testARealSystemdRunsTheInstalledUnits() throws {
        let out = try scratch("systemd")
        try runScript("systemd.sh", [out.path, packageRoot.path, buildPath.path])
        func text(_ name: String) -> String {
            ((try? String(contentsOf: out.appendingPathComponent(name), encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let console = text("console.log")
        XCTAssertEqual(text("done.txt"), "done", text("launcher.log") + console)
        XCTAssertEqual(text("socket-active.txt"), "active")
        XCTAssertEqual(text("service-before.txt"), "inactive", "nothing runs before the first call")
        XCTAssertEqual(JSONValue.parse(Data(text("first-call.json").utf8))?["slots"]?.arrayValue?.count, 7, text("first-call.err"))
        XCTAssertEqual(text("service-after.txt"), "active", "the first call started the service")
        XCTAssertNotNil(text("status.txt").range(of: #"Status: "7 slots, \d/5 ads ready, 1 plugins""#, options: .regularExpression), text("status.txt"))
        XCTAssertTrue(text("status.txt").contains("TriggeredBy: ● adorchd.socket"), text("status.txt"))
        XCTAssertEqual(text("reload.txt"), "ok", text("reload.err"))
        // A client library's subscription outlives `systemctl restart`: socket activation keeps
        // the socket, the client subscribes again and hears a Show made after the restart.
        let pids = text("restart-pids.txt").split(separator: "\n")
        XCTAssertEqual(pids.count, 2, text("restart-pids.txt"))
        XCTAssertNotEqual(pids.first, pids.last, "systemctl restart started a new adorchd")
        let probe = text("restart-probe.txt")
        XCTAssertEqual(text("restart-probe-exit.txt"), "0", probe)
        let restartAd = JSONValue.parse(Data(text("restart-show.json").utf8))?["ad"]?["id"]?.stringValue
        XCTAssertTrue(probe.contains("RESUMED \(try XCTUnwrap(restartAd, text("restart-show.json")))"), probe)
        XCTAssertTrue(probe.contains("LOG adorch: subscription on /run/adorch/adorchd.sock lost"), "the retry is logged: \(probe)")
        XCTAssertEqual(probe.components(separatedBy: "EVENT subscribed").count - 1, 1, "one subscribed event: \(probe)")
        // Apps keep their own uids through the unit's sandbox: another app's report is refused.
        XCTAssertNotNil(JSONValue.parse(Data(text("app1-show.json").utf8))?["ad"]?["id"]?.stringValue, text("app1-show.err"))
        XCTAssertTrue(text("app2-report.txt").contains("AdNotValid"), text("app2-report.txt"))
        // Without naming the uid the ad was handed to: another app has no business knowing it.
        XCTAssertFalse(text("app2-report.txt").contains("uid \(text("app1-uid.txt"))"), text("app2-report.txt"))
        let state = text("state-dir.txt").split(separator: "\n")
        XCTAssertEqual(state.first, "700 adorch", "the state directory is the daemon's alone")
        XCTAssertTrue(state.contains("adorch.sqlite"), "the ledger is in the unit's StateDirectory: \(state)")
        let before = JSONValue.parse(Data(text("before-reload.json").utf8))?["slots"]?.arrayValue ?? []
        let after = JSONValue.parse(Data(text("after-reload.json").utf8))?["slots"]?.arrayValue ?? []
        XCTAssertEqual(before.count, 7)
        XCTAssertEqual(before.map { $0["ready_ads"] }, after.map { $0["ready_ads"] }, "systemctl reload kept every ready ad")
        XCTAssertEqual(before.first?["ready_ads"]?.arrayValue?.count, 2)
        // Issue 22: an in-process plugin's SIGSEGV kills adorchd; the unit's Restart=on-failure brings it back.
        XCTAssertEqual(text("crash-policy.txt").split(separator: "\n").sorted(), ["Restart=on-failure", "RestartUSec=2s"])
        // Killed (2) or, where a core pattern takes the dump, dumped (3): by SIGSEGV either way.
        let crash = Dictionary(text("crash-exit.txt").split(separator: "\n").map { $0.split(separator: "=", maxSplits: 1).map(String.init) }
            .filter { $0.count == 2 }.map { ($0[0], $0[1]) }, uniquingKeysWith: { $1 })
        XCTAssertEqual(crash["ExecMainStatus"], "\(SIGSEGV)", text("crash-exit.txt") + text("crash-show.txt"))
        XCTAssertTrue(["2", "3"].contains(crash["ExecMainCode"]) && ["signal", "core-dump"].contains(crash["Result"]), text("crash-exit.txt"))
        XCTAssertEqual(crash["SubState"], "auto-restart", "systemd restarts it after RestartSec")
        let crashRestarts = text("crash-restarts.txt").split(separator: " ").compactMap { Int($0) }
        XCTAssertEqual(crashRestarts.count, 2, text("crash-restarts.txt"))
        XCTAssertEqual(crashRestarts.last, crashRestarts.first.map { $0 + 1 }, "systemd restarted it once")
        let crashPIDs = text("crash-pids.txt").split(separator: " ")
        XCTAssertEqual(crashPIDs.count, 2, text("crash-pids.txt"))
        XCTAssertNotEqual(crashPIDs.first, crashPIDs.last, "a new main process")
        XCTAssertNotNil(JSONValue.parse(Data(text("crash-after.json").utf8))?["slots"], "the new daemon answers: " + text("crash-after.err"))
        XCTAssertEqual(text("stopped.txt").split(separator: "\n").sorted(),
                       ["ActiveState=inactive", "ExecMainCode=1", "ExecMainStatus=0", "Result=success"].sorted(),
                       "stopped cleanly with exit status 0")
        XCTAssertEqual(text("leftover.txt"), "", "no adorchd process left")
        let cgroup = text("cgroup.txt")
        XCTAssertTrue(cgroup.hasPrefix("/sys/fs/cgroup/unified/adorch-st-"), cgroup)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cgroup), "the test's cgroups are removed")
    }

    /// Acceptance 5: both units verify, and the service rates at most 2.0 (OK or SAFE).
    func testTheUnitsVerifyAndTheServiceIsHardened() throws {
        let prefix = try scratch("units")
        let install = try runCommand("/usr/bin/env", ["make", "-s", "-C", packageRoot.path, "install-files", "CONFIGURATION=debug", "BUILD_PATH=\(buildPath.path)",
                                                      "PREFIX=\(prefix.path)", "SYSCONFDIR=\(prefix.path)/etc"])
        XCTAssertEqual(install.status, 0, install.stderr)
        let units = prefix.appendingPathComponent("lib/systemd/system")
        let service = units.appendingPathComponent("adorchd.service").path
        let verify = try runCommand("/usr/bin/systemd-analyze", ["verify", service, units.appendingPathComponent("adorchd.socket").path])
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
        let security = try runCommand("/usr/bin/systemd-analyze", ["security", "--offline=yes", "--threshold=20", service])
        XCTAssertEqual(security.status, 0, security.stdout)
        let score = security.stdout.firstMatch(of: /Overall exposure level for adorchd.service: (\d+\.\d+)/).map { Double($0.1)! }
        XCTAssertLessThanOrEqual(try XCTUnwrap(score), 2.0)
    }
}
