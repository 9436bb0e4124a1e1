import Foundation

/// Where things live when neither the command line nor the config says: system paths for
/// root (as under systemd), per-user paths otherwise, so `make run` works unprivileged too.
public enum DefaultPaths {
    public static var isRoot: Bool { geteuid() == 0 }

    /// The socket apps and adorchctl use. `ADORCH_SOCKET` overrides it for clients.
    public static var socket: String {
        if isRoot { return "/run/adorch/adorchd.sock" }
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return runtime + "/adorch/adorchd.sock"
        }
        return "/tmp/adorch-\(getuid())/adorchd.sock"
    }

    public static var stateDir: String {
        if isRoot { return "/var/lib/adorch" }
        let env = ProcessInfo.processInfo.environment
        if let state = env["XDG_STATE_HOME"], !state.isEmpty { return state + "/adorch" }
        return (env["HOME"] ?? "/tmp") + "/.local/state/adorch"
    }

    /// Plugin folders searched in order: the one beside the running binary (a build), then
    /// the installed one.
    public static var pluginDirs: [String] {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dirs = [executable.deletingLastPathComponent().path]
        if let own = Bundle.main.executableURL?.deletingLastPathComponent().path, !dirs.contains(own) { dirs.append(own) }
        dirs.append("/usr/lib/adorch/plugins")
        return dirs
    }

    /// The client side: `--socket`, then `ADORCH_SOCKET`, then the default.
    public static func clientSocket(_ explicit: String?) -> String {
        explicit ?? ProcessInfo.processInfo.environment["ADORCH_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? socket
    }
}
