import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// The Python client library (clients/python) against the real daemon: its unittest suite,
/// the example, and a daemon restart under the sync and asyncio clients' open subscriptions.
final class PythonClientTests: XCTestCase {
    static let package = packageRoot.appendingPathComponent("clients/python")
    /// The config the Python tests are written against (its slots are named in tests/common.py).
    static func config() throws -> String {
        try String(contentsOf: package.appendingPathComponent("tests/adorchd-test.toml"), encoding: .utf8)
    }

    static func environment(_ daemon: DaemonProcess) -> [String: String] {
        ["PYTHONPATH": package.path, "ADORCH_SOCKET": daemon.socket, "PYTHONDONTWRITEBYTECODE": "1"]
    }

    func testUnittestSuiteExampleAndInstallPassAgainstTheDaemon() throws {
        let daemon = try DaemonProcess(config: try Self.config())
        let run = try runCommand("/usr/bin/python3", ["-B", "-m", "unittest", "discover", "-v",
                                                      "-s", Self.package.appendingPathComponent("tests").path, "-t", Self.package.path],
                                 environment: Self.environment(daemon))
        let output = run.stdout + run.stderr
        XCTAssertEqual(run.status, 0, output)
        XCTAssertTrue(output.contains("\nOK\n"), output)
        XCTAssertFalse(output.contains("skipped"), "every test ran against the daemon:\n\(output)")
        for test in ["test_every_idl_error_maps_to_its_own_typed_error", "test_rewarded_example_prints_the_reward",
                     "test_pip_install_into_a_fresh_venv", "test_interactive_session_runs_to_its_terminal_event", "test_a_show_is_not_sent_again"] {
            XCTAssertTrue(output.contains(test), "\(test) ran:\n\(output)")
        }
    }

    func testSyncAndAsyncioSubscriptionsResumeAfterADaemonRestart() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-py-restart-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        let config = try Self.config()
        let first = try DaemonProcess(config: config, stateDir: state)
        let probes = try ["sync", "async"].map { mode in
            try ChildOutput(["/usr/bin/python3", "-B", Self.package.appendingPathComponent("tests/restart_probe.py").path, mode, "interstitial"],
                            environment: Self.environment(first))
        }
        for probe in probes { try probe.waitFor("SUBSCRIBED\n") }
        XCTAssertEqual(first.stop(), 0)
        // The same socket path and state dir: adorchd takes the last --socket it is given.
        let second = try DaemonProcess(config: config, extraArguments: ["--socket", first.socket], stateDir: state)
        defer { second.stop() }
        for probe in probes { try probe.waitFor("subscribed again on \(first.socket)") }
        let shown = try VarlinkClient(path: first.socket, timeout: .seconds(10).scaled).call("io.adorch.Ads.Show", ["slot": "interstitial"])
        let id = try XCTUnwrap(shown.parameters["ad"]?["id"]?.stringValue, "\(shown)")
        for probe in probes {
            XCTAssertEqual(try probe.waitForExit(), 0, probe.output)
            XCTAssertTrue(probe.output.contains("RESUMED \(id)\n"), "the stream went on with an event caused after the restart:\n\(probe.output)")
            XCTAssertTrue(probe.output.contains("CALLED "), "the client connected before the restart calls again:\n\(probe.output)")
            XCTAssertTrue(probe.output.contains("LOG adorch: subscription on \(first.socket) lost"), "the retry is logged:\n\(probe.output)")
            XCTAssertEqual(probe.output.components(separatedBy: "EVENT subscribed").count - 1, 1, "one subscribed event:\n\(probe.output)")
        }
    }
}

/// A child process whose output (stdout and stderr) the test reads as it comes, waiting with
/// poll(2) so that a child gone silent fails the wait rather than hanging the suite.
final class ChildOutput {
    private let process = Process()
    private let pipe = Pipe()
    private(set) var output = ""

    init(_ argv: [String], environment: [String: String]) throws {
        process.tieToTheTests(argv[0], Array(argv.dropFirst()))
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        // Our copy of the write end would keep the read end from ever seeing EOF.
        try pipe.fileHandleForWriting.close()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
    }

    /// Reads until the output contains `text`.
    func waitFor(_ text: String, timeout: Duration = .seconds(30)) throws {
        let deadline = ContinuousClock.now + timeout.scaled
        while !output.contains(text) {
            guard try read(until: deadline) else { throw TestFailure("the child ended before printing \(text.debugDescription):\n\(output)") }
        }
    }

    /// Reads to the end of the output, then returns the exit status.
    func waitForExit(timeout: Duration = .seconds(30)) throws -> Int32 {
        let deadline = ContinuousClock.now + timeout.scaled
        while try read(until: deadline) {}
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// One read; false at the end of the output.
    private func read(until deadline: ContinuousClock.Instant) throws -> Bool {
        let fd = pipe.fileHandleForReading.fileDescriptor
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let left = deadline - ContinuousClock.now
        guard left > .zero, poll(&ready, 1, Int32(left.inSeconds * 1000) + 1) > 0 else {
            throw TestFailure("nothing more from the child within the timeout:\n\(output)")
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Foundation.read(fd, &buffer, buffer.count)
        guard count > 0 else { return false }
        output += String(decoding: buffer[..<count], as: UTF8.self)
        return true
    }
}
