import AdorchLocking
import Foundation

/// The process the daemon starts for an isolated plugin, and how it ended. In a box (new user,
/// PID and IPC namespaces: docs/confinement.md) it is the box's pid 1, which runs the host as
/// pid 2 and, when the host ends, writes the host's wait status on `status` and exits; killing
/// it ends everything in the box. Where the kernel will not make a box, the host itself.
final class SpawnedHost: Sendable {
    /// What the daemon waits for and kills.
    let pid: pid_t
    /// The read end of the box's status pipe; -1 without a box, or once read: a host ended
    /// while its start was refused is reaped twice, and the second must not close a number
    /// the process has given to another file since.
    private let status: LockedValue<Int32>
    /// Said of the box for the log: what it is, or why there is none.
    let box: String?

    private init(pid: pid_t, status: Int32, box: String?) {
        (self.pid, self.status, self.box) = (pid, LockedValue(status), box)
    }

    struct Failure: Error, Sendable { let reason: String }

    /// The channel is the host's fd 3 and `output` its stdout and stderr, and nothing else of
    /// the daemon's goes with them (the host closes any other descriptor it inherited first thing).
    static func start(settings: HostSettings, name: String, channelFD: Int32, output: Int32) -> Result<SpawnedHost, Failure> {
        let arguments = [settings.executable] + PluginHostArguments(name: name, parent: getpid(), confinement: settings.confinement).arguments
        // The daemon's environment, less the Swift runtime's backtracer: a crashing plugin
        // must die of its signal at once (the daemon logs which), not wait on a backtrace.
        var environment = ProcessInfo.processInfo.environment.filter { HostSettings.inheritedEnvironment($0.key) }
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let boxed = ChildSpawn.spawnBoxed(settings.executable, arguments: arguments, environment: environment,
                                          channel: channelFD, as: PluginHostArguments.channelFD, statusAs: PluginHostArguments.statusFD,
                                          output: output)
        switch boxed {
        case .started(let pid, let status):
            return .success(SpawnedHost(pid: pid, status: status, box: "box: its own user, PID and IPC namespaces"))
        case .failed(let failure):
            return .failure(Failure(reason: failure.description))
        case .refused(let errno):
            let why = "box: none: the kernel refused new user, PID and IPC namespaces (\(String(cString: strerror(errno))))"
                + ": only the system call filter keeps it from other processes"
            switch ChildSpawn.spawn(settings.executable, arguments: arguments, environment: environment,
                                    channel: channelFD, as: PluginHostArguments.channelFD, output: output) {
            case .success(let pid): return .success(SpawnedHost(pid: pid, status: -1, box: why))
            case .failure(let failure): return .failure(Failure(reason: failure.description))
            }
        }
    }

    func kill() { _ = Glibc.kill(pid, SIGKILL) }

    /// Waits for it to be gone and says how the host went: the watchdog's reason first, else
    /// its signal or status (in a box, as its pid 1 handed it on). A process that closed its
    /// end without exiting is killed.
    func reap(killedFor: String?, channelError: String?) -> PluginExit {
        var status: Int32 = 0
        var waited = waitpid(pid, &status, WNOHANG)
        var lingered = false
        if waited == 0 {
            // Its end closed: it is exiting. A short grace for that, then no more.
            for _ in 0..<200 where waited == 0 {
                usleep(5_000)
                waited = waitpid(pid, &status, WNOHANG)
            }
            if waited == 0 {
                lingered = true
                kill()
                waited = waitpid(pid, &status, 0)
            }
        }
        let pipe = self.status.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        if pipe >= 0 {
            // Written before pid 1 exited, so here now if it was written at all.
            var host: Int32 = 0
            if read(pipe, &host, MemoryLayout<Int32>.size) == MemoryLayout<Int32>.size { status = host }
            close(pipe)
        }
        let signal: Int32? = waited == pid && (status & 0x7f) != 0 && (status & 0x7f) != 0x7f ? status & 0x7f : nil
        if let killedFor { return PluginExit(signal: SIGKILL, reason: killedFor) }
        if lingered {
            return PluginExit(signal: SIGKILL, reason: "its channel \(channelError.map { "broke (\($0))" } ?? "closed") and it did not exit within 1 s: killed")
        }
        if let signal {
            let core = status & 0x80 != 0 ? " (core dumped)" : ""
            return PluginExit(signal: signal, reason: "killed by \(signalName(signal))\(core)")
        }
        let code = (status >> 8) & 0xff
        let why = channelError.map { " after its channel broke: \($0)" } ?? ""
        return PluginExit(signal: nil, reason: waited == pid ? "exited with status \(code)\(why)" : "ended\(why)")
    }
}
