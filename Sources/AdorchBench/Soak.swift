import AdorchEngine
import AdorchLocking
import AdorchVarlink
import Foundation
import Synchronization

/// The soak: many clients mixing Show, Report, Subscribe and reconnects for a long time, while
/// plugins misbehave in every way sim can, one plugin blocks in its calls, an isolated one
/// crashes over and over (`crashingPlugin`), the hostile clients
/// of docs/rules.md, "Fair serving", attack as other uids (`SoakAttackers`), and the daemon is reloaded on a timer. It watches what a slow leak or a lost reply would show: requests
/// answered, errors by kind, RSS and open fds over time, and the daemon's exit.
public struct Soak {
    public var adorchd: String
    public var pluginDir: String
    public var duration: Duration
    public var clients: Int
    public var reloadEvery: Duration
    public var sampleEvery: Duration
    /// Each client's pause between two calls, on average: apps are not a loop.
    public var thinkTime: Duration
    /// The crashing plugin faults at this call of each of its slots' kind (at=load:N, at=show:N)
    /// in each host: fewer calls, more frequent crashes.
    public var crashAt: Int

    public init(adorchd: String, pluginDir: String, duration: Duration, clients: Int, reloadEvery: Duration,
                sampleEvery: Duration, thinkTime: Duration, crashAt: Int) {
        (self.adorchd, self.pluginDir, self.duration, self.clients) = (adorchd, pluginDir, duration, clients)
        (self.reloadEvery, self.sampleEvery, self.thinkTime, self.crashAt) = (reloadEvery, sampleEvery, thinkTime, crashAt)
    }

    /// What the clients saw, merged.
    struct Tally {
        var calls = 0
        /// Replies by outcome: "ok" or the error's name.
        var replies: [String: Int] = [:]
        /// Calls that got no reply: the connection closed or the read timed out.
        var lost = 0
        var firstLost: [String] = []
        var reconnects = 0
        var subscriptions = 0
        var events = 0
        var reloads = 0
        var failedReloads: [String] = []

        var errors: Int { replies.filter { $0.key != "ok" }.values.reduce(0, +) }
    }

    public struct Sample: Sendable {
        public var at: Duration
        public var calls: Int
        public var rss: Int
        public var fds: Int
        public var threads: Int
        /// The daemon's live child processes: its isolated plugins' hosts.
        public var hosts: Int
        /// The crashing plugin's crashes so far.
        public var crashes: Int
    }

    public struct Result: Sendable {
        public var report: String
        public var passed: Bool
        public var samples: [Sample]
    }

