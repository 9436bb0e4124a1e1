import AdorchBench
import AdorchVarlink
import Foundation
import XCTest


/// Acceptance 2 of issue 3: READY, STATUS, RELOADING with MONOTONIC_USEC, READY again,
/// STOPPING, and WATCHDOG pings at half the interval that stop while the engine is frozen.
final class SystemdNotifyTests: XCTestCase {
    func testTheNotifyProtocolAroundStartReloadWatchdogAndStop() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-notify-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let listener = try NotifyListener(in: dir)
        // A slow network, so that a slot's dip after a show lasts longer than STATUS's 1 s sampling.
        let daemon = try DaemonProcess(
            config: simConfig(slots: """
            [[slots]]
            id = "slow"
            format = "interstitial"
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "fill=1 latency_ms=1500..1800"
              timeout_ms = 5000
            """),
            extraArguments: ["--debug-interface"],
            environment: ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "400000"]
        )

        let start = try listener.read(until: "READY=1") { $0.contains("READY=1") }
        let ready = start.last!.text
        XCTAssertTrue(ready.contains("STATUS=1 slots, 0/1 ads ready, 1 plugins"), ready)

        // Pings at half of WATCHDOG_USEC: 200 ms apart.
        let pings = try (0..<6).map { _ in try listener.read(until: "WATCHDOG=1") { $0 == "WATCHDOG=1" }.last!.at }
        let gaps = zip(pings.dropFirst(), pings).map { ($0 - $1).inSeconds }.sorted()
        XCTAssertEqual(gaps[gaps.count / 2], 0.2, accuracy: 0.08, "median ping interval \(gaps)")

        // STATUS follows the slot: filled, shown (empty), refilled; and is sent only on change.
        let full = "STATUS=1 slots, 1/1 ads ready, 1 plugins"
        if !listener.history.contains(full) { _ = try listener.read(until: full) { $0 == full } }
        _ = try daemon.call("io.adorch.Ads.Show", ["slot": "slow"])
        _ = try listener.read(until: "STATUS after the show") { $0 == "STATUS=1 slots, 0/1 ads ready, 1 plugins" }
        _ = try listener.read(until: "STATUS after the refill") { $0 == full }
        XCTAssertEqual(listener.history.filter { $0.hasPrefix("STATUS=") }.count, 3, "no STATUS without a change: \(listener.history.filter { $0.hasPrefix("STATUS") })")

        // A frozen engine queue stops the pings; they resume after.
        _ = try listener.read(until: "a ping before the freeze") { $0 == "WATCHDOG=1" }
        _ = try daemon.call("io.adorch.Debug.FreezeEngine", ["seconds": 1.5])
        let frozenAt = ContinuousClock.now
        let resumed = try listener.read(until: "a ping after the freeze") { $0 == "WATCHDOG=1" }.last!.at
        XCTAssertGreaterThan((resumed - frozenAt).inSeconds, 1.2, "no ping while the engine queue was stuck")
        _ = try listener.read(until: "pings again") { $0 == "WATCHDOG=1" }

        // SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1.
        kill(daemon.pid, SIGHUP)
        let reloading = try listener.read(until: "RELOADING=1") { $0.contains("RELOADING=1") }.last!.text
        XCTAssertNotNil(reloading.range(of: #"MONOTONIC_USEC=\d+"#, options: .regularExpression), reloading)
        _ = try listener.read(until: "READY=1 after the reload") { $0.contains("READY=1") }

        kill(daemon.pid, SIGTERM)
        _ = try listener.read(until: "STOPPING=1") { $0.contains("STOPPING=1") }
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// sd_notify blocks once ten messages are unread; a service manager that stops reading
    /// must not stall the daemon: its calls are answered and it still stops cleanly.
    func testAServiceManagerThatStopsReadingStallsNothing() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-notify-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let deaf = try NotifyListener(in: dir)  // bound, never read
        let daemon = try DaemonProcess(config: simConfig(slots: """
            [[slots]]
            id = "s"
            format = "interstitial"
              [[slots.waterfall]]
              plugin = "sim"
            """), environment: ["NOTIFY_SOCKET": deaf.path])
        for round in 0..<12 {  // RELOADING=1 and READY=1 each: 24 messages, well past 10
            let reply = try daemon.client(timeout: .seconds(5)).call("io.adorch.Manager.Reload")
            XCTAssertNil(reply.error, "reload \(round): \(reply)")
        }
        try daemon.waitFor("s full") { try daemon.allSlotsFull() }
        XCTAssertNotNil(try daemon.call("io.adorch.Ads.Show", ["slot": "s"])["ad"])
        XCTAssertEqual(daemon.stop(), 0)
        XCTAssertTrue(daemon.log.contains("the service manager did not read STOPPING=1 within 2 s"), daemon.log)
        withExtendedLifetime(deaf) {}
    }

    /// Graceful stop: a subscription ends with a final reply, every ad is destroyed through
    /// its plugin (the sim plugin's log says its deinit ran), and the exit status is 0.
    func testSIGTERMEndsSubscriptionsWithAFinalReplyAndExitsZero() throws {
        let daemon = try DaemonProcess()
        try daemon.waitFor("demo slots full") { try daemon.allSlotsFull() }
        let subscriber = try daemon.client(timeout: .seconds(10))
        XCTAssertNil(try subscriber.call("io.adorch.Ads.Subscribe", [:], more: true).error)
        kill(daemon.pid, SIGTERM)
        var last = try subscriber.nextReply()
        while last.continues { last = try subscriber.nextReply() }
        XCTAssertEqual(last.error, "io.adorch.Ads.ShuttingDown", "the stream's last reply says why it ends")
        XCTAssertEqual(daemon.stop(), 0)
        XCTAssertTrue(daemon.log.contains("adorchd stopping"))
        XCTAssertTrue(daemon.log.contains("adorchd stopped"))
    }

    /// Acceptance 3: systemd-socket-activate passes the socket; the first client is served on it.
    func testSocketActivationServesTheFirstClientOnThePassedSocket() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-sa-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("activated.sock").path
        let process = Process()
        // It hands adorchd a cleared environment: a sanitizer run's options are passed on by name.
        let passed = ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"].filter { ProcessInfo.processInfo.environment[$0] != nil }.flatMap { ["-E", $0] }
        // Tied to the tests, and adorchd to it: the parent-death signal stays across exec.
        process.tieToTheTests("/usr/bin/systemd-socket-activate", ["-l", socket] + passed + diesWithTheTests + [productsDirectory.appendingPathComponent("adorchd").path,
                              "--plugin-dir", productsDirectory.path, "--state-dir", dir.appendingPathComponent("state").path, "--log-target", "console"])
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        var said = ""
        while !said.contains("Listening on") {
            let chunk = stderr.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw TestFailure("systemd-socket-activate ended: \(said)") }
            said += String(decoding: chunk, as: UTF8.self)
        }
        // Read the rest too, so that adorchd's log (a sanitizer's report at exit) never fills the pipe.
        let rest = DispatchGroup()
        DispatchQueue.global().async(group: rest) { _ = stderr.fileHandleForReading.readDataToEndOfFile() }
        // The first connection starts adorchd on the passed fd.
        let client = try VarlinkClient(path: socket)
        let reply = try client.call("io.adorch.Manager.GetStatus")
        XCTAssertNil(reply.error)
        XCTAssertEqual(reply.parameters["socket"]?.stringValue, socket, "it serves on the passed socket, not its own")
        XCTAssertEqual(reply.parameters["pid"]?.intValue, Int64(process.processIdentifier))
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        rest.wait()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: socket), "a passed socket is never removed by the daemon")
    }
}
