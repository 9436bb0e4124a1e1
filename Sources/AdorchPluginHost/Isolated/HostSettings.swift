import Foundation

/// How an isolated plugin's host is run (docs/isolation.md): where its binary is, what it
/// may touch, and how long it may leave a heartbeat unanswered.
public struct HostSettings: Sendable, Equatable {
    /// The adorch-plugin-host binary.
    public var executable: String
    public var confinement: Confinement
    /// A heartbeat goes through the plugin's queue this often.
    public var heartbeatInterval: Duration
    /// A host whose plugin queue has not answered for this long is killed: a call into the
    /// plugin that never returns (a spin, a deadlock, a blocking SDK call).
    public var hangTimeout: Duration
    public var insecurePlugins: Bool

    public init(executable: String, confinement: Confinement, heartbeatInterval: Duration = HostSettings.defaultHeartbeat,
                hangTimeout: Duration = HostSettings.defaultHangTimeout, insecurePlugins: Bool = false) {
        self.executable = executable
        self.confinement = confinement
        self.heartbeatInterval = heartbeatInterval
        self.hangTimeout = hangTimeout
        self.insecurePlugins = insecurePlugins
    }

    public static let defaultHeartbeat = Duration.milliseconds(250)
    /// Longer than any call plugin.h allows (well under 50 ms) by far, and than sim's
    /// block_ms=3000 stuck-SDK case, which the deadlines handle without a kill.
    public static let defaultHangTimeout = Duration.seconds(5)
    /// How long a host may take from exec to its plugin's init returning.
    public static let startTimeout = Duration.seconds(10)

    /// Whether a variable of the daemon's environment goes to its hosts: what a network SDK
    /// needs (paths, locale, time zone, proxies, CA certificates) and a sanitizer build's
    /// options, nothing else; secrets an
    /// operator gave the daemon, systemd's sockets and credentials stay the daemon's.
    public static func inheritedEnvironment(_ name: String) -> Bool {
        ["PATH", "HOME", "TMPDIR", "TZ", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE",
         "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
         "ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"].contains(name)
            || name.hasPrefix("LC_")
    }
}

/// Why a host process ended, as operators read it.
public struct PluginExit: Sendable, Equatable, CustomStringConvertible {
    /// The signal that killed it (its own, or the watchdog's SIGKILL), if one did.
    public var signal: Int32?
    /// In words: "killed by SIGSEGV", "exited with status 3", "stopped answering for 5 s …".
    public var reason: String

    public var description: String { reason }

    public init(signal: Int32?, reason: String) {
        self.signal = signal
        self.reason = reason
    }
}

extension Duration {
    /// Whole milliseconds, for log lines.
    public var roundedMilliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
