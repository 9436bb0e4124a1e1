import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// libadorch-client (clients/c) against the real daemon: the modes of its test program
/// (clients/c/tests/client_test.c), a daemon restart under its open subscription, and the
/// example built through pkg-config from an install.
final class CClientTests: XCTestCase {
    private static let clientDir = packageRoot.appendingPathComponent("clients/c")
    private static let buildDir = clientDir.appendingPathComponent("build")
    private static let testProgram = buildDir.appendingPathComponent("client-test").path

    /// A preloaded rewarded slot that fills at once, one that never does, and one open ad per uid.
    private static let config = simConfig(slots: """
        [limits]
        max_open_ads_per_uid = 1

        [[slots]]
        id = "r"
        format = "rewarded"
        buffer = 2
        reward_name = "coins"
        reward_amount = 1
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "fill=1 latency_ms=0..2"

        [[slots]]
        id = "empty"
        format = "rewarded"
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "fill=0 latency_ms=10"
        """)

    /// An interstitial slot paced at one ad a minute per user: a config of its own, so that the
    /// slot count the restart mode checks on `config` stays as it is.
    private static let pacedConfig = simConfig(slots: """
        [[slots]]
        id = "paced"
        format = "interstitial"
        buffer = 2
        pacing = "1m"
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "fill=1 latency_ms=0..2"
        """)

    override func setUpWithError() throws {
        // The library and its test program: seconds, and nothing when they are up to date.
        let build = try runCommand("/usr/bin/make", ["-s", "-C", Self.clientDir.path])
        guard build.status == 0 else { throw TestFailure("make -C clients/c failed:\n\(build.stdout)\(build.stderr)") }
    }

    /// Runs the test program with `arguments` against `daemon` (as `uid`, an app's user, when
    /// given); its output, or a failure showing it.
    private func run(_ arguments: [String], _ daemon: DaemonProcess, as uid: Int? = nil) throws -> String {
        // Another uid runs a copy of the build folder (the program finds the library beside it).
        let argv = try uid.map { try asUser($0, [try RunFolder.copy(of: Self.buildDir).appendingPathComponent("client-test").path] + arguments) }
            ?? [Self.testProgram] + arguments
        let result = try runCommand(argv[0], Array(argv.dropFirst()), environment: ["ADORCH_SOCKET": daemon.socket])
        guard result.status == 0 else {
            throw daemon.diagnosis("client-test \(arguments.joined(separator: " ")) exited \(result.status):\n\(result.stdout)\(result.stderr)")
        }
        return result.stdout
    }

    func testTheSDKLayerShowsARewardedAdLoadsTheOtherFormatsAndRunsASession() throws {
        let daemon = try DaemonProcess()
        let output = try run(["basics"], daemon)
        XCTAssertTrue(output.contains("reward 10 coins"), output)
        // Clicks may repeat (the sim network can report its own); the rest are told once.
        XCTAssertTrue(output.contains("listener: 1 impression, ") && output.contains(" click, 1 close, 1 reward"), output)
        XCTAssertTrue(output.contains("3 native ads"), output)
        XCTAssertTrue(output.contains("basics: all passed"), output)
    }

    func testSetPrivacyAndGetPrivacyThroughTheCLibrary() throws {
        let daemon = try DaemonProcess()
        let output = try run(["privacy"], daemon)
        XCTAssertTrue(output.contains("privacy: all passed"), output)
    }

    func testTheNonBlockingModeDeliversEventsAndRepliesThroughThePolledFd() throws {
        let daemon = try DaemonProcess()
        let output = try run(["nonblocking"], daemon)
        XCTAssertTrue(output.contains("nonblocking: all passed"), output)
    }

