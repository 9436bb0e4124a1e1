import AdorchVarlink
import Foundation

/// Load → show → destroy, a million times, through sim at zero latency: every mobile SDK's
/// users have reported single-use ad objects that pile up. This checks that none do here:
/// after the run, sim's live objects are exactly the slots' buffers, and RSS is where it was
/// after warm-up.
public struct Cycles {
    public var adorchd: String
    public var pluginDir: String
    public var cycles: Int
    public var connections: Int
    /// The slots' buffers: their sum is the live count sim must come back to.
    public var buffers = [10, 5, 3, 2]

    public init(adorchd: String, pluginDir: String, cycles: Int, connections: Int) {
        (self.adorchd, self.pluginDir, self.cycles, self.connections) = (adorchd, pluginDir, cycles, connections)
    }

    public struct Result: Sendable {
        public var report: String
        public var passed: Bool
    }

    public func run(progress: (String) -> Void) throws -> Result {
        var toml = """
            [scheduler]
            # A shown ad is destroyed this long after its show (reports may still come for it).
            shown_lifetime_s = 1

            [plugins.sim]
            path = "\(pluginDir)/libadorch-plugin-sim.so"

            """
        for (i, buffer) in buffers.enumerated() {
            toml += """

                [[slots]]
                id = "c\(i)"
                format = "interstitial"
                buffer = \(buffer)
                  [[slots.waterfall]]
                  plugin = "sim"
                  server_parameter = "latency_ms=0 seed=\(i + 1)"

                """
        }
        let daemon = try BenchDaemon(adorchd: adorchd, config: toml)
        try daemon.waitUntilFull()
        daemon.discardNotifications()
        let expectedLive = buffers.reduce(0, +)
        let warmup = max(cycles / 10, 1)
        let chunk = max(min(cycles / 20, 50_000), 1)
        progress("  cycles    RSS MB   sim live   shows/s")
        var shows = 0, warmRSS = 0, chunkIndex = 0
        let started = ContinuousClock.now
        while shows < cycles {
            let slot = "c\(chunkIndex % buffers.count)"
            chunkIndex += 1
            let figures = try LoadGenerator.run(socket: daemon.socket, connections: connections, requests: min(chunk, cycles - shows),
                                                call: .showReport(slot: slot))
            shows = try simStats(daemon.socket)["shows"]?.intValue.map(Int.init) ?? shows
            let rss = daemon.memory.resident
            if warmRSS == 0, shows >= warmup { warmRSS = rss }
            progress(String(format: "%8d %9.1f %10d %9.0f", shows, Double(rss) / 1e6, try simStats(daemon.socket)["live"]?.intValue ?? -1,
                            figures.requestsPerSecond))
        }
        let elapsed = ContinuousClock.now - started
        // Shown ads are destroyed a second after their show; the buffers stay full. Poll:
        // a benchmark, not a test, and the moment has no event of its own.
        var stats = try simStats(daemon.socket)
        let deadline = ContinuousClock.now + .seconds(30)
        while stats["live"]?.intValue != Int64(expectedLive), ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.1)
            stats = try simStats(daemon.socket)
        }
        let endRSS = daemon.memory.resident
        let live = stats["live"]?.intValue.map(Int.init) ?? -1
        let growth = Double(endRSS - warmRSS) / Double(warmRSS) * 100
        let exit = daemon.stopReportingExit()
        var failures: [String] = []
        if live != expectedLive { failures.append("sim has \(live) live objects, the buffers hold \(expectedLive)") }
        // Under 100,000 cycles the remembered ended ads (10,000 at most) are still filling up.
        let judgesRSS = cycles >= 100_000
        if judgesRSS, abs(growth) >= 5 { failures.append(String(format: "RSS moved %+.1f %% after warm-up", growth)) }
        if exit != "exit 0" { failures.append("adorchd: \(exit)") }
        let field = { (key: String) in stats[key]?.intValue ?? -1 }
        let report = """
            cycles: \(shows) load → show → destroy through sim at zero latency, \(connections) connections, in \(elapsed.components.seconds) s
            sim: \(field("creates")) created, \(field("shows")) shown, \(field("destroys")) destroyed, \(live) live; the buffers hold \(expectedLive)
            contract violations seen by sim: \(field("contract_violations")), stale objects: \(field("stale_objects"))
            RSS: \(String(format: "%.1f", Double(warmRSS) / 1e6)) MB after warm-up (\(warmup) cycles), \
            \(String(format: "%.1f", Double(endRSS) / 1e6)) MB at the end: \(String(format: "%+.1f", growth)) % \(judgesRSS ? "(limit ±5 %)" : "(not judged under 100,000 cycles)")
            adorchd: \(exit)
            verdict: \(failures.isEmpty ? "PASS" : "FAIL: " + failures.joined(separator: "; "))
            """
        return Result(report: report, passed: failures.isEmpty)
    }

    private func simStats(_ socket: String) throws -> JSONValue {
        let status = try VarlinkClient(path: socket, timeout: .seconds(10)).call("io.adorch.Manager.GetStatus")
        guard let stats = status.parameters["plugins"]?.arrayValue?.first(where: { $0["name"]?.stringValue == "sim" })?["stats"] else {
            throw BenchError("no sim stats in GetStatus: \(status.parameters)")
        }
        return stats
    }
}
