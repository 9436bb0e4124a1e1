import AdorchBench
import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// A config that `adorchd --check-config` passes runs; what it refuses it names (the key, or
/// the file and the system's reason in words); and the running daemon outlives a reader of
/// its output that goes away.
final class ConfigRefusalTests: XCTestCase {
    private var dir: URL!
    private let adorchd = productsDirectory.appendingPathComponent("adorchd").path

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-refusal-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(at: dir)
    }

    private func file(_ name: String, _ text: String) throws -> String {
        let path = dir.appendingPathComponent(name).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func checkConfig(_ path: String) throws -> (status: Int32, stdout: String, stderr: String) {
        try runCommand(adorchd, ["--config", path, "--check-config", "--plugin-dir", productsDirectory.path])
    }

    private let slot = """
    [[slots]]
    id = "s"
    format = "interstitial"
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=0 latency_ms=0"
    """

    /// Defect 3: these passed the check, then the first no-fill killed the daemon (SIGILL).
    func testHugeNumbersAreRefusedByCheckConfigNamingTheKey() throws {
        let cases = [("[scheduler]\nbackoff_base_ms = 9223372036854775807\n", "scheduler.backoff_base_ms"),
                     ("[scheduler]\nbackoff_max_s = 9223372036854775807\n", "scheduler.backoff_max_s"),
                     ("[scheduler]\nbackoff_max_s = 10000000000\n", "scheduler.backoff_max_s"),
                     ("[scheduler]\nrefresh_ahead_s = 9223372036854775807\n", "scheduler.refresh_ahead_s"),
                     ("[scheduler]\nbackoff_jitter = nan\n", "scheduler.backoff_jitter"),
                     ("[limits]\nshows_per_second_per_uid = inf\n", "limits.shows_per_second_per_uid"),
                     ("", "slots[0].waterfall[0].timeout_ms")]
        for (section, key) in cases {
            let text = section + slot + (key.hasPrefix("slots") ? "\n  timeout_ms = 9223372036854775807\n" : "")
            let result = try checkConfig(try file("huge.toml", text))
            XCTAssertEqual(result.status, 78, "\(key): \(result.stdout)")
            XCTAssertTrue(result.stderr.contains("huge.toml: key \(key): expected "), "\(key): \(result.stderr)")
        }
    }

    /// The top of the ranges passes the check and runs: the entry backs off without a trap.
    func testTheLongestBackoffsTheCheckPassesRun() throws {
        let config = simConfig(slots: slot, scheduler: "backoff_base_ms = 3600000\nbackoff_max_s = 86400\nbackoff_jitter = 1.0")
        XCTAssertEqual(try checkConfig(try file("top.toml", config)).status, 0)
        let daemon = try DaemonProcess(config: config)
        try daemon.waitFor("a no-fill and its backoff") {
            try daemon.slotStatus("s")["waterfall"]?.arrayValue?.first?["backoff_ms"]?.intValue ?? 0 > 0
        }
        XCTAssertTrue(daemon.isRunning, daemon.log)
        XCTAssertEqual(daemon.stop(), 0)
    }

    func testUnreadableConfigFilesAreSaidInWordsWithThePath() throws {
        let folder = dir.appendingPathComponent("folder.toml").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let loop = dir.appendingPathComponent("loop.toml").path
        try FileManager.default.createSymbolicLink(atPath: loop, withDestinationPath: loop)
        let missing = dir.appendingPathComponent("missing.toml").path
        let locked = try file("locked.toml", slot)
        chmod(locked, 0)
        for (path, words, uid) in [(folder, "is a directory", 0), (loop, "too many levels of symbolic links", 0),
                                   (missing, "no such file or directory", 0), (locked, "permission denied", 65534)] {
            // Root reads any file: the permission case runs as nobody.
            let result = try uid == 0 ? checkConfig(path) : {
                let argv = try asUser(uid, [try RunFolder.copy(of: URL(fileURLWithPath: adorchd)).path, "--config", path, "--check-config"],
                                      unreadable: [path])
                return try runCommand(argv[0], Array(argv.dropFirst()))
            }()
            XCTAssertEqual(result.status, 78, path)
            XCTAssertTrue(result.stderr.contains("\(path): file: cannot be read: \(words)"), result.stderr)
        }
        // A drop-in the same way.
        let main = try file("main.toml", "[plugins.sim]\n" + slot)
        try FileManager.default.createDirectory(atPath: main + ".d/10-folder.toml", withIntermediateDirectories: true)
        let result = try checkConfig(main)
        XCTAssertEqual(result.status, 78)
        XCTAssertTrue(result.stderr.contains("\(main).d/10-folder.toml: file: cannot be read: is a directory"), result.stderr)
    }

    /// A state directory that cannot be made is said in words with the step that failed.
    func testAStateDirectoryUnderAFileIsSaidInWords() throws {
        let blocker = try file("blocker", "")
        let config = try file("s.toml", simConfig(slots: slot))
        let result = try runCommand(adorchd, ["--config", config, "--plugin-dir", productsDirectory.path, "--log-target", "console",
                                              "--socket", dir.appendingPathComponent("s.sock").path, "--state-dir", blocker + "/state"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("state directory \(blocker)/state cannot be created: \(blocker)/state: Not a directory"), result.stderr)
    }

    func testAWaterfallPluginTheDaemonWouldNotFindIsRefusedByTheCheck() throws {
        let ghost = slot.replacingOccurrences(of: "plugin = \"sim\"", with: "plugin = \"ghost\"")
        let discovered = try checkConfig(try file("a.toml", ghost))
        XCTAssertEqual(discovered.status, 78)
        XCTAssertTrue(discovered.stderr.contains("a.toml: key slots[0].waterfall[0].plugin: no plugin \"ghost\" is found in \(productsDirectory.path)"),
                      discovered.stderr)
        let configured = try checkConfig(try file("b.toml", "[plugins.ghost]\n" + ghost))
        XCTAssertEqual(configured.status, 78)
        XCTAssertTrue(configured.stderr.contains("b.toml: key slots[0].waterfall[0].plugin: plugin \"ghost\": libadorch-plugin-ghost.so not found in"),
                      configured.stderr)
        XCTAssertEqual(try checkConfig(try file("c.toml", slot)).status, 0, "sim is in the plugin dir")
    }

    /// The outside tester's defect: `[plugins.simb]` with sim's file passed the check, then
    /// simb's init took over sim's callbacks (one dlopen handle, one set of globals) and every
    /// sim load timed out. One file under two plugin names is now refused, by path, through a
    /// symlink, through a hard link, and among the files of a plugin dir; a copy is its own file.
    func testOneFileUnderTwoPluginNamesIsRefusedByTheCheckNamingBothTablesAndTheFile() throws {
        let sim = productsDirectory.appendingPathComponent("libadorch-plugin-sim.so").path
        let plugins = dir.appendingPathComponent("plugins").path
        try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
        let own = plugins + "/libadorch-plugin-sim.so", symlink = plugins + "/alias.so", hardLink = plugins + "/hard.so"
        let copy = dir.appendingPathComponent("copy.so").path
        try FileManager.default.copyItem(atPath: sim, toPath: own)
        try FileManager.default.createSymbolicLink(atPath: symlink, withDestinationPath: "libadorch-plugin-sim.so")
        XCTAssertEqual(link(own, hardLink), 0, String(cString: strerror(errno)))
        try FileManager.default.copyItem(atPath: sim, toPath: copy)
        // As `stat -L -c 'device %d, inode %i'` says it: what an operator compares by hand.
        func fileID(_ path: String) -> String {
            var info = stat()
            XCTAssertEqual(stat(path, &info), 0, path)
            return "device \(info.st_dev), inode \(info.st_ino)"
        }
        let why = "a process loads a shared object once, so both names would share its globals and the later init would take over"
            + " the earlier one's callbacks; name it once, or give each name its own copy of the file"
        let cases: [(first: String, second: String, kind: String)] = [(sim, sim, "path"), (own, symlink, "symlink"), (own, hardLink, "hard")]
        for (first, second, kind) in cases {
            let config = try file("\(kind).toml", "[plugins.sim]\npath = \"\(first)\"\n[plugins.simb]\npath = \"\(second)\"\n" + slot)
            let result = try checkConfig(config)
            XCTAssertEqual(result.status, 78, "\(kind): \(result.stdout)")
            XCTAssertTrue(result.stderr.contains("\(config): key plugins.simb: [plugins.sim] (\(first)) and [plugins.simb] (\(second)) are one file"
                + " (\(fileID(first))): \(why)"), "\(kind): \(result.stderr)")
        }
        // The file name is the plugin name when the config names none: alias and sim here.
        let discovered = try runCommand(adorchd, ["--config", try file("d.toml", slot), "--check-config", "--plugin-dir", plugins])
        XCTAssertEqual(discovered.status, 78, discovered.stdout)
        XCTAssertTrue(discovered.stderr.contains("d.toml: plugin dir \(plugins): plugin \"alias\" (\(symlink), found in the plugin dir) and"
            + " plugin \"hard\" (\(hardLink), found in the plugin dir) are one file (\(fileID(own))): \(why)"), discovered.stderr)
        let copied = try checkConfig(try file("copy.toml", "[plugins.sim]\npath = \"\(own)\"\n[plugins.simb]\npath = \"\(copy)\"\n" + slot))
        XCTAssertEqual(copied.status, 0, "a copy is a file of its own: \(copied.stderr)")
    }

    func testAnUnreadableRewardKeyIsRefusedByTheCheckAndAtStartInWords() throws {
        let key = dir.appendingPathComponent("reward.key").path
        let config = try file("k.toml", "[rewards]\nkey_file = \"\(key)\"\n[plugins.sim]\n" + slot)
        let checked = try checkConfig(config)
        XCTAssertEqual(checked.status, 78)
        XCTAssertTrue(checked.stderr.contains("\(key): key rewards.key_file: cannot be read: no such file or directory"), checked.stderr)
        let started = try runCommand(adorchd, ["--config", config, "--plugin-dir", productsDirectory.path, "--log-target", "console",
                                               "--socket", dir.appendingPathComponent("s.sock").path,
                                               "--state-dir", dir.appendingPathComponent("state").path])
        XCTAssertEqual(started.status, 78)
        XCTAssertTrue(started.stderr.contains("cannot start: \(key): key rewards.key_file: cannot be read: no such file or directory"), started.stderr)
        XCTAssertFalse(started.stderr.contains("NSCocoaErrorDomain"), started.stderr)
    }

    /// A waterfall naming only a plugin that did not load: the slot says it cannot fill, in
    /// status, ListSlots, the log and Show, instead of "being refilled" forever.
    func testASlotNoLoadedPluginCanFillSaysSo() throws {
        let daemon = try DaemonProcess(config: """
        [plugins.sim]
        [plugins.ghost]
        \(slot)
        [[slots]]
        id = "g"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "ghost"
        """)
        let reason = "no plugin its waterfall names is loaded (ghost)"
        XCTAssertEqual(try daemon.slotStatus("g")["unservable"]?.stringValue, reason)
        XCTAssertNil(try daemon.slotStatus("s")["unservable"], "sim is loaded: s is only empty")
        XCTAssertEqual(try daemon.slots().first { $0["id"]?.stringValue == "g" }?["unservable"]?.stringValue, reason)
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "g"])
        XCTAssertEqual(error, "io.adorch.Ads.NoAdReady")
        XCTAssertEqual(parameters["message"]?.stringValue, "g cannot be filled: \(reason)")
        XCTAssertEqual(daemon.log.components(separatedBy: "slot g cannot be filled: \(reason)").count - 1, 1, daemon.log)
    }

    /// Defect 9: `adorchd 2>&1 | head -c 300` killed the daemon with SIGPIPE during start-up.
    func testAReaderOfItsOutputThatGoesAwayDoesNotStopTheDaemon() throws {
        let listener = try NotifyListener(in: dir)
        let socket = dir.appendingPathComponent("adorchd.sock").path
        let arguments = [adorchd, "--config", try file("p.toml", simConfig(slots: slot)), "--plugin-dir", productsDirectory.path,
                         "--socket", socket, "--state-dir", dir.appendingPathComponent("state").path,
                         "--log-level", "debug", "--log-target", "console"]
        var output: [Int32] = [0, 0]
        guard pipe(&output) == 0 else { throw TestFailure("pipe: \(String(cString: strerror(errno)))") }
        for end in output { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var environment = ProcessInfo.processInfo.environment
        for key in ["WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM"] { environment[key] = nil }
        environment["NOTIFY_SOCKET"] = listener.path
        // stdout and stderr both into the pipe, as `2>&1 |` does.
        let spawned = Result { try spawnTiedToTheTests(arguments, environment: environment, stdio: [nil, output[1], output[1]]) }
        close(output[1])
        let pid = try spawned.get()
        var status: Int32 = 0
        var reaped = false
        // Stopped by its pid, and only while it is ours: not yet reaped.
        defer {
            if !reaped {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
            }
        }

        // `head -c 300`: the first 300 bytes, then the reader is gone.
        var head = [UInt8](repeating: 0, count: 300)
        var taken = 0
        while taken < head.count {
            let n = head.withUnsafeMutableBytes { read(output[0], $0.baseAddress! + taken, 300 - taken) }
            guard n > 0 else { break }
            taken += n
        }
        close(output[0])
        XCTAssertEqual(taken, 300, String(decoding: head[..<taken], as: UTF8.self))

        // Everything it writes from now on fails with EPIPE; it serves on regardless.
        _ = try listener.read(until: "READY=1") { $0.contains("READY=1") }
        let client = try VarlinkClient(path: socket, timeout: .seconds(10).scaled)
        XCTAssertNil(try client.call("io.adorch.Manager.Reload").error, "a reload logs several lines")
        XCTAssertNil(try client.call("io.adorch.Manager.GetStatus").error)
        let early = waitpid(pid, &status, WNOHANG)
        reaped = early == pid
        XCTAssertEqual(early, 0, "adorchd is still running (status \(status))")
        guard !reaped else { return }

        kill(pid, SIGTERM)
        reaped = waitpid(pid, &status, 0) == pid
        XCTAssertTrue(reaped)
        XCTAssertEqual(status, 0, "SIGTERM: exit 0, not a signal (13 is SIGPIPE)")
    }
}
