import AdorchPluginHost
import Foundation
import XCTest

/// A hostile isolated plugin (Fixtures/boxbreaker_plugin.c, built from plugin.h) tries every
/// road it knows past its box (docs/confinement.md, "The box") against a daemon run as a
/// service user: the daemon's and another host's limits, priority, CPUs, a kill, a signal
/// through a socket's owner, hoarded memory and the user's task budget. Each is refused or
/// stays in its box, while a polite app of another uid is served as ever.
final class PluginBoxTests: XCTestCase {
    /// The daemon's uid: a service user, as under its unit (root would be exempt from task limits).
    private static let serviceUID = 4403
    /// The daemon's user's task limit: far above what the daemon and two hosts run, far below
    /// what the plugin tries to start (2000 threads).
    private static let userTasks = 600

    func testAHostilePluginReachesNothingPastItsBox() throws {
        let built = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-boxbreaker-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: built, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: built) }
        let source = built.appendingPathComponent("libadorch-plugin-boxbreaker.so")
        let compiled = try runCommand("/usr/bin/env", [
            "cc", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread",
            "-I", packageRoot.appendingPathComponent("Sources/CAdorchPlugin/include").path,
            packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures/boxbreaker_plugin.c").path, "-o", source.path,
        ])
        XCTAssertEqual(compiled.status, 0, compiled.stderr)
        let library = try RunFolder.copy(of: source)
        let go = try RunFolder.root.appendingPathComponent("boxbreaker-go-\(UUID().uuidString.prefix(8))")
        addTeardownBlock { try? FileManager.default.removeItem(at: go) }

        let daemon = try DaemonProcess(config: """
            [access]
            ads_users = ["\(HostileUID.polite)"]

            [plugins.sim]
            isolation = "process"

            [plugins.boxbreaker]
            path = "\(library.path)"
            isolation = "process"
            config = { go = "\(go.path)" }

            [[slots]]
            id = "steady"
            format = "interstitial"
            buffer = 4
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "latency_ms=1..3"

            [[slots]]
            id = "attack"
            format = "interstitial"
              [[slots.waterfall]]
              plugin = "boxbreaker"
            """, taskLimit: Self.userTasks, user: Self.serviceUID)
        defer { daemon.stop() }
        try daemon.waitForLog("both plugins loaded, each in its box") { log in
            ["sim", "boxbreaker"].allSatisfy { log.contains("plugin \($0) loaded") } && log.components(separatedBy: "box: its own user, PID and IPC namespaces").count == 3
        }
        let simHost = try XCTUnwrap(daemon.pluginStatus("sim")["pid"]?.intValue.map { pid_t($0) })
        // GetStatus says how each host is confined, as its host said it.
        let confinement = try XCTUnwrap(daemon.pluginStatus("boxbreaker")["confinement"]?.stringValue)
        for layer in ["box: its own user, PID and IPC namespaces", "no_new_privs: applied", "landlock: applied", "seccomp: applied"] {
            XCTAssertTrue(confinement.contains(layer), "\(layer) in \(confinement)")
        }
        XCTAssertFalse(confinement.contains("refused"), confinement)
        let limitsBefore = try String(contentsOfFile: "/proc/\(daemon.pid)/limits", encoding: .utf8)
        let polite = try PoliteProcess(socket: daemon.socket, slot: "steady")

        XCTAssertTrue(FileManager.default.createFile(atPath: go.path, contents: nil))
        try daemon.waitForLog(["boxbreaker: finished"], timeout: .seconds(30))
        let tries = daemon.log.split(separator: "\n").compactMap { line -> (String, String)? in
            guard let match = line.firstMatch(of: /boxbreaker: (.+): (done|refused \(E[A-Z]+\))$/) else { return nil }
            return (String(match.1), String(match.2))
        }
        let found = try XCTUnwrap(daemon.log.firstMatch(of: /found the daemon at (\d+) and another host at (\d+)/), daemon.log)
        XCTAssertEqual(pid_t(found.1), daemon.pid, "the plugin found the daemon")
        XCTAssertEqual(pid_t(found.2), simHost, "the plugin found sim's host")
        for target in ["the daemon", "another host"] {
            for attack in ["prlimit RLIMIT_NOFILE 10 on", "prlimit RLIMIT_CPU 1 on", "prlimit RLIMIT_AS 64 MiB on", "setpriority 19 on",
                           "sched_setaffinity on", "ioprio_set idle on", "kill SIGKILL to", "F_SETOWN socket to", "F_SETOWN_EX socket to",
                           "FIOSETOWN socket to", "SIOCSPGRP socket to", "open /proc/PID/environ of", "open /proc/PID/maps of",
                           "open /proc/PID/mem of"] {
                let result = tries.first { $0.0 == "\(attack) \(target)" }?.1
                XCTAssertTrue(result?.hasPrefix("refused") == true, "\(attack) \(target): \(result ?? "not tried")")
            }
        }
        for attack in ["memfd_create", "shmget 1 GiB", "unlink the daemon's socket", "rename the daemon's socket",
                       "setpriority 19 on the whole user", "setpriority 19 on the process group", "socket AF_UNIX with high bits set",
                       "socket AF_VSOCK", "socket AF_PACKET", "chmod the daemon's socket folder", "fchmodat2 the daemon's socket folder",
                       "lchown the daemon's socket", "utimensat the daemon's socket folder",
                       "setxattr on the daemon's socket folder", "inotify_add_watch on the daemon's socket folder"] {
            XCTAssertTrue(tries.first { $0.0 == attack }?.1.hasPrefix("refused") == true, "\(attack): \(tries)")
        }
        // libdispatch's own check of its workers, which opens /proc/TID/stat with the box's
        // thread number, finds the thread (worker_stat.c): without it the host died under load.
        XCTAssertEqual(tries.first { $0.0 == "open /proc/TID/stat of its own thread" }?.1, "done", "\(tries)")
        // Its stdout and stderr are a pipe the daemon reads: each line logged as the plugin's,
        // within its 200 lines a second; none passes for the daemon's, and there is no file to empty.
        XCTAssertEqual(tries.first { $0.0 == "ftruncate stderr" }?.1, "refused (EINVAL)")
        let lines = daemon.log.split(separator: "\n")
        XCTAssertFalse(lines.contains { $0.hasPrefix("adorchd[1]: FORGED") }, "a line the plugin wrote passed for the daemon's")
        XCTAssertTrue(lines.contains { $0.contains("stderr: adorchd[1]: FORGED") }, "the plugin's own line, logged as its own")
        let flooded = try XCTUnwrap(Int(daemon.log.firstMatch(of: /boxbreaker: stderr: (\d+) lines written/)?.1 ?? ""))
        let logged = lines.filter { $0.hasSuffix("stderr: flood") }.count
        XCTAssertGreaterThan(flooded, 2 * CallbackBounds.logLinesPerSecond, "the flood filled the pipe")
        XCTAssertGreaterThan(logged, 0)
        XCTAssertLessThanOrEqual(logged, 3 * CallbackBounds.logLinesPerSecond, "\(logged) of \(flooded) flood lines logged")
        XCTAssertTrue(daemon.log.contains("log lines dropped in the last second"))
        let threads = try XCTUnwrap(Int(daemon.log.firstMatch(of: /boxbreaker: threads: (\d+) made/)?.1 ?? ""))
        XCTAssertLessThan(threads, Int(Confinement.boxTasks), "the plugin's threads stop at its box's task limit")
        print("boxbreaker: \(logged) of \(flooded) stderr lines logged; \(threads) threads made; \(tries.map { "\($0.0): \($0.1)" }.joined(separator: "; "))")

        // Nothing of the daemon's or the other host's changed.
        XCTAssertTrue(daemon.isRunning, daemon.howItEnded ?? "")
        XCTAssertTrue(FileManager.default.fileExists(atPath: daemon.socket), "the daemon's socket is where it was")
        XCTAssertEqual(try String(contentsOfFile: "/proc/\(daemon.pid)/limits", encoding: .utf8), limitsBefore)
        for pid in [daemon.pid, simHost] {
            XCTAssertEqual(try niceness(of: pid), 0, "the nice value of \(pid == daemon.pid ? "the daemon" : "sim's host")")
        }
        try polite.stopAndCheck(during: "a plugin trying to reach past its box")

        // The plugin's threads, still running, used its box's task budget, not the user's:
        // sim's host, killed, starts again.
        kill(simHost, SIGKILL)
        try daemon.waitForLog(["plugin sim restarted isolated"], timeout: .seconds(20))
        XCTAssertEqual(try daemon.pluginStatus("sim")["state"]?.stringValue, "loaded")
        XCTAssertEqual(try daemon.pluginStatus("boxbreaker")["crashes"]?.intValue, 0)
    }

    /// A socket folder another user made first, writable by anyone (/tmp/adorch-UID made by
    /// someone else, mode 0777): that user could replace the socket with an impostor. The
    /// daemon refuses it by name before it starts anything.
    func testASocketFolderAnotherUserCouldWriteIsRefusedBeforeAnythingStarts() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-squatted-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        XCTAssertEqual(chown(folder.path, uid_t(HostileUID.attacker), gid_t(HostileUID.attacker)), 0)
        XCTAssertEqual(chmod(folder.path, 0o777), 0)
        let state = folder.appendingPathComponent("state")
        do {
            let daemon = try DaemonProcess(config: simConfig(slots: ""), extraArguments: ["--socket", folder.appendingPathComponent("adorchd.sock").path],
                                           stateDir: state)
            daemon.stop()
            XCTFail("adorchd served in a folder uid \(HostileUID.attacker) owns, mode 0777")
        } catch {
            XCTAssertTrue("\(error)".contains("the socket's folder \(folder.path) belongs to uid \(HostileUID.attacker)"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: state.path), "a refused start made no state directory")
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.appendingPathComponent("adorchd.sock").path))
    }

    /// Field 19 of /proc/PID/stat, after the command name (which may hold spaces).
    private func niceness(of pid: pid_t) throws -> Int? {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        guard let end = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: end)...].split(separator: " ").dropFirst(16).first.flatMap { Int($0) }
    }
}
