import AdorchVarlink
import Foundation

/// A real adorchd for a benchmark: its own folder, socket and NOTIFY_SOCKET, stopped by PID.
/// It is started the way systemd starts it, so READY=1 and STATUS= say when it is up and full.
public final class BenchDaemon {
    public let dir: URL
    public let socket: String
    /// The config file it was started with (and reloads), if it was given one.
    public let configPath: String
    public let process = Process()
    /// From just before exec to READY=1.
    public let startToReady: Duration
    private let listener: NotifyListener

    /// Starts adorchd with `config` (nil: the embedded default, plugins next to the binary).
    public init(adorchd: String, config: String?) throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        socket = dir.appendingPathComponent("adorchd.sock").path
        listener = try NotifyListener(in: dir)
        // console, not auto: a journald running on the host must not change what is measured.
        var arguments = ["--socket", socket, "--state-dir", dir.appendingPathComponent("state").path, "--log-target", "console"]
        configPath = dir.appendingPathComponent("adorchd.toml").path
        if let config {
            try config.write(toFile: configPath, atomically: true, encoding: .utf8)
            arguments += ["--config", configPath]
        }
        process.executableURL = URL(fileURLWithPath: adorchd)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        for key in ["WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM"] { environment[key] = nil }
        environment["NOTIFY_SOCKET"] = listener.path
        process.environment = environment
        // Its log lines are formatted and written as in production, to a sink that costs nothing,
        // unless ADORCH_BENCH_LOG names a file to append them to (to see why a figure is what it is).
        let log = environment["ADORCH_BENCH_LOG"].flatMap { path -> FileHandle? in
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            return FileHandle(forWritingAtPath: path)
        }
        log?.seekToEndOfFile()
        process.standardOutput = log ?? FileHandle.nullDevice
        process.standardError = log ?? FileHandle.nullDevice
        let started = ContinuousClock.now
        try process.run()
        let ready = try listener.read(until: "READY=1", timeout: .seconds(30)) { $0.split(separator: "\n").contains("READY=1") }
        startToReady = ready.last!.at - started
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: dir)
    }

    public var pid: Int32 { process.processIdentifier }

    /// Waits for a STATUS= with every slot full ("N slots, R/R ads ready, …"); STATUS is sent
    /// on change, so this costs the daemon nothing.
    public func waitUntilFull(timeout: Duration = .seconds(120)) throws {
        if let last = listener.history.last(where: { $0.contains("STATUS=") }), Self.isFull(last) { return }
        _ = try listener.read(until: "a STATUS with every slot full", timeout: timeout) { Self.isFull($0) }
    }

    static func isFull(_ message: String) -> Bool {
        guard let status = message.split(separator: "\n").first(where: { $0.hasPrefix("STATUS=") }),
              let ratio = status.split(separator: ",").dropFirst().first?.split(separator: " ").first,
              case let parts = ratio.split(separator: "/"), parts.count == 2 else { return false }
        return parts[0] == parts[1] && parts[0] != "0"
    }

    /// Resident and peak resident memory in bytes (VmRSS, VmHWM).
    public var memory: (resident: Int, peak: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            return (line?.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0) * 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// User + system CPU time used so far, over all threads.
    public var cpuTime: Duration { Self.cpuTime(of: pid) }

    /// User + system CPU time a process used so far, over all threads; zero once it is gone.
    public static func cpuTime(of pid: Int32) -> Duration {
        let fields = statFields(of: pid)
        let ticks = (Int(fields[safe: 11] ?? "") ?? 0) + (Int(fields[safe: 12] ?? "") ?? 0)
        return .milliseconds(ticks * 1000 / Int(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// /proc/PID/stat after the command: the state is field 0, the parent's pid field 1.
    static func statFields(of pid: Int32) -> [Substring] {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        // The command (which may hold spaces) ends at the last ')'.
        return stat[(stat.lastIndex(of: ")").map { stat.index(after: $0) } ?? stat.startIndex)...].split(separator: " ")
    }

    /// Its child processes, the isolated plugins' hosts, found by their parent in /proc (this
    /// kernel has no /proc/PID/task/TID/children).
    public var children: [Int32] { Self.children(of: pid) }

    static func children(of parent: Int32) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter {
            statFields(of: $0)[safe: 1].flatMap { Int32($0) } == parent
        }.sorted()
    }

    /// Whether `pid` is still a process that has not exited: a zombie nobody reaped has.
    public static func isRunning(_ pid: Int32) -> Bool {
        guard let state = statFields(of: pid).first else { return false }
        return state != "Z" && state != "X"
    }

    /// io.adorch.Manager.GetStatus's plugins, by name.
    public func pluginStatus() throws -> [String: JSONValue] {
        let status = try VarlinkClient(path: socket, timeout: .seconds(10)).call("io.adorch.Manager.GetStatus")
        guard status.error == nil else { throw BenchError("GetStatus: \(status.error!) \(status.parameters)") }
        return Dictionary((status.parameters["plugins"]?.arrayValue ?? []).compactMap { p in p["name"]?.stringValue.map { ($0, p) } }) { a, _ in a }
    }

    /// Context switches over all threads: each is a wakeup (or a preemption).
    public var contextSwitches: Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { sum, task in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            return sum + status.split(separator: "\n").filter { $0.hasPrefix("voluntary_ctxt_switches") || $0.hasPrefix("nonvoluntary_ctxt_switches") }
                .compactMap { $0.split(separator: "\t").last.flatMap { Int($0) } }.reduce(0, +)
        }
    }

    /// Stops listening to its notifications: for long runs (see NotifyListener.discardFromNow).
    public func discardNotifications() { listener.discardFromNow() }

    /// Open file descriptors: sockets, the ledger, the journal; a leak shows here first.
    public var openFileDescriptors: Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    /// What each open descriptor is ("socket:[123]", a path), to name a leak.
    public var openFiles: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")
        }
    }

    public var threads: Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).count
    }

    public func stop() {
        guard process.isRunning else { return }
        kill(pid, SIGTERM)
        process.waitUntilExit()
    }

    /// Stops it with SIGTERM and says how it ended: "exit 0" is a clean stop.
    public func stopReportingExit() -> String {
        stop()
        return "\(process.terminationReason == .uncaughtSignal ? "signal" : "exit") \(process.terminationStatus)"
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
