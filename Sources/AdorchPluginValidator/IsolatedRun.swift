import AdorchLocking
import AdorchPluginHost
import Foundation

/// What the confined child tells its parent, one JSON line each on `ChildChannel.fd`.
enum ChildMessage: Codable {
    /// A check starts: the one that was running if the child dies before the next.
    case check(String)
    /// Calls into the plugin still return.
    case alive
    case result(CheckResult)
    /// Every check has ended: only the child's exit is left.
    case done
}

/// The confined child's side of `IsolatedRun`: each message written at once, as the next
/// instruction may be the plugin's crash. Several threads call into the plugin, so lines go
/// out whole, one at a time, under the lock.
public final class ChildChannel: Sendable {
    /// The child's descriptor for its messages; its stdout and stderr stay the plugin's.
    static let fd: Int32 = 3
    /// When the last line went out: `alive` goes at most once a second, as a resource check
    /// makes tens of thousands of calls.
    private let lastLine = LockedValue(ContinuousClock.now)

    public init() {}

    public var watcher: RunWatcher {
        RunWatcher(checkStarted: { [self] in send(.check($0)) }, progressed: { [self] in send(.alive) })
    }

    public func report(_ result: CheckResult) { send(.result(result)) }

    public func finished() { send(.done) }

    private func send(_ message: ChildMessage) {
        lastLine.withLock { last in
            let now = ContinuousClock.now
            if case .alive = message, now - last < .seconds(1) { return }
            last = now
            var line = (try? JSONEncoder().encode(message)) ?? Data()
            line.append(0x0A)
            // A parent that is gone cannot be told; the child goes on to its end.
            line.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = write(Self.fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if n > 0 { offset += n } else if n < 0, errno == EINTR { continue } else { return }
                }
            }
        }
    }
}

/// Runs the checks in a child process, adorch-plugin-validate itself started again with
/// `--confined-child`, confined as the daemon confines a plugin's host. The child's stdout
/// and stderr are the parent's, so the plugin's own output passes through as it comes; its
/// messages come on a pipe. A child that dies by a signal, or says nothing for
/// `stallLimit` and is killed, fails the check it was running, naming the signal.
public struct IsolatedRun {
    /// The hidden flag that makes adorch-plugin-validate the confined child; `--` and the
    /// confinement's arguments follow it.
    public static let childFlag = "confined-child"

    /// Added to a request's deadline, the time without a message after which the child has
    /// stopped answering (`stallLimit`).
    public static let stallMargin: Duration = .seconds(10)

    /// The child's confinement. The validator has no state dir, reward key or config of the
    /// daemon's to hide: the child gets what every plugin host gets besides them.
    public static func confinement(addressSpaceMB: UInt64) -> Confinement {
        let limit = addressSpaceMB == 0 || Sanitizer.isActive ? nil : addressSpaceMB << 20
        return Confinement(hiddenPaths: [], addressSpaceBytes: limit)
    }

    /// The checks' own arguments, as adorch-plugin-validate takes them.
    let checkArguments: [String]
    let confinement: Confinement
    /// How long the child may go without a message before it is taken to have stopped
    /// answering: the longest a check waits without calling the plugin is one request's
    /// deadline (then the grace to hear late reports), and `stallMargin` more is far over any
    /// call into a plugin that keeps the contract (each returns within --call-bound-ms).
    let stallLimit: Duration