    func testEveryIDLErrorMapsToItsOwnCodeAndTheDaemonsErrorsArriveTyped() throws {
        let daemon = try DaemonProcess(config: Self.config)
        // Two ready: the second Show must meet the open-ads budget, not an empty slot.
        try daemon.waitFor("r full") { try daemon.slotStatus("r")["ready"]?.intValue == 2 }
        // As an app's uid: root is exempt from the budgets whose errors this meets.
        let output = try run(["errors", "empty"], daemon, as: 5555)
        XCTAssertTrue(output.contains("errors: all passed"), output)
        // The IDLs as this test reads them: the program must have mapped each of their errors.
        for interface in ["io.adorch.Ads", "io.adorch.Manager"] {
            let idl = try XCTUnwrap(daemon.call("org.varlink.service.GetInterfaceDescription", ["interface": .string(interface)])["description"]?.stringValue)
            let names = idl.split(separator: "\n").filter { $0.hasPrefix("error ") }.map { $0.dropFirst(6).prefix { $0.isLetter || $0.isNumber } }
            XCTAssertFalse(names.isEmpty, interface)
            for name in names { XCTAssertTrue(output.contains("ok: \(interface).\(name) -> "), "\(interface).\(name) not mapped:\n\(output)") }
        }
    }

    func testAShowWithinThePacingIsCappedAndListSlotsForTheUserAndGetCapsTellTheHold() throws {
        let daemon = try DaemonProcess(config: Self.pacedConfig)
        let output = try run(["caps", "paced"], daemon)
        XCTAssertTrue(output.contains("ok: adorch_rewarded_ad_show(interstitial, \"c-paced\", NULL, &again, error) -> io.adorch.Ads.Capped"), output)
        XCTAssertTrue(output.contains("capped for c-paced: pacing 1m per user (pacing)"), output)
        XCTAssertTrue(output.contains("caps: all passed"), output)
    }

    func testASubscriptionResumesAfterTheDaemonRestartsOnTheSameSocket() throws {
        let first = try DaemonProcess(config: Self.config)
        let client = try LineReader(Self.testProgram, ["restart"], environment: ["ADORCH_SOCKET": first.socket])
        defer { client.stop() }
        try client.waitForLine("READY") { $0 == "READY" }
        first.stop()
        try client.waitForLine("a logged retry") { $0.contains("reconnecting to \(first.socket), retry") }
        let second = try DaemonProcess(config: Self.config, extraArguments: ["--socket", first.socket],
                                       stateDir: first.dir.appendingPathComponent("state"))
        defer { second.stop() }
        try client.waitForLine("the resubscription") { $0.contains("subscribed again") }

        // A Show through a connection of the test's own, once the new daemon has an ad ready.
        let events = try VarlinkClient(path: first.socket, timeout: .seconds(10).scaled)
        XCTAssertNil(try events.call("io.adorch.Ads.Subscribe", ["slots": ["r"]], more: true).error)
        var adID: String?
        while adID == nil {
            let reply = try VarlinkClient(path: first.socket, timeout: .seconds(10).scaled)
                .call("io.adorch.Ads.Show", ["slot": "r", "user_id": "restart-user"])
            if reply.error == "io.adorch.Ads.NoAdReady" { _ = try events.nextReply(); continue }
            XCTAssertNil(reply.error, "\(reply)")
            adID = try XCTUnwrap(reply.parameters["ad"]?["id"]?.stringValue)
        }
        let resumed = try client.waitForLine("ad_shown of \(adID ?? "")") { $0.hasPrefix("RESUMED \(adID ?? "")") }
        XCTAssertTrue(resumed.hasSuffix("subscribed-events=1"), "the second subscribed event reached the app: \(resumed)")
        try client.waitForLine("a call on the new daemon") { $0 == "calls work after the restart" }
        XCTAssertEqual(client.exitStatus(), 0, client.output)
        // The second daemon's state dir is in the first one's folder, removed when it goes.
        withExtendedLifetime(first) {}
    }

