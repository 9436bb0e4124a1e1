import Foundation

/// Where things live when neither the command line nor the config says: system paths for
/// root (as under systemd), per-user paths otherwise, so `make run` works unprivileged too.
public enum DefaultPaths {
    public static var isRoot: Bool { geteuid() == 0 }

    /// The socket apps and adorchctl use. `ADORCH_SOCKET` overrides it for clients.
    public static var socket: String {
        if isRoot { return systemSocket }
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return runtime + "/adorch/adorchd.sock"
        }
        return "/tmp/adorch-\(getuid())/adorchd.sock"
    }

    public static var stateDir: String {
        let env = ProcessInfo.processInfo.environment
        // systemd's StateDirectory= (the unit's), whoever the service runs as.
        if let systemd = env["STATE_DIRECTORY"]?.split(separator: ":").first, systemd.hasPrefix("/") { return String(systemd) }
        if isRoot { return "/var/lib/adorch" }
        if let state = env["XDG_STATE_HOME"], !state.isEmpty { return state + "/adorch" }
        return (env["HOME"] ?? "/tmp") + "/.local/state/adorch"
    }

    /// Plugin folders searched in order: the one beside the running binary (a build), then
    /// the installed one.
    public static var pluginDirs: [String] { executableDirs + ["/usr/lib/adorch/plugins"] }

    /// The folders of the running binary. Installed, that is a bin folder full of other things,
    /// so a config naming no plugins finds only `libadorch-plugin-*.so` there (`PluginRegistry.discover`).
    public static var executableDirs: [String] {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dirs = [executable.deletingLastPathComponent().path]
        if let own = Bundle.main.executableURL?.deletingLastPathComponent().path, !dirs.contains(own) { dirs.append(own) }
        return dirs
    }

    /// Where adorch-plugin-host may be: beside the running binary (a build), or in the
    /// libexec folder of its prefix (`make install`, the package: it is not a command for
    /// people, so not on PATH).
    public static var pluginHostDirs: [String] {
        executableDirs + executableDirs.map { URL(fileURLWithPath: $0 + "/../libexec/adorch").standardizedFileURL.path }
    }

    /// The isolated plugins' host binary (docs/isolation.md), or nil if there is none.
    public static var pluginHost: String? {
        pluginHostDirs.map { $0 + "/adorch-plugin-host" }.first { access($0, X_OK) == 0 }
    }

    /// The socket of the system service (the socket unit's ListenStream=).
    public static let systemSocket = "/run/adorch/adorchd.sock"

    /// The client side: `--socket`, then `ADORCH_SOCKET`, then this user's daemon if one is
    /// running, then the system service's socket (an app user calling the systemd service).
    public static func clientSocket(_ explicit: String?) -> String {
        if let explicit { return explicit }
        if let env = ProcessInfo.processInfo.environment["ADORCH_SOCKET"], !env.isEmpty { return env }
        let own = socket
        if own != systemSocket, !FileManager.default.fileExists(atPath: own), FileManager.default.fileExists(atPath: systemSocket) {
            return systemSocket
        }
        return own
    }
}