    public init(checkArguments: [String], confinement: Confinement, options: ValidatorOptions) {
        self.checkArguments = checkArguments
        self.confinement = confinement
        stallLimit = options.timeout + options.grace + Self.stallMargin
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Every check's result, in order, each also given to `report` as it comes; the last
    /// one a failure if the child did not end on its own after the last check.
    public func run(report: (CheckResult) -> Void) throws -> [CheckResult] {
        let channel = try ChannelPipe(), ended = try ChannelPipe()
        defer { close(channel.read) }
        let pid: pid_t
        do {
            pid = try spawn(channel: channel.write)
            close(channel.write)
        } catch {
            [channel.write, ended.read, ended.write].forEach { close($0) }
            throw error
        }
        let exit = ExitWatch(pid, ended)
        defer { close(exit.fd) }

        var results: [CheckResult] = []
        var running: String?
        var done = false, killed = false, open = true
        var pending: [UInt8] = []
        func take(_ bytes: ArraySlice<UInt8>) {
            pending += bytes
            while let end = pending.firstIndex(of: 0x0A) {
                let line = Data(pending[..<end])
                pending.removeSubrange(...end)
                // A line that is not a message (a plugin writing to the descriptor) is no news.
                switch try? JSONDecoder().decode(ChildMessage.self, from: line) {
                case .check(let name): running = name
                case .result(let result):
                    results.append(result)
                    report(result)
                case .done: done = true
                case .alive, nil: break
                }
            }
        }

        var buffer = [UInt8](repeating: 0, count: 65_536)
        var deadline = ContinuousClock.now + stallLimit
        while true {
            var fds = [pollfd(fd: open ? channel.read : -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: exit.fd, events: Int16(POLLIN), revents: 0)]
            let wait = killed ? -1 : Int32(min(max(0, ((deadline - .now) / .milliseconds(1)).rounded(.up)), 3_600_000))
            let ready = poll(&fds, 2, wait)
            if ready < 0 {
                guard errno == EINTR else {
                    let problem = String(cString: strerror(errno))
                    kill(pid, SIGKILL)
                    _ = exit.reap()
                    throw SpawnError(description: "poll: \(problem)")
                }
                continue
            }
            if ready == 0 {
                kill(pid, SIGKILL)
                killed = true
                continue
            }
            if fds[0].revents != 0 {
                let n = read(channel.read, &buffer, buffer.count)
                if n > 0 {
                    take(buffer[..<n])
                    deadline = .now + stallLimit
                } else if n == 0 || errno != EINTR {
                    open = false
                }
            }
            if fds[1].revents != 0 { break }
        }
        // The child is gone; what it wrote last may still be in the pipe (or a process it
        // started may hold the pipe open: read only what is there).
        if open, fcntl(channel.read, F_SETFL, O_NONBLOCK) == 0 {
            while true {
                let n = read(channel.read, &buffer, buffer.count)
                guard n > 0 else { break }
                take(buffer[..<n])
            }
        }

        if let problem = problem(exit.reap(), killed: killed, done: done) {
            let result = CheckResult(name: done ? "after the checks" : running ?? "entry", outcome: .fail, detail: problem)
            results.append(result)
            report(result)
        }
        return results
    }

    /// What went wrong with a child that ended with `status` (waitpid's), or nil if nothing did.
    private func problem(_ status: Int32, killed: Bool, done: Bool) -> String? {
        let signal = status & 0x7F
        guard signal != 0 else {
            let code = (status >> 8) & 0xFF
            if done, code == 0 { return nil }
            return "the plugin ended its host (exit status \(code)) \(done ? "after the checks" : "before the checks ended")"
        }
        if killed, signal == SIGKILL {
            return String(format: "the plugin stopped answering: nothing from its host for %g s, so it was killed (SIGKILL)", seconds(stallLimit))
        }
        return "the plugin crashed its host (\(signalName(signal)))"
    }

    /// adorch-plugin-validate again, as the confined child, with `channel` as its `ChildChannel.fd`.
    private func spawn(channel: Int32) throws -> pid_t {
        let arguments = [CommandLine.arguments[0]] + checkArguments + ["--\(Self.childFlag)", "--"] + confinement.arguments
        var environment = ProcessInfo.processInfo.environment
        // The Swift runtime's backtracer would be started by exec, which a confined child may
        // not do; the parent names the check and the signal instead.
        if environment["SWIFT_BACKTRACE"] == nil { environment["SWIFT_BACKTRACE"] = "enable=no" }
        switch ChildSpawn.spawn("/proc/self/exe", arguments: arguments, environment: environment, channel: channel, as: ChildChannel.fd) {
        case .success(let pid): return pid
        case .failure(let failure): throw SpawnError(description: "cannot start the confined child: \(String(cString: strerror(failure.errno)))")
        }
    }
}

/// A pipe whose ends are above `ChildChannel.fd`, so that the child's dup2 onto it always
/// makes a new descriptor (one without close-on-exec), and closed on exec in the child
/// (pipe2 is not visible to Swift; the validator starts no other process meanwhile).
private struct ChannelPipe {
    let read: Int32, write: Int32

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw IsolatedRun.SpawnError(description: "pipe: \(String(cString: strerror(errno)))") }
        let high = fds.map { fcntl($0, F_DUPFD_CLOEXEC, ChildChannel.fd + 1) }
        fds.forEach { close($0) }
        guard !high.contains(-1) else { throw IsolatedRun.SpawnError(description: "fcntl: \(String(cString: strerror(errno)))") }
        (read, write) = (high[0], high[1])
    }
}

/// Waits for the child to end on a thread of its own; `fd` reads end-of-file once it has.
/// The child is left for `reap()`: until then its pid cannot be reused, so killing it by pid
/// never hits another process.
private struct ExitWatch {
    let fd: Int32
    let pid: pid_t

    /// `pipe` is the watch's own: it closes the write end when the child ends.
    init(_ pid: pid_t, _ pipe: ChannelPipe) {
        fd = pipe.read
        self.pid = pid
        Thread.detachNewThread {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0, errno == EINTR {}
            close(pipe.write)
        }
    }

    /// waitpid's status, once `fd` said the child ended.
    func reap() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return status
    }
}
