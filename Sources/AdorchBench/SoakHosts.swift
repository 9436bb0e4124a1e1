import AdorchEngine
import AdorchPluginHost
import Foundation

// The soak's isolated plugin that crashes, and the host processes the daemon keeps: hosts
// come and go with the crashes, they never pile up and none outlives the daemon.

extension Soak {
    /// A copy of sim in a host of its own that faults at a call count, over and over.
    static let crashingPlugin = "crashy"
    /// A copy of sim that blocks its queue 2 s in each load. Isolated (the default), its
    /// queue's backlog soon holds the heartbeat past hang_timeout_ms, and the watchdog kills
    /// the host as hung: its host may die too. Every other plugin's must never.
    static let blockingPlugin = "stuck"
    static let mayLoseHosts: Set = [crashingPlugin, blockingPlugin]
    /// Its slots, one per fault, each with the call it faults at (sim's misbehave=, at=).
    static let crashSlots: [(slot: String, fault: String)] = [
        ("crash_segv", "segv at=load"), ("crash_abort", "abort at=show"), ("crash_spin", "spin at=load"), ("crash_balloon", "balloon at=load"),
    ]
    /// Within a window this short, the restart backoff's doubling (0, 250 ms, 500 ms, … before
    /// the 2nd, 3rd, … restart) leaves room for 7 crashes at most, however fast the clients
    /// go: the budget is never reached, and the plugin is restarted for the soak's whole
    /// length rather than disabled until the next reload.
    static let crashWindowSeconds = 10
    static let crashBudget = 40

    /// Its [plugins] section. A spin or a balloon blocks its plugin queue: the heartbeat
    /// watchdog kills it after hang_timeout_ms, which alternates with each reload so that a
    /// reload replaces the host too (a changed section restarts the plugin), under load.
    func crashingPluginSection(path: String, variant: Int) -> String {
        """
        [plugins.\(Self.crashingPlugin)]
        path = "\(path)"
        isolation = "\(PluginIsolation.process.rawValue)"
        crash_budget = \(Self.crashBudget)
        crash_window_s = \(Self.crashWindowSeconds)
        hang_timeout_ms = \(variant % 2 == 0 ? 1000 : 1100)
        # balloon's allocations end here
        memory_limit_mb = 256
        """
    }
}

/// The daemon's host processes against the hosts its status names.
struct HostCensus {
    /// The live ones (a zombie, dead but not reaped by the daemon or its box, is a leak too).
    var children: [Int32]
    var zombies: [Int32]
    /// The pids GetStatus gives its isolated plugins.
    var named: [Int32]

    init(_ daemon: BenchDaemon) {
        // A host in a box is the child of the box's pid 1, the daemon's child (docs/confinement.md);
        // a box with no host left in it counts as a host no plugin accounts for.
        let all = daemon.children.flatMap { child in
            let inside = BenchDaemon.children(of: child)
            return inside.isEmpty ? [child] : inside
        }
        children = all.filter(BenchDaemon.isRunning)
        zombies = all.filter { !BenchDaemon.isRunning($0) }
        named = ((try? daemon.pluginStatus()) ?? [:]).values.compactMap { $0["pid"]?.intValue.map { Int32($0) } }.sorted()
    }

    /// Children no status names, and zombies.
    var unaccounted: [Int32] { children.filter { !named.contains($0) } + zombies }

    /// The hosts that were still running once the daemon was stopped, given a moment to go.
    func leftOver(after daemon: BenchDaemon, within wait: Duration = .seconds(5)) -> [Int32] {
        let deadline = ContinuousClock.now + wait
        var running = children.filter(BenchDaemon.isRunning)
        while !running.isEmpty, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            running = running.filter(BenchDaemon.isRunning)
        }
        return running
    }
}

/// What the soak says and judges of the hosts.
struct HostReport {
    /// nil: the daemon died, there was nothing to count.
    var census: HostCensus?
    var leftOver: [Int32]
    /// Each plugin's crashes over the soak (CrashTally).
    var crashes: [String: Int]

    var failures: [String] {
        guard let census else { return [] }
        var failures: [String] = []
        if crashes[Soak.crashingPlugin, default: 0] == 0 { failures.append("\(Soak.crashingPlugin) never crashed: the soak did not test a crashing isolated plugin (lower --crash-at)") }
        for (plugin, count) in crashes.sorted(by: { $0.key < $1.key }) where count > 0 && !Soak.mayLoseHosts.contains(plugin) {
            failures.append("\(plugin)'s host died \(count) times; only \(Soak.mayLoseHosts.sorted().joined(separator: " and ")) may lose theirs")
        }
        if !census.unaccounted.isEmpty {
            failures.append("host processes no plugin accounts for after the clients left: \(census.unaccounted) (status names \(census.named))")
        }
        if !leftOver.isEmpty { failures.append("host processes left running after adorchd stopped: \(leftOver)") }
        return failures
    }

    var summary: String {
        guard let census else { return "not counted (the daemon died)" }
        return "\(census.children.count) after the clients left (status names \(census.named.count)), \(census.zombies.count) zombies, " +
            "\(leftOver.count) left running after adorchd stopped; crashes: " +
            crashes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}

/// A plugin's crashes over the whole soak. Its status count starts again at 0 when a reload
/// replaces it (a changed section), so the soak adds up what each read shows: a lower bound,
/// a crash just before a reload may go unseen.
struct CrashTally {
    private(set) var total = 0
    private var last = 0

    mutating func observe(_ count: Int) {
        total += count >= last ? count - last : count
        last = count
    }
}
