import CSystemd
import Foundation

/// sd_notify(3): tells the service manager what the daemon is doing. Every call is a no-op
/// when NOTIFY_SOCKET is not set (not started by systemd).
///
/// Messages go out in order from a queue of their own, never from the caller's: sd_notify
/// blocks once ten are unread (net.unix.max_dgram_qlen), and a service manager slow to read
/// must not stall the engine (the soak's harness once did, by not reading).
public enum ServiceNotifier {
    private static let queue = DispatchQueue(label: "adorch.sd-notify")

    /// Sends one state string, e.g. "READY=1\nSTATUS=…".
    public static func send(_ state: String) { queue.async { _ = sd_notify(0, state) } }

    /// Waits up to `timeout` for what was sent so far to go out: before the process exits.
    @discardableResult
    public static func flush(timeout: Duration) -> Bool {
        let done = DispatchSemaphore(value: 0)
        queue.async { done.signal() }
        return done.wait(timeout: .now() + .milliseconds(Int(timeout.components.seconds * 1000))) == .success
    }

    /// The socket and plugins are up: the service is started.
    public static func ready(status: String) { send("READY=1\nSTATUS=\(status)") }

    public static func status(_ text: String) { send("STATUS=\(text)") }

    /// A reload begins; systemd 252 wants MONOTONIC_USEC beside RELOADING=1.
    public static func reloading() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        send("RELOADING=1\nMONOTONIC_USEC=\(UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000)")
    }

    public static func stopping() { send("STOPPING=1") }

    public static func watchdog() { send("WATCHDOG=1") }

    /// The watchdog interval systemd expects pings within (WatchdogSec=), if it set one.
    public static var watchdogInterval: Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec))
    }
}

/// Socket activation, sd_listen_fds(3).
public enum SocketActivation {
    /// The listening sockets systemd passed (LISTEN_FDS), checked to be for this process.
    /// The variables are unset so that children don't inherit them.
    public static func listeningSockets() -> [Int32] {
        let count = sd_listen_fds(1)
        guard count > 0 else { return [] }
        return (0..<count).map { SD_LISTEN_FDS_START + $0 }
    }
}