    /// Runs the soak, printing a line per sample as it goes; the result's report is the summary.
    public func run(progress: (String) -> Void) throws -> Result {
        let copies = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-soak-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: copies, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: copies) }
        // Copies of sim are other plugins (each its own file, globals, queue and host): the one that blocks, the one that crashes.
        for copy in [Self.blockingPlugin, Self.crashingPlugin] {
            try FileManager.default.copyItem(atPath: "\(pluginDir)/libadorch-plugin-sim.so", toPath: copies.appendingPathComponent("libadorch-plugin-\(copy).so").path)
        }

        let daemon = try BenchDaemon(adorchd: adorchd, config: config(copies: copies.path, variant: 0))
        daemon.discardNotifications()
        // The baseline once the daemon has settled: it still holds the readiness check's
        // connection for a moment after start, and counting that once failed a short soak.
        var baselineFiles = daemon.openFiles
        let settleDeadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < settleDeadline {
            Thread.sleep(forTimeInterval: 0.2)
            let now = daemon.openFiles
            if now.sorted() == baselineFiles.sorted() { break }
            baselineFiles = now
        }
        let baselineFDs = baselineFiles.count
        let attackers = SoakAttackers.make(socket: daemon.socket)
        if case .success(let attackers) = attackers { attackers.start() }
        let state = SoakState()
        let group = DispatchGroup()
        for index in 0..<clients {
            group.enter()
            let client = SoakClient(socket: daemon.socket, index: index, thinkTime: thinkTime, state: state)
            Thread.detachNewThread {
                client.run()
                group.leave()
            }
        }

        progress("    time      calls  calls/s   errors   lost    RSS MB    fds  threads  hosts  crashes")
        let started = ContinuousClock.now
        var samples: [Sample] = []
        var nextReload = started + reloadEvery, variant = 0, previousCalls = 0
        var crashed: String?
        var crashes: [String: CrashTally] = [:]
        func countCrashes() {
            for (name, plugin) in (try? daemon.pluginStatus()) ?? [:] { crashes[name, default: CrashTally()].observe(Int(plugin["crashes"]?.intValue ?? 0)) }
        }
        while ContinuousClock.now - started < duration {
            // Wake every second at least: a crash is seen at once.
            let wake = min(nextReload, (samples.last.map { started + $0.at } ?? started) + sampleEvery, started + duration,
                           ContinuousClock.now + .seconds(1))
            let nap = wake - ContinuousClock.now
            Thread.sleep(forTimeInterval: max(0, Double(nap.components.seconds) + Double(nap.components.attoseconds) / 1e18))
            guard daemon.process.isRunning else {
                crashed = "adorchd died during the soak (\(daemon.process.terminationReason == .uncaughtSignal ? "signal" : "exit") \(daemon.process.terminationStatus))"
                break
            }
            countCrashes()
            if ContinuousClock.now >= nextReload {
                variant += 1
                try config(copies: copies.path, variant: variant).write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
                let outcome: String?
                do {
                    let reply = try VarlinkClient(path: daemon.socket, timeout: .seconds(30)).call("io.adorch.Manager.Reload")
                    outcome = reply.error.map { "\($0): \(reply.parameters)" }
                } catch {
                    outcome = "no reply: \(error)"
                }
                state.tally.withLock { t in
                    t.reloads += 1
                    if let outcome { t.failedReloads.append(outcome) }
                }
                nextReload += reloadEvery
            }
            let at = ContinuousClock.now - started
            if samples.isEmpty || at - samples.last!.at >= sampleEvery || at >= duration {
                let calls = state.tally.withLock { $0.calls }
                let (errors, lost) = state.tally.withLock { ($0.errors, $0.lost) }
                let sample = Sample(at: at, calls: calls, rss: daemon.memory.resident, fds: daemon.openFileDescriptors, threads: daemon.threads,
                                    hosts: daemon.children.filter(BenchDaemon.isRunning).count, crashes: crashes[Self.crashingPlugin]?.total ?? 0)
                let seconds = Double((at - (samples.last?.at ?? .zero)).components.seconds) + 1e-9
                progress(String(format: "%7.0fs %10d %8.0f %8d %6d %9.1f %6d %8d %6d %8d", Double(at.components.seconds), calls,
                                Double(calls - previousCalls) / seconds, errors, lost, Double(sample.rss) / 1e6, sample.fds, sample.threads,
                                sample.hosts, sample.crashes))
                previousCalls = calls
                samples.append(sample)
            }
        }
        state.stop.store(true, ordering: .relaxed)
        group.wait()
        let attackerReport: String
        switch attackers {
        case .success(let attackers):
            attackers.stop()
            attackerReport = "attackers, each its own uid, throughout (what the daemon answered them):\n\(attackers.report)"
        case .failure(let unavailable):
            attackerReport = "attackers: none (\(unavailable.reason))"
        }

        // Every client has closed its connections: the daemon's fds go back to what it had
        // before any client came, as soon as it has seen each close; its hosts settle to one
        // per isolated plugin that is up, each named in its status.
        var endFDs = daemon.openFileDescriptors
        var hosts = crashed == nil ? HostCensus(daemon) : nil
        let closeDeadline = ContinuousClock.now + .seconds(10)
        while crashed == nil, endFDs > baselineFDs || hosts?.unaccounted.isEmpty == false, ContinuousClock.now < closeDeadline {
            Thread.sleep(forTimeInterval: 0.05)
            endFDs = daemon.openFileDescriptors
            hosts = HostCensus(daemon)
        }
        var extraFiles = daemon.openFiles
        for file in baselineFiles { extraFiles.firstIndex(of: file).map { _ = extraFiles.remove(at: $0) } }
        // Fewer than the baseline is no leak; more is, and extraFiles names them.
        let simStats = crashed == nil ? (try? pluginStats(daemon)) ?? "(no status)" : "(daemon gone)"
        countCrashes()
        let exit = crashed ?? daemon.stopReportingExit()
        let leftOver = hosts?.leftOver(after: daemon) ?? []
        let final = state.tally.withLock { $0 }
        return summarize(final, samples: samples, baselineFDs: baselineFDs, endFDs: endFDs, extraFiles: extraFiles, exit: exit,
                         crashed: crashed != nil, pluginStats: simStats, attackers: attackerReport,
                         hosts: HostReport(census: hosts, leftOver: leftOver, crashes: crashes.mapValues(\.total)))
    }

    private func summarize(_ t: Tally, samples: [Sample], baselineFDs: Int, endFDs: Int, extraFiles: [String], exit: String, crashed: Bool,
                           pluginStats: String, attackers: String, hosts: HostReport) -> Result {
        // RSS after warm-up: the first sample past a quarter of the run (at most two minutes in).
        let warmupEnd = min(duration / 4, .seconds(120))
        let warm = samples.first { $0.at >= warmupEnd } ?? samples.first
        let last = samples.last
        let growth = warm.flatMap { w in last.map { Double($0.rss - w.rss) / Double(w.rss) * 100 } } ?? 0
        let judgesRSS = duration >= .seconds(600)
        let kinds = t.replies.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let seconds = Double(duration.components.seconds)
        var failures: [String] = []
        if crashed || !exit.hasPrefix("exit 0") { failures.append("adorchd: \(exit)") }
        if t.lost > 0 { failures.append("\(t.lost) lost replies") }
        if !t.failedReloads.isEmpty { failures.append("\(t.failedReloads.count) reloads failed") }
        if endFDs > baselineFDs { failures.append("fds \(endFDs) at the end, \(baselineFDs) before (new: \(extraFiles.joined(separator: ", ")))") }
        if judgesRSS, growth >= 10 { failures.append(String(format: "RSS grew %.1f %% after warm-up", growth)) }
        failures += hosts.failures
        let report = """
            soak: \(Int(seconds)) s, \(clients) clients, a reload every \(reloadEvery.components.seconds) s
            calls: \(t.calls) (\(Int(Double(t.calls) / seconds))/s); replies: \(kinds)
            lost replies: \(t.lost)\(t.firstLost.isEmpty ? "" : " (first: \(t.firstLost.joined(separator: "; ")))")
            reconnects: \(t.reconnects), subscriptions: \(t.subscriptions) (\(t.events) events read)
            reloads: \(t.reloads - t.failedReloads.count) of \(t.reloads) applied\(t.failedReloads.isEmpty ? "" : " (\(t.failedReloads.joined(separator: "; ")))")
            RSS: \(String(format: "%.1f", Double(warm?.rss ?? 0) / 1e6)) MB after warm-up (\(warm?.at.components.seconds ?? 0) s), \
            \(String(format: "%.1f", Double(last?.rss ?? 0) / 1e6)) MB at the end: \(String(format: "%+.1f", growth)) % \
            \(judgesRSS ? "(limit +10 %)" : "(not judged: a run under 10 minutes is all warm-up)")
            fds: \(baselineFDs) before the clients, peak \(samples.map(\.fds).max() ?? 0), \(endFDs) after they left
            hosts: peak \(samples.map(\.hosts).max() ?? 0) live; \(hosts.summary)
            plugins: \(pluginStats)
            \(attackers)
            adorchd: \(exit)
            verdict: \(failures.isEmpty ? "PASS" : "FAIL: " + failures.joined(separator: "; "))
            """
        return Result(report: report, passed: failures.isEmpty, samples: samples)
    }

    /// Each plugin's state and crashes, and sim's own counters: its live objects and the
    /// contract violations it saw.
    private func pluginStats(_ daemon: BenchDaemon) throws -> String {
        try daemon.pluginStatus().sorted { $0.key < $1.key }.map { name, plugin in
            let stats = ["creates", "destroys", "live", "violations", "misbehaviours"].compactMap { key in plugin["stats"]?[key]?.intValue.map { "\(key) \($0)" } }
            let crashes = plugin["crashes"]?.intValue.map { ["crashes \($0)"] + (plugin["last_crash"]?.stringValue.map { ["last: \($0)"] } ?? []) } ?? []
            return "\(name) (\(plugin["state"]?.stringValue ?? "?")): \((stats + crashes).joined(separator: ", "))"
        }.joined(separator: "; ")
    }

    /// Slots for every misbehaviour of sim, one fed by the blocking plugin, and a rewarded one.
    /// `variant` changes with each reload: a buffer changes, a slot comes and goes, and the
    /// crashing plugin's section changes (so the reload replaces its host). `copies` holds
    /// the copies of sim: stuck's and the crashing plugin's.
    func config(copies: String, variant: Int) -> String {
        func slot(_ id: String, format: String = "interstitial", buffer: Int = 3, _ entries: [(plugin: String, parameter: String, timeoutMS: Int)],
                  extra: String = "") -> String {
            var text = "[[slots]]\nid = \"\(id)\"\nformat = \"\(format)\"\nbuffer = \(buffer)\n\(extra)"
            for e in entries {
                text += "  [[slots.waterfall]]\n  plugin = \"\(e.plugin)\"\n  server_parameter = \"\(e.parameter)\"\n  timeout_ms = \(e.timeoutMS)\n"
            }
            return text + "\n"
        }
        let fast = "latency_ms=0..5"
        var toml = """
            [scheduler]
            shown_lifetime_s = 5
            # patchy's 40020 (rate limited) pauses all of sim: briefly, or the soak starves.
            rate_limit_pause_s = 2

            [plugins.sim]
            path = "\(pluginDir)/libadorch-plugin-sim.so"
            [plugins.\(Self.blockingPlugin)]
            path = "\(copies)/libadorch-plugin-\(Self.blockingPlugin).so"
            \(crashingPluginSection(path: "\(copies)/libadorch-plugin-\(Self.crashingPlugin).so", variant: variant))


            """
        toml += slot("plain", buffer: variant % 2 == 0 ? 8 : 6, [("sim", "\(fast) seed=1", 1000)])
        toml += slot("patchy", [("sim", "\(fast) fill=0.5 errors=-2:0.05,40020:0.01,20001:0.05 seed=2", 1000)])
        toml += slot("expiring", [("sim", "\(fast) ttl_s=1 cached_ms=20 seed=3", 1000)])
        toml += slot("never", [("sim", "\(fast) misbehave=never", 200), ("sim", "\(fast) seed=4", 1000)])
        toml += slot("twice", [("sim", "\(fast) misbehave=twice seed=5", 1000)])
        toml += slot("after_destroy", [("sim", "\(fast) misbehave=after_destroy seed=6", 1000)])
        toml += slot("empty_payload", [("sim", "\(fast) misbehave=empty_payload", 1000), ("sim", "\(fast) seed=7", 1000)])
        toml += slot("show_fail", [("sim", "\(fast) show_fail=1 seed=8", 1000)])
        toml += slot("self_tracking", [("sim", "\(fast) tracks=1 dislike=1 seed=9", 1000)])
        toml += slot("stuck_first", [(Self.blockingPlugin, "block_ms=2000 latency_ms=1", 300), ("sim", "\(fast) seed=10", 1000)])
        toml += slot("rewarded", format: "rewarded", [("sim", "\(fast) seed=11", 1000)],
                     extra: "reward_name = \"coins\"\nreward_amount = 5\n")
        if variant % 2 == 1 { toml += slot("extra", [("sim", "\(fast) seed=12", 1000)]) }
        for (index, crash) in Self.crashSlots.enumerated() {
            toml += slot(crash.slot, [(Self.crashingPlugin, "\(fast) misbehave=\(crash.fault):\(crashAt) seed=\(14 + index)", 1000)])
        }
        toml += """
            [[slots]]
            id = "\(SoakAttackers.bannerSlot)"
            format = "banner"
            width = 320
            height = 50
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "\(fast) seed=13"

            [[slots]]
            id = "\(SoakAttackers.interactiveSlot)"
            format = "interactive"
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "script=opt_out latency_ms=5 step_ms=5"

            """
        return toml
    }

    /// The slots the clients pick from (the reloaded "extra" among them: it may be gone).
    static let slots = ["plain", "patchy", "expiring", "never", "twice", "after_destroy", "empty_payload", "show_fail",
                        "self_tracking", "stuck_first", "rewarded", "extra"] + crashSlots.map(\.slot)
}

