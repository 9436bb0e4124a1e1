import Foundation

/// The watchdog's count of a host's CPU time: a plugin that spins in threads of its own
/// answers the heartbeat (its plugin queue is free) and, without this, took every core the
/// daemon and the other hosts had for as long as it liked (an outside attack: 251 threads for
/// 4 min 43 s). A host whose CPU time over the last `window` passes `cores` cores' worth is
/// killed, and counts as its plugin's crash. Fed the host's CPU time at each heartbeat; pure:
/// the caller reads the clock and /proc.
struct HostCPUWatch: Sendable {
    /// Long enough that a load's burst of parsing (a few hundred ms at most) never counts.
    static let window = Duration.seconds(10)
    /// One core's worth: a host never needs more than a core of its own for 10 s together.
    static let cores = 1.0

    private var samples: [(at: ContinuousClock.Instant, cpu: Duration)] = []

    /// Takes the host's CPU time so far, read at `now`; returns the CPU time it used over the
    /// last window when that passes the bound, else nil.
    mutating func record(cpu: Duration, at now: ContinuousClock.Instant) -> Duration? {
        samples.append((now, cpu))
        // Kept: the newest sample at least a window old, as the start of the span measured.
        while samples.count > 1, now - samples[1].at >= Self.window { samples.removeFirst() }
        guard let first = samples.first, now - first.at >= Self.window else { return nil }
        let used = cpu - first.cpu
        return used > (now - first.at) * Self.cores ? used : nil
    }

    /// A process's CPU time so far, user and system, all its threads (/proc/PID/stat); nil
    /// once it is gone.
    static func cpuTime(of pid: pid_t) -> Duration? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return nil }
        // After "pid (comm)": state is field 3, utime 14 and stime 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return nil }
        return .seconds(Double(user + system) / Double(ticksPerSecond))
    }

    private static let ticksPerSecond = max(1, sysconf(Int32(_SC_CLK_TCK)))
}
