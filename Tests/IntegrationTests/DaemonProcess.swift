import AdorchPluginHost
import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// The folder with the built products: adorchd, adorchctl and the plugin .so files.
let productsDirectory: URL = {
    // On Linux the test bundle is an executable in the products folder.
    Bundle.main.bundleURL
}()

/// SwiftPM's --build-path of this test run (.build, or a sanitizer run's .build-tsan): what
/// `make install-files BUILD_PATH=… CONFIGURATION=debug` installs, the build these tests test.
let buildPath = productsDirectory.deletingLastPathComponent().deletingLastPathComponent()

/// The package's root, for fixtures and the plugin header.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The validator's bound on one call into a plugin (its default 50 ms), scaled like every
/// wait: under a sanitizer a Swift plugin's first calls alone take hundreds of ms.
let validatorCallBoundMs = Int(50 * timeScale)

/// A real adorchd process on its own socket and state dir, stopped by PID when done.
///
/// Spawned and reaped with posix_spawn and waitpid rather than Foundation's Process, whose
/// exit monitoring in the test process never reaped an adorchd built with AddressSanitizer
/// (the zombie hung the suite in `swift test --sanitize=address`).
final class DaemonProcess {
    let dir: URL
    let socket: String
    let logFile: URL
    let pid: pid_t
    /// The read end of adorchd's stdout, kept open so that its writes never fail.
    private let stdout: FileHandle
    /// waitpid's status once it has exited.
    private var waitStatus: Int32?

    /// Starts adorchd (with `config` as its config file, or on the embedded default) and
    /// returns once it printed that it is serving; with `fileLimit`, its soft and hard limit
    /// on open descriptors, with `taskLimit` on tasks (through prlimit, which execs it under
    /// the same pid). `user`: run as that uid, as a service user is (its binaries and
    /// plugins are then copies in the run folder, its folder its own). `socket`: where it
    /// serves, for daemons started one after another on one socket; else in its own folder.
    init(config: String? = nil, pluginDir: String? = productsDirectory.path, extraArguments: [String] = [],
         environment: [String: String] = [:], stateDir: URL? = nil, fileLimit: Int? = nil, taskLimit: Int? = nil,
         user: Int? = nil, socket: String? = nil) throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-it-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        if let user {
            guard chown(dir.path, uid_t(user), gid_t(user)) == 0, chmod(dir.path, 0o711) == 0 else {
                throw TestFailure("cannot give \(dir.path) to uid \(user): \(String(cString: strerror(errno)))")
            }
        }
        self.socket = socket ?? dir.appendingPathComponent("adorchd.sock").path
        logFile = dir.appendingPathComponent("adorchd.log")

        // The tests read the log from stderr: console, not auto, which picks the journal
        // whenever a journald happens to run on the host.
        var arguments = ["--socket", self.socket, "--state-dir", (stateDir ?? dir.appendingPathComponent("state")).path,
                         "--log-level", "debug", "--log-target", "console"]
        if let config {
            let path = dir.appendingPathComponent("adorchd.toml")
            try config.write(to: path, atomically: true, encoding: .utf8)
            arguments += ["--config", path.path]
        }
        // Another uid gets copies of the binaries and plugins, which the checkout may hide.
        let binaries = try user.map { _ in try RunFolder.copy(of: productsDirectory.appendingPathComponent("adorchd")).deletingLastPathComponent() }
        if user != nil {
            for name in ["adorch-plugin-host", "libadorch-plugin-sim.so"] { _ = try RunFolder.copy(of: productsDirectory.appendingPathComponent(name)) }
        }
        if let pluginDir { arguments += ["--plugin-dir", pluginDir == productsDirectory.path ? (binaries ?? productsDirectory).path : pluginDir] }
        // Not started by systemd unless the test says so.
        var inherited = ProcessInfo.processInfo.environment
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM"] { inherited[key] = nil }
        let adorchd = (binaries ?? productsDirectory).appendingPathComponent("adorchd").path
        let limits = (fileLimit.map { ["--nofile=\($0):\($0)"] } ?? []) + (taskLimit.map { ["--nproc=\($0):\($0)"] } ?? [])
        let limit = limits.isEmpty ? [] : ["/usr/bin/prlimit"] + limits + ["--"]
        var output: [Int32] = [0, 0]
        guard pipe(&output) == 0 else { throw TestFailure("pipe: \(String(cString: strerror(errno)))") }
        for end in output { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        stdout = FileHandle(fileDescriptor: output[0], closeOnDealloc: true)
        let logPath = logFile.path
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let argv = try user.map { try asUser($0, limit + [adorchd] + arguments + extraArguments) } ?? (limit + [adorchd] + arguments + extraArguments)
        let spawned = Result {
            guard logFD >= 0 else { throw TestFailure("\(logPath): \(String(cString: strerror(errno)))") }
            return try spawnTiedToTheTests(argv, environment: inherited.merging(environment) { $1 }, stdio: [nil, output[1], logFD])
        }
        // Only the child may hold the write end: its exit is then the end of file read below.
        close(output[1])
        if logFD >= 0 { close(logFD) }
        pid = try spawned.get()

        // Wait for the line adorchd prints once the socket is bound: an event, not a sleep.
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("serving on") {
            let chunk = stdout.availableData
            if chunk.isEmpty {
                let how = stop()
                throw TestFailure("adorchd exited (\(how)) before serving:\n\(log)")
            }
            seen.append(chunk)
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: dir)
    }

