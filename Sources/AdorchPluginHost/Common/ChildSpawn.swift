import CAdorchSandbox
import Glibc

/// posix_spawn of the processes adorch starts for plugins (a plugin's host; the validator's
/// confined child): `channel` becomes the child's fd `childFD`, its stdin is /dev/null and its
/// stdout and stderr are `output`, or the parent's without one; every signal is at its default and none is blocked (the
/// parent's signal handling is not the child's). The child gets `environment` and nothing else.
public enum ChildSpawn {
    /// The child's pid, or errno's text for why it could not start.
    public static func spawn(_ executable: String, arguments: [String], environment: [String: String],
                             channel: Int32, as childFD: Int32, output: Int32? = nil) -> Result<pid_t, SpawnFailure> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, channel, childFD)
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        if let output {
            posix_spawn_file_actions_adddup2(&actions, output, STDOUT_FILENO)
            posix_spawn_file_actions_adddup2(&actions, output, STDERR_FILENO)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, executable, &actions, &attributes, &argv, &envp)
        return code == 0 ? .success(pid) : .failure(SpawnFailure(executable: executable, errno: code))
    }

    /// A child started in a box of its own (`adorch_spawn_boxed`: new user, PID and IPC
    /// namespaces): `channel` becomes its `childFD`, a pipe's write end its `statusFD` and
    /// `output` its stdout and stderr, the rest as `spawn`. `.started` has the pipe's read end; `.refused` is the kernel's errno
    /// when it would not make the namespaces (the caller may start the child unboxed);
    /// `.failed`, when the program could not start.
    public static func spawnBoxed(_ executable: String, arguments: [String], environment: [String: String],
                                  channel: Int32, as childFD: Int32, statusAs statusFD: Int32, output: Int32) -> BoxedSpawn {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        var status: Int32 = -1
        let code = adorch_spawn_boxed(executable, &argv, &envp, channel, childFD, statusFD, output, &pid, &status)
        if code == 0 { return .started(pid: pid, status: status) }
        return code < 0 ? .refused(errno: -code) : .failed(SpawnFailure(executable: executable, errno: code))
    }

    public enum BoxedSpawn: Sendable {
        case started(pid: pid_t, status: Int32)
        case refused(errno: Int32)
        case failed(SpawnFailure)
    }

    public struct SpawnFailure: Error, CustomStringConvertible, Sendable {
        public var executable: String
        public var errno: Int32
        public var description: String { "cannot start \(executable): \(String(cString: strerror(errno)))" }
    }
}
