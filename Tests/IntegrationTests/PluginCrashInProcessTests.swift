import AdorchVarlink
import Foundation
import XCTest

/// Issue 22: what a plugin that crashes, or snoops, does to a daemon that runs it in its own
/// process. A crash there is fatal (plugins/README.md, "When a plugin crashes in process"):
/// these tests hold the documentation to what really happens, and sim's faults to their word.
final class PluginCrashInProcessTests: XCTestCase {
    /// sim dlopened into the daemon, not into a host of its own (the default).
    private let inProcess = #"isolation = "in-process""#

    /// A preloaded slot of one sim entry with `parameter`.
    private func slot(_ id: String, _ parameter: String) -> String {
        """
        [[slots]]
        id = "\(id)"
        format = "interstitial"
        buffer = 1
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "\(id)"
          server_parameter = "\(parameter)"
          timeout_ms = 2000

        """
    }

    /// A SIGSEGV in a plugin's ad_show is the daemon's SIGSEGV: it dies mid-call, answering
    /// no one, and every slot's ready ads die with it.
    func testASegfaultInAPluginKillsTheDaemonBySIGSEGV() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: slot("crash_main", "latency_ms=5 misbehave=segv at=show")
            + slot("healthy_main", "latency_ms=5 seed=2"), sim: inProcess))
        try daemon.waitFor("both slots full") { try daemon.allSlotsFull() }

        let client = try daemon.client()
        let reply = try? client.call("io.adorch.Ads.Show", ["slot": "crash_main", "user_id": "u1"])
        XCTAssertNil(reply, "the Show is never answered: the daemon died in it")
        XCTAssertEqual(try daemon.waitForExit(), "signal \(SIGSEGV)", daemon.log)
        XCTAssertThrowsError(try daemon.client(), "no one serves the socket any more, healthy_main's ready ad included")
    }

    /// The same at the 2nd show of the entry, counted in this process: the first Show is served.
    func testAFaultStrikesAtTheNthCall() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: slot("crash_main", "latency_ms=5 misbehave=abort at=show:2"), sim: inProcess))
        try daemon.waitFor("crash_main full") { try daemon.allSlotsFull() }
        XCTAssertNotNil(try daemon.call("io.adorch.Ads.Show", ["slot": "crash_main", "user_id": "u1"])["ad"]?["id"])
        try daemon.waitFor("crash_main full again") { try daemon.allSlotsFull() }
        XCTAssertNil(try? daemon.client().call("io.adorch.Ads.Show", ["slot": "crash_main", "user_id": "u1"]))
        XCTAssertEqual(try daemon.waitForExit(), "signal \(SIGABRT)", daemon.log)
    }

    /// In process, a plugin opens whatever the daemon can, its state directory included.
    /// snoop says so in one warning line a path, at init (from the plugin config) and at a
    /// load (from the server parameter), and otherwise goes on as usual.
    func testInProcessASnoopingPluginOpensTheDaemonsFiles() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-snoop-\(UUID().uuidString.prefix(8))")
        addTeardownBlock { try? FileManager.default.removeItem(at: state) }
        let missing = state.appendingPathComponent("no-such-file").path
        let daemon = try DaemonProcess(config: """
            [plugins.sim]
            \(inProcess)
            config = { misbehave = "snoop", at = "init", snoop = "\(state.path)" }

            """ + slot("snoop_main", "latency_ms=5 misbehave=snoop at=load snoop=\(missing)"), stateDir: state)
        try daemon.waitFor("snoop_main full") { try daemon.allSlotsFull() }
        let lines = daemon.log.split(separator: "\n").filter { $0.contains("sim snoop: ") }
        XCTAssertEqual(lines.count, 2, daemon.log)
        XCTAssertTrue(lines.first?.contains("sim snoop: open(\(state.path)) = ok") ?? false, "\(lines)")
        XCTAssertTrue(lines.last?.contains("sim snoop: open(\(missing)) = ENOENT") ?? false, "\(lines)")
        XCTAssertEqual(try daemon.simStats()["misbehaviours"]?.intValue, 2, "once each: at init, and at the first load only")
        XCTAssertTrue(daemon.isRunning)
    }

    /// A fault without its call is a bad server parameter: the entry's loads fail and say why,
    /// and nothing crashes.
    func testAFaultWithoutItsCallIsRefusedByName() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: slot("bad_main", "latency_ms=5 misbehave=segv")
            + slot("init_main", "latency_ms=5 misbehave=segv at=init"), sim: inProcess))
        try daemon.waitFor("both entries refused") {
            daemon.log.contains("this misbehave needs at: init, load, show, notify or destroy")
                && daemon.log.contains("at=init needs the plugin config: init has no server parameter")
        }
        XCTAssertEqual(try daemon.slotStatus("bad_main")["ready"]?.intValue, 0)
        XCTAssertEqual(try daemon.simStats()["misbehaviours"]?.intValue, 0)
        XCTAssertTrue(daemon.isRunning)
    }
}
