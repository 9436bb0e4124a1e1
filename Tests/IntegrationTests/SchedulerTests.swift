import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

private extension Duration {
    var microseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }
}

/// Issue 18, acceptance 3: demand-aware buffers through the real daemon and sim.
final class SchedulerTests: XCTestCase {
    /// Two slots on the same simulated network (every load fills, in 300 to 600 ms): one
    /// with a fixed buffer of 2, one demand-aware from 2 to 12.
    private let config = simConfig(slots: [("fixed", "buffer = 2"), ("aware", "buffer_min = 2\nbuffer_max = 12")].map { id, keys in
        """
        [[slots]]
        id = "\(id)"
        format = "interstitial"
        \(keys)
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "burst-\(id)"
          server_parameter = "fill=1 latency_ms=300..600 ttl_s=3600 seed=7"
          timeout_ms = 3000

        """
    }.joined())

    /// Shows on both slots, alternating, every `every`, for `rounds` rounds; each slot's
    /// count of Shows that found an ad.
    private func burst(_ daemon: DaemonProcess, rounds: Int, every: Duration) throws -> [String: Int] {
        let client = try daemon.client()
        var found = ["fixed": 0, "aware": 0]
        let clock = ContinuousClock()
        var next = clock.now
        for _ in 0..<rounds {
            for slot in ["fixed", "aware"] {
                let reply = try client.call("io.adorch.Ads.Show", ["slot": .string(slot)])
                if reply.error == nil {
                    found[slot]! += 1
                    if let id = reply.parameters["ad"]?["id"]?.stringValue {
                        _ = try client.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "close"])
                    }
                } else {
                    XCTAssertEqual(reply.error, "io.adorch.Ads.NoAdReady")
                }
            }
            // The load generator's pace: traffic, not a wait for an outcome.
            next += every
            let wait = next - clock.now
            if wait > .zero { usleep(UInt32(wait.microseconds)) }
        }
        return found
    }

    func testABurstRaisesTheTargetRefillsFasterThanAFixedBufferAndARestartKeepsTheEstimates() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-sched-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        var daemon: DaemonProcess? = try DaemonProcess(config: config, stateDir: state)
        try daemon!.waitFor("both slots full") { try daemon!.allSlotsFull() }
        XCTAssertEqual(try daemon!.slotStatus("aware")["buffer"]?.intValue, 2, "before any Show: the floor")

        // 8 Shows a second on each slot for 6 s: 4 refills in flight on average.
        let found = try burst(daemon!, rounds: 48, every: .milliseconds(125))
        let slots = try adorchctl(as: 0, daemon!, ["slots"])
        XCTAssertEqual(slots.status, 0, slots.stderr)
        let awareLine = slots.stdout.split(separator: "\n").first { $0.hasPrefix("aware") }.map(String.init) ?? ""
        let aware = try daemon!.slotStatus("aware")
        let raised = aware["buffer"]?.intValue ?? 0
        XCTAssertGreaterThan(raised, 2, "the burst raised the target: \(aware["demand"] ?? .null)")
        XCTAssertTrue(awareLine.contains(" \(raised) ") && awareLine.contains("2-12"), "adorchctl slots shows it:\n\(slots.stdout)")
        XCTAssertTrue(slots.stdout.split(separator: "\n").contains { $0.hasPrefix("fixed") && $0.contains("fixed") })
        XCTAssertGreaterThan(found["aware"]!, found["fixed"]! + 5, "the demand-aware slot served more of the burst: \(found)")

        // A restart keeps what was learned: GetStatus shows it before any new Show.
        let learned = aware["demand"]?["long_per_minute"]?.doubleValue ?? 0
        XCTAssertGreaterThan(learned, 5)
        XCTAssertEqual(daemon!.stop(), 0)
        daemon = nil
        XCTAssertTrue(FileManager.default.fileExists(atPath: state.appendingPathComponent("scheduler-estimates.json").path))
        let again = try DaemonProcess(config: config, stateDir: state)
        let restored = try again.slotStatus("aware")
        XCTAssertEqual(restored["counters"]?["shows"]?.intValue, 0, "a new process: no Show yet")
        XCTAssertEqual(restored["demand"]?["long_per_minute"]?.doubleValue ?? 0, learned, accuracy: learned * 0.2,
                       "the demand is the one learned before the restart")
        XCTAssertGreaterThan(restored["waterfall"]?.arrayValue?.first?["estimate"]?["samples"]?.intValue ?? 0, 10, "and so are the entry's estimates")
        XCTAssertGreaterThan(restored["buffer"]?.intValue ?? 0, 2, "the target starts where demand left it")
        XCTAssertTrue(again.log.contains("scheduler estimates restored from"), again.log)
    }

    /// Acceptance 4: a corrupt estimates file is logged and ignored; an unwritable state
    /// directory is a named config error (exit 78), never a crash.
    func testACorruptEstimatesFileIsIgnoredAndAnUnwritableStateDirectoryIsNamed() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-sched-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try Data("{\"version\": 1, \"savedAt\": \"yesterday\"".utf8).write(to: state.appendingPathComponent("scheduler-estimates.json"))
        let daemon = try DaemonProcess(config: config, stateDir: state)
        try daemon.waitFor("both slots full") { try daemon.allSlotsFull() }
        XCTAssertTrue(daemon.log.contains("ignoring scheduler estimates"), daemon.log)
        XCTAssertEqual(daemon.stop(), 0)

        // Owned by root, mode 555: uid 4321 cannot write there.
        let locked = state.appendingPathComponent("locked")
        try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o555])
        // Bounded: it is to refuse at once, and a daemon that served instead would never end.
        let argv = try asUser(4321, ["/usr/bin/timeout", "\(Int(30 * timeScale))s",
            try RunFolder.copy(of: productsDirectory.appendingPathComponent("adorchd")).path, "--state-dir", locked.path, "--log-target", "console",
            "--socket", state.appendingPathComponent("s.sock").path, "--plugin-dir", try RunFolder.copy(of: productsDirectory.appendingPathComponent("libadorch-plugin-sim.so")).deletingLastPathComponent().path,
            "--insecure-plugins",
        ])
        let result = try runCommand(argv[0], Array(argv.dropFirst()))
        XCTAssertEqual(result.status, 78, result.stderr)
        XCTAssertTrue(result.stderr.contains("state directory \(locked.path) is not writable by uid 4321"), result.stderr)
    }
}