    /// No daemon breaks a connection on cue, so a peer inside the test program does: after a
    /// Show (ConnectionLost, never sent again), after a read (sent again), and by not answering.
    func testABrokenConnectionFailsAShowButRetriesARead() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-cpeer-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try runCommand(Self.testProgram, ["brokenpeer", dir.path])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("brokenpeer: all passed"), result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("calling again on a new connection"), "the retry is logged: \(result.stdout)")
    }

    /// Replies no daemon sends, from a scripted peer in the test program: a "continues" to a
    /// plain call, replies without the IDL's types, no reply to an async call, an event that is
    /// not an Event, and a daemon gone for good under a subscription with a 1.5 s budget.
    func testMalformedAndMissingRepliesAreProtocolErrorsAndTimeouts() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-cfake-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try runCommand(Self.testProgram, ["fakepeer", dir.path])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("fakepeer: all passed"), result.stdout + result.stderr)
    }

    /// A call over the daemon's max_message_bytes gets its refusal at once, and strings that are
    /// not UTF-8 are refused by name.
    func testOversizedCallsAndInvalidUTF8AreRefusedByName() throws {
        let daemon = try DaemonProcess()
        let output = try run(["arguments"], daemon)
        XCTAssertTrue(output.contains("none sent again") && output.contains("arguments: all passed"), output)
    }

    /// Two threads on one client, event processing and free inside a callback, use after fork.
    func testTheThreadAndCallbackRulesAreEnforced() throws {
        let daemon = try DaemonProcess()
        let output = try run(["threads"], daemon)
        XCTAssertTrue(output.contains("threads: all passed"), output)
    }

    func testTheExampleBuildsWithPkgConfigAgainstAnInstallAndPrintsTheReward() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-cexample-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let destdir = root.appendingPathComponent("dest").path
        let install = try runCommand("/usr/bin/make", ["-s", "-C", Self.clientDir.path, "install", "DESTDIR=\(destdir)", "PREFIX=/usr"])
        XCTAssertEqual(install.status, 0, install.stdout + install.stderr)
        let pkgConfig = ["PKG_CONFIG_SYSROOT_DIR": destdir, "PKG_CONFIG_PATH": destdir + "/usr/lib/pkgconfig"]
        let flags = try runCommand("/usr/bin/pkg-config", ["--cflags", "--libs", "adorch-client"], environment: pkgConfig)
        XCTAssertTrue(flags.stdout.contains("-I\(destdir)/usr/include") && flags.stdout.contains("-ladorch-client"), flags.stdout + flags.stderr)
        // Its folders follow ${prefix}, so the install can move: --define-prefix finds them from the .pc's place.
        let moved = try runCommand("/usr/bin/pkg-config", ["--define-prefix", "--cflags", "--libs", "adorch-client"],
                                   environment: ["PKG_CONFIG_PATH": destdir + "/usr/lib/pkgconfig"])
        XCTAssertTrue(moved.stdout.contains("-I\(destdir)/usr/include") && moved.stdout.contains("-L\(destdir)/usr/lib"), moved.stdout + moved.stderr)
        let build = try runCommand("/usr/bin/make", ["-s", "-C", packageRoot.appendingPathComponent("examples/c").path, "OUT=\(root.path)"],
                                   environment: pkgConfig)
        XCTAssertEqual(build.status, 0, build.stdout + build.stderr)

        let daemon = try DaemonProcess()
        let run = try runCommand(root.appendingPathComponent("rewarded").path, [],
                                 environment: ["ADORCH_SOCKET": daemon.socket, "LD_LIBRARY_PATH": destdir + "/usr/lib"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertTrue(run.stdout.contains("reward: 10 coins for example-user"), run.stdout + run.stderr)
    }
}

/// A child process whose output (stdout and stderr) is read line by line as it comes: each
/// wait is on poll(2) for the next bytes, never a sleep. Stopped by its pid.
private final class LineReader {
    private let process = Process()
    private let pipe = Pipe()
    private var pending = Data()
    private var lines: [String] = []
    /// Lines before this one were looked at by an earlier wait.
    private var next = 0

    init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        process.tieToTheTests(executable, arguments)
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
    }

    var output: String { lines.joined(separator: "\n") + String(decoding: pending, as: UTF8.self) }

    /// The first line from here on that `matches`; fails at EOF or after `timeout`.
    @discardableResult
    func waitForLine(_ what: String, timeout: Duration = .seconds(40), _ matches: (String) -> Bool) throws -> String {
        let deadline = ContinuousClock.now + timeout.scaled
        while true {
            while next < lines.count {
                next += 1
                if matches(lines[next - 1]) { return lines[next - 1] }
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw TestFailure("timed out waiting for \(what); output:\n\(output)") }
            var descriptor = pollfd(fd: pipe.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, Int32(left.inSeconds * 1000) + 1) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(descriptor.fd, &buffer, buffer.count)
            guard count > 0 else { throw TestFailure("the program ended before \(what); output:\n\(output)") }
            pending.append(contentsOf: buffer[..<count])
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending = Data(pending[(newline + 1)...])
            }
        }
    }

    /// Waits for its exit; its status.
    func exitStatus() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
    }
}
