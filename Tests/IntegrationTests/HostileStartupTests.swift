import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// Issue 20's defects that come from how the daemon is started rather than from a client:
/// a config value that overflows (3) and a stderr whose reader went away (9).
final class HostileStartupTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-hostile-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    private var adorchd: String { productsDirectory.appendingPathComponent("adorchd").path }

    /// adorchd under coreutils' timeout: a daemon that starts after all is stopped (status 124)
    /// instead of hanging the test, and a crash shows as 128 + its signal.
    private func adorchdBounded(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try runCommand("/usr/bin/timeout", ["\(Int(5 * timeScale))s", adorchd] + arguments)
    }

    /// Defect 3: durations that overflow are refused, naming the key, by --check-config and by
    /// a start alike (exit 78, EX_CONFIG), never a crash.
    func testOverflowingBackoffValuesAreRefusedByNameNotACrash() throws {
        for (key, value) in [("backoff_base_ms", "9223372036854775807"), ("backoff_max_s", "9223372036854775807"), ("backoff_max_s", "1e10")] {
            let path = dir.appendingPathComponent("\(key).toml").path
            try "[scheduler]\n\(key) = \(value)\n".write(toFile: path, atomically: true, encoding: .utf8)
            let check = try adorchdBounded(["--config", path, "--check-config"])
            XCTAssertEqual(check.status, 78, "--check-config on \(key) = \(value): \(check.stderr)")
            let message = check.stderr.split(separator: "\n").first { $0.contains(key) }.map(String.init)
            XCTAssertNotNil(message, "the refusal names \(key): \(check.stderr)")
            let start = try adorchdBounded(["--config", path, "--socket", dir.appendingPathComponent("s.sock").path,
                                            "--state-dir", dir.appendingPathComponent("state").path, "--log-target", "console"])
            XCTAssertEqual(start.status, 78, "starting on \(key) = \(value): \(start.stderr)")
            XCTAssertTrue(start.stderr.contains(message ?? key), "the start refuses with the same message: \(start.stderr)")
        }
    }

    /// Defect 9: `adorchd 2>&1 | head -c 300`: once head has gone, the daemon's log writes
    /// fail, and it keeps running and serving (the polite client measures it meanwhile).
    func testTheDaemonOutlivesTheReaderOfItsOutput() throws {
        let config = dir.appendingPathComponent("adorchd.toml")
        try hostileConfig().write(to: config, atomically: true, encoding: .utf8)
        let socket = dir.appendingPathComponent("adorchd.sock").path
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw TestFailure("pipe: \(String(cString: strerror(errno)))") }
        // Close-on-exec: neither child may hold the other end (a daemon holding the read end never sees EPIPE).
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let daemon = try spawnTiedToTheTests([adorchd, "--config", config.path, "--socket", socket, "--state-dir", dir.appendingPathComponent("state").path,
                                              "--plugin-dir", productsDirectory.path, "--log-level", "debug", "--log-target", "console"],
                                             stdio: [nil, pipeEnds[1], pipeEnds[1]], shellSignals: true)
        defer { stopByPID(daemon) }
        let head = try spawnTiedToTheTests(["/usr/bin/head", "-c", "300"], stdio: [pipeEnds[0], nil, nil], shellSignals: true)
        defer { stopByPID(head) }
        close(pipeEnds[0])
        close(pipeEnds[1])

        // head leaves after 300 bytes of the startup log; the daemon must neither die then
        // nor when it logs the calls below to the pipe no one reads.
        let deadline = ContinuousClock.now + Duration.seconds(20).scaled
        var headStatus: Int32 = 0
        while waitpid(head, &headStatus, WNOHANG) != head {
            guard ContinuousClock.now < deadline else { throw TestFailure("head never read its 300 bytes") }
            usleep(10_000)
        }
        var client: VarlinkClient?
        while client == nil {
            if let ended = ending(daemon) { throw TestFailure("adorchd ended (\(ended)) once head had left") }
            guard ContinuousClock.now < deadline else { throw TestFailure("adorchd did not serve after head left") }
            client = try? VarlinkClient(path: socket, timeout: .seconds(5))
            if client == nil { usleep(10_000) }
        }
        let polite = try PoliteProcess(socket: socket, slot: HostileSlot.interstitial)
        for _ in 0..<20 {
            _ = try? client?.call("io.adorch.Manager.GetStatus")
            // A broken message: a warning line each, written to the dead pipe.
            let broken = try RawClient(socket)
            broken.send("not json")
            _ = broken.readToEnd()
        }
        let ended = ending(daemon)
        XCTAssertNil(ended, "adorchd survives writing to a pipe nobody reads")
        guard ended == nil else { return }
        let status = try VarlinkClient(path: socket, timeout: .seconds(5)).call("io.adorch.Manager.GetStatus")
        XCTAssertNil(status.error, "and still serves")
        try polite.stopAndCheck(during: "a closed stderr")
    }

    /// How the daemon ended ("signal 13"), reaping it; nil while it runs.
    private func ending(_ pid: pid_t) -> String? {
        var status: Int32 = 0
        switch waitpid(pid, &status, WNOHANG) {
        case 0: return nil
        case pid: return status & 0x7f == 0 ? "exit \((status >> 8) & 0xff)" : "signal \(status & 0x7f)"
        default: return "gone"
        }
    }

    /// SIGTERM and reap, unless it was reaped already (then the pid may be another's: left alone).
    private func stopByPID(_ pid: pid_t) {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == 0 else { return }
        kill(pid, SIGTERM)
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    }
}