    var isRunning: Bool {
        guard waitStatus == nil else { return false }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return true }
        waitStatus = status
        return false
    }

    /// "exit N" or "signal N", once it has exited.
    var howItEnded: String? {
        // WIFEXITED, WEXITSTATUS and WTERMSIG are macros the Glibc overlay does not import.
        waitStatus.map { $0 & 0x7f == 0 ? "exit \(($0 >> 8) & 0xff)" : "signal \($0 & 0x7f)" }
    }

    /// SIGTERM unless it exited already, then wait for the exit; returns its exit status, or
    /// the signal that ended it. A daemon that has not exited within its stop timeout (the
    /// unit's TimeoutStopSec, 20 s) is killed, as systemd would: a test that broke it must
    /// still end.
    @discardableResult
    func stop() -> Int32 {
        if isRunning {
            kill(pid, SIGTERM)
            let deadline = ContinuousClock.now + Duration.seconds(20).scaled
            while isRunning, ContinuousClock.now < deadline { usleep(10_000) }
            if isRunning {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0, errno == EINTR {}
                waitStatus = status
            }
        }
        let status = waitStatus ?? 0
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    /// For a daemon the test made end by itself: waits until its stdout reaches end of file
    /// (its exit, an event), reaps it and says how it ended, "exit N" or "signal N".
    func waitForExit(timeout: Duration = .seconds(10)) throws -> String {
        let deadline = ContinuousClock.now + timeout.scaled
        var ended = false
        while !ended {
            let left = Int((deadline - ContinuousClock.now).inSeconds * 1000)
            var ready = pollfd(fd: stdout.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let n = left > 0 ? poll(&ready, 1, Int32(left)) : 0
            if n == 0 { throw diagnosis("still running \(timeout.scaled) after it should have ended") }
            if n > 0 { ended = stdout.availableData.isEmpty }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        waitStatus = status
        return howItEnded ?? "?"
    }

    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    func client(timeout: Duration = .seconds(10)) throws -> VarlinkClient { try VarlinkClient(path: socket, timeout: timeout.scaled) }

    /// What went wrong, with whether the daemon is still there and the end of its log.
    func diagnosis(_ what: String) -> TestFailure {
        let state = isRunning ? "still running" : "ended (\(howItEnded ?? "?"))"
        let tail = log.split(separator: "\n").suffix(30).joined(separator: "\n")
        return TestFailure("\(what); adorchd \(state); its log ends:\n\(tail)")
    }

    /// One call on a fresh connection; fails the test on an error reply.
    func call(_ method: String, _ parameters: [String: JSONValue] = [:], file: StaticString = #filePath, line: UInt = #line) throws -> [String: JSONValue] {
        let reply: VarlinkClient.Reply
        do { reply = try client().call(method, parameters) } catch { throw diagnosis("\(method): \(error)") }
        if let error = reply.error { throw TestFailure("\(method) failed: \(error) \(reply.parameters)") }
        return reply.parameters
    }

    /// One call on a fresh connection, expecting an error; returns its name and parameters.
    func callExpectingError(_ method: String, _ parameters: [String: JSONValue] = [:]) throws -> (String, [String: JSONValue]) {
        let reply: VarlinkClient.Reply
        do { reply = try client().call(method, parameters) } catch { throw diagnosis("\(method): \(error)") }
        guard let error = reply.error else { throw TestFailure("\(method) succeeded: \(reply.parameters)") }
        return (error, reply.parameters)
    }

    func status() throws -> JSONValue { .object(try call("io.adorch.Manager.GetStatus")) }

    func slots() throws -> [JSONValue] { try call("io.adorch.Ads.ListSlots")["slots"]?.arrayValue ?? [] }

    func allSlotsFull() throws -> Bool {
        try slots().allSatisfy { $0["ready"]?.intValue == $0["buffer"]?.intValue }
    }

    /// Waits until `condition` holds, checking it again after every daemon event: the state
    /// it looks at changes only when something happens. Fails after `timeout`.
    func waitFor(_ what: String, timeout: Duration = .seconds(10), _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout.scaled
        let events = try client()
        let first: VarlinkClient.Reply
        do { first = try events.call("io.adorch.Ads.Subscribe", [:], more: true) } catch { throw diagnosis("Subscribe, waiting for \(what): \(error)") }
        guard first.error == nil else { throw TestFailure("Subscribe failed: \(first)") }
        events.setReadTimeout(.milliseconds(250))
        while true {
            if try condition() { return }
            if ContinuousClock.now >= deadline { throw diagnosis("timed out after \(timeout.scaled) waiting for \(what)") }
            // A read timeout only means no event came in that quarter second: check again.
            _ = try? events.nextReply()
        }
    }

    /// Waits until the log holds every one of `lines`, checking again whenever the daemon
    /// writes to it (inotify): for a log line among a flood of events, which a subscription
    /// would have to read one by one. Fails after `timeout`.
    func waitForLog(_ lines: [String], timeout: Duration = .seconds(10)) throws {
        try waitForLog("\(lines) in the log", timeout: timeout) { log in lines.allSatisfy { log.contains($0) } }
    }

    /// Waits until `condition` holds of the log, checking it again whenever the daemon writes
    /// to it (inotify). Fails after `timeout`.
    func waitForLog(_ what: String, timeout: Duration = .seconds(10), _ condition: (String) -> Bool) throws {
        let deadline = ContinuousClock.now + timeout.scaled
        let watch = inotify_init1(Int32(IN_CLOEXEC))
        guard watch >= 0 else { throw TestFailure("inotify_init1: \(String(cString: strerror(errno)))") }
        defer { close(watch) }
        guard inotify_add_watch(watch, logFile.path, UInt32(IN_MODIFY)) >= 0 else {
            throw TestFailure("inotify_add_watch \(logFile.path): \(String(cString: strerror(errno)))")
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if condition(log) { return }
            let left = Int((deadline - ContinuousClock.now).inSeconds * 1000)
            var ready = pollfd(fd: watch, events: Int16(POLLIN), revents: 0)
            guard left > 0, poll(&ready, 1, Int32(left)) > 0 else { throw diagnosis("timed out after \(timeout.scaled) waiting for \(what)") }
            _ = read(watch, &buffer, buffer.count)
        }
    }

    /// One plugin as status shows it: state, abi, stats...
    func pluginStatus(_ name: String) throws -> JSONValue {
        guard let plugin = try status()["plugins"]?.arrayValue?.first(where: { $0["name"]?.stringValue == name }) else {
            throw TestFailure("no plugin \(name) in status")
        }
        return plugin
    }

    /// The sim plugin's own counters from status.
    func simStats() throws -> JSONValue {
        guard let stats = try pluginStatus("sim")["stats"] else { throw TestFailure("no sim stats in status") }
        return stats
    }

    func slotStatus(_ id: String) throws -> JSONValue {
        guard let slot = try status()["slots"]?.arrayValue?.first(where: { $0["id"]?.stringValue == id }) else {
            throw TestFailure("no slot \(id) in status")
        }
        return slot
    }
}

/// What makes a child die with the test process, whatever ends it (a trap, a SIGKILL):
/// setpriv asks the kernel for SIGKILL when its parent goes (PR_SET_PDEATHSIG) and execs the
/// command under the same pid. Run it from `SpawnThread`: the parent the kernel watches is
/// the thread that spawned the child.
let diesWithTheTests = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"]

/// posix_spawn of `argv` behind `diesWithTheTests`, on SpawnThread: descriptors 0, 1 and 2
/// from `stdio` (nil: /dev/null; pass them close-on-exec, so that no other child holds them);
/// with `shellSignals`, SIGPIPE at its default and no signal blocked, as a shell leaves them
/// (the test process's ignored or blocked signals stay so across exec). The child's pid.
func spawnTiedToTheTests(_ argv: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
                         stdio: [Int32?], shellSignals: Bool = false) throws -> pid_t {
    let argv = diesWithTheTests + argv
    let (rc, child) = SpawnThread.run { () -> (Int32, pid_t) in
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if shellSignals {
            var defaults = sigset_t()
            sigemptyset(&defaults)
            sigaddset(&defaults, SIGPIPE)
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            var unblocked = sigset_t()
            sigemptyset(&unblocked)
            posix_spawnattr_setsigmask(&attributes, &unblocked)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, fd) in stdio.enumerated() {
            if let fd { posix_spawn_file_actions_adddup2(&actions, fd, Int32(target)) } else {
                posix_spawn_file_actions_addopen(&actions, Int32(target), "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }
        let cArguments = argv.map { strdup($0) } + [nil]
        let cEnvironment = environment.map { strdup("\($0)=\($1)") } + [nil]
        defer { (cArguments + cEnvironment).forEach { free($0) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, argv[0], &actions, &attributes, cArguments, cEnvironment)
        return (rc, child)
    }
    guard rc == 0 else { throw TestFailure("posix_spawn \(argv.joined(separator: " ")): \(String(cString: strerror(rc)))") }
    return child
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs a command to completion, tied to the test process (`spawnTiedToTheTests`), and
/// returns its exit status and output.
@discardableResult
func runCommand(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
    var out: [Int32] = [0, 0], err: [Int32] = [0, 0]
    guard pipe(&out) == 0 else { throw TestFailure("pipe: \(String(cString: strerror(errno)))") }
    guard pipe(&err) == 0 else {
        out.forEach { close($0) }
        throw TestFailure("pipe: \(String(cString: strerror(errno)))")
    }
    for end in out + err { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    let outHandle = FileHandle(fileDescriptor: out[0], closeOnDealloc: true)
    let errHandle = FileHandle(fileDescriptor: err[0], closeOnDealloc: true)
    let spawned = Result {
        try spawnTiedToTheTests([executable] + arguments, environment: ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 },
                                stdio: [nil, out[1], err[1]])
    }
    close(out[1])
    close(err[1])
    let pid = try spawned.get()
    // Read both pipes to the end before waiting, so a chatty child cannot block on a full pipe.
    let group = DispatchGroup()
    nonisolated(unsafe) var errData = Data()
    group.enter()
    DispatchQueue.global().async {
        errData = errHandle.readDataToEndOfFile()
        group.leave()
    }
    let outData = outHandle.readDataToEndOfFile()
    group.wait()
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    // As Foundation's terminationStatus: the exit code, or the signal that ended it.
    let code = status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    return (code, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
}

extension Process {
    /// `executable` with `arguments` behind `diesWithTheTests`: for a child that outlives one
    /// call (a server, a reader), started from the test's own thread (the main thread, which
    /// lives as long as the tests).
    func tieToTheTests(_ executable: String, _ arguments: [String]) {
        executableURL = URL(fileURLWithPath: diesWithTheTests[0])
        self.arguments = Array(diesWithTheTests.dropFirst()) + [executable] + arguments
    }
}

/// python3 running `script` (inline) as `uid` (0: as the test itself) with `arguments`: the
/// argv for runCommand or Process. The script's first lines,
/// `import sys; sys.path.insert(0, sys.argv.pop(1)); import varlink`, get the one Varlink
/// client the tests' Python speaks through (Tests/hostile/varlink.py), from the run folder
/// when another uid runs it.
func pythonClient(_ script: String, as uid: Int, _ arguments: [String]) throws -> [String] {
    let hostile = packageRoot.appendingPathComponent("Tests/hostile")
    let python = ["/usr/bin/python3", "-B", "-c", script, (uid == 0 ? hostile : try RunFolder.copy(of: hostile)).path] + arguments
    return uid == 0 ? python : try asUser(uid, python)
}

/// adorchctl against `daemon` as `uid`, the way an app of that user would call.
func adorchctl(as uid: Int, groups: [Int] = [], _ daemon: DaemonProcess, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let argv = try asUser(uid, groups: groups, [try RunFolder.copy(of: productsDirectory.appendingPathComponent("adorchctl")).path]
        + arguments + ["--socket", daemon.socket])
    return try runCommand(argv[0], Array(argv.dropFirst()))
}

/// A config of the test's own: the sim plugin from the build and the given slots.
func simConfig(slots: String, scheduler: String = "", daemon: String = "", sim: String = "") -> String {
    """
    [daemon]
    \(daemon)

    [scheduler]
    \(scheduler)

    [plugins.sim]
    \(sim)

    \(slots)
    """
}

extension Duration {
    /// Seconds as a floating-point number.
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
