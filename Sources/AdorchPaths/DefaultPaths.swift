import Foundation

/// Where things live when neither the command line nor the config says: system paths for
/// root (as under systemd), per-user paths otherwise, so `make run` works unprivileged too.
public enum DefaultPaths {
    public static var isRoot: Bool { geteuid() == 0 }

    /// The socket the daemon listens on (SocketPath's rule).
    public static var socket: String { SocketPath.daemon }

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

    /// The client side: `--socket`, then `ADORCH_SOCKET`, then this user's daemon if one is
    /// running, then the system service's socket (SocketPath's rule).
    public static func clientSocket(_ explicit: String?) -> String { SocketPath.client(explicit) }
}