/// What the clients and the soak's own thread share.
private final class SoakState: Sendable {
    let tally = LockedValue(Soak.Tally())
    let stop = Atomic(false)
}

/// One client of the soak, on its own thread with blocking calls, as an app's process would be.
private struct SoakClient {
    let socket: String
    let index: Int
    let thinkTime: Duration
    let state: SoakState

    func run() {
        var rng = SplitMix64(seed: UInt64(index + 1))
        var connection: VarlinkClient?
        while !state.stop.load(ordering: .relaxed) {
            let pause = Double(thinkTime.components.attoseconds) / 1e18 + Double(thinkTime.components.seconds)
            Thread.sleep(forTimeInterval: pause * Double(rng.next() % 2001) / 1000)
            if connection == nil {
                connection = try? VarlinkClient(path: socket, timeout: .seconds(15))
                guard connection != nil else { lost("connect"); continue }
            }
            let roll = rng.next() % 100
            let slot = Soak.slots[Int(rng.next() % UInt64(Soak.slots.count))]
            switch roll {
            case 0..<60:
                var parameters: [String: JSONValue] = ["slot": .string(slot)]
                if slot == "rewarded" { parameters["user_id"] = .string("soak-\(index)") }
                guard let show = call(connection!, "io.adorch.Ads.Show", parameters) else { connection = nil; continue }
                if let id = show.parameters["ad"]?["id"]?.stringValue {
                    let event = rng.next() % 4 == 0 ? "click" : "impression"
                    if call(connection!, "io.adorch.Ads.Report", ["ad_id": .string(id), "event": .string(event)]) == nil { connection = nil }
                }
            case 60..<70:
                if call(connection!, "io.adorch.Ads.ListSlots") == nil { connection = nil }
            case 70..<75:
                // Nonsense a buggy app sends: a named error, nothing else changes.
                if call(connection!, "io.adorch.Ads.Report", ["ad_id": "no-such-ad", "event": "impression"]) == nil { connection = nil }
            case 75..<85:
                connection = nil
                state.tally.withLock { $0.reconnects += 1 }
            default:
                subscribe(events: Int(rng.next() % 20))
            }
        }
    }

