import Foundation

/// Where the daemon listens and where its clients look, when nobody said: the one rule. The
/// daemon and adorchctl take it from here, and so does the Swift client library; the C
/// (clients/c/src/client.c) and Python (clients/python/adorch/_api.py) libraries, which cannot
/// link Swift, follow it line for line, and SocketPathRuleTests runs all four in each case.
public enum SocketPath {
    /// The system service's socket: systemd/adorchd.socket's ListenStream= (a test holds them equal).
    public static let system = "/run/adorch/adorchd.sock"

    /// A daemon's own socket: the system service's for root, else the user's, in
    /// `$XDG_RUNTIME_DIR` or, without one, in /tmp.
    public static func daemon(environment: [String: String], euid: UInt32, uid: UInt32) -> String {
        if euid == 0 { return system }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/adorch/adorchd.sock" }
        return "/tmp/adorch-\(uid)/adorchd.sock"
    }

    /// A client's socket: `explicit` (a `--socket` option, an argument), then `$ADORCH_SOCKET`,
    /// then this user's daemon's if it exists, then the system service's if that exists (an
    /// app calling the systemd service), else this user's (the error then names where its
    /// own daemon would be).
    public static func client(_ explicit: String? = nil, environment: [String: String], euid: UInt32, uid: UInt32,
                              exists: (String) -> Bool) -> String {
        if let explicit { return explicit }
        if let socket = environment["ADORCH_SOCKET"], !socket.isEmpty { return socket }
        let own = daemon(environment: environment, euid: euid, uid: uid)
        return own != system && !exists(own) && exists(system) ? system : own
    }

    /// The rule for this process: its environment, its uids, the files as they are now.
    public static func client(_ explicit: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        client(explicit, environment: environment, euid: geteuid(), uid: getuid()) { access($0, F_OK) == 0 }
    }

    /// This process's daemon socket.
    public static var daemon: String { daemon(environment: ProcessInfo.processInfo.environment, euid: geteuid(), uid: getuid()) }
}