    /// One call; nil (and counted as lost) when no reply came.
    private func call(_ connection: VarlinkClient, _ method: String, _ parameters: [String: JSONValue] = [:]) -> VarlinkClient.Reply? {
        do {
            let reply = try connection.call(method, parameters)
            let outcome = reply.error.map { String($0.split(separator: ".").last ?? "") } ?? "ok"
            state.tally.withLock {
                $0.calls += 1
                $0.replies[outcome, default: 0] += 1
            }
            return reply
        } catch {
            lost("\(method): \(error)")
            return nil
        }
    }

    private func lost(_ what: String) {
        state.tally.withLock {
            $0.calls += 1
            $0.lost += 1
            if $0.firstLost.count < 3 { $0.firstLost.append(what) }
        }
    }

    /// A subscriber that reads a few events and leaves: its first reply must come; the events
    /// after it come when something happens, so waiting for them ends at a short timeout.
    private func subscribe(events wanted: Int) {
        guard let connection = try? VarlinkClient(path: socket, timeout: .seconds(15)) else { return lost("connect") }
        state.tally.withLock { $0.subscriptions += 1 }
        do {
            let first = try connection.call("io.adorch.Ads.Subscribe", [:], more: true)
            state.tally.withLock {
                $0.calls += 1
                $0.replies[first.error.map { String($0.split(separator: ".").last ?? "") } ?? "ok", default: 0] += 1
            }
        } catch {
            return lost("Subscribe: \(error)")
        }
        connection.setReadTimeout(.milliseconds(300))
        var read = 0
        while read < wanted, (try? connection.nextReply()) != nil { read += 1 }
        state.tally.withLock { $0.events += read }
    }
}
