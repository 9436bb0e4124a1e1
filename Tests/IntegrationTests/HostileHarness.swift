import AdorchLocking
import AdorchPluginHost
import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// The uids the hostile tests run their clients as: the tests run as root, and budgets are
/// per uid, so the polite client, the attacker and a bystander app must each be their own user.
enum HostileUID {
    static let polite = 4400
    static let attacker = 4401
    static let other = 4402
    static let all = [polite, attacker, other]
}

/// The bounds a hostile test holds the daemon to (docs/rules.md, "Fair serving"): the polite client's p99 during an attack, and how far
/// the daemon's RSS and open descriptors may stay above what they were before it.
enum HostileBounds {
    static let politeP99Ms = 100.0 * latencyScale
    static let usageGrowth = 0.10
}

/// A script of Tests/hostile run as another uid with setpriv: its JSON lines as they come,
/// stdin to tell it to stop, and a SIGKILL by PID if it outlives the test.
final class HostileScript {
    let name: String
    private let process = Process()
    private let input = Pipe()
    private let lines = LockedValue<[JSONValue]>([])
    private let stderr = LockedValue(Data())
    private let arrived = DispatchSemaphore(value: 0)
    private let outputDone = DispatchSemaphore(value: 0)
    private var consumed = 0
    private var stopped = false

    static let directory = packageRoot.appendingPathComponent("Tests/hostile")

    init(_ script: String, _ arguments: [String], as uid: Int) throws {
        name = "\(script) \(arguments.first ?? "")"
        let argv = try asUser(uid, ["/usr/bin/python3", "-u", try RunFolder.copy(of: Self.directory).appendingPathComponent(script).path] + arguments)
        process.executableURL = URL(fileURLWithPath: argv[0])
        process.arguments = Array(argv.dropFirst())
        // Root running a script must not leave __pycache__ in the tree.
        process.environment = ProcessInfo.processInfo.environment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 }
        let output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let (lines, stderr, arrived, outputDone) = (lines, stderr, arrived, outputDone)
        Thread.detachNewThread {
            var pending = Data()
            while case let chunk = output.fileHandleForReading.availableData, !chunk.isEmpty {
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = pending[pending.startIndex..<newline]
                    pending.removeSubrange(pending.startIndex...newline)
                    lines.withLock { $0.append(JSONValue.parse(Data(line)) ?? .string(String(decoding: line, as: UTF8.self))) }
                    arrived.signal()
                }
            }
            outputDone.signal()
        }
        Thread.detachNewThread {
            let all = errors.fileHandleForReading.readDataToEndOfFile()
            stderr.withLock { $0 = all }
        }
    }

    deinit {
        guard process.processIdentifier != 0 else { return }  // never launched
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    var pid: pid_t { process.processIdentifier }

    /// What it wrote to stderr (a traceback, say), once it has exited.
    var errorOutput: String { String(decoding: stderr.withLock { $0 }, as: UTF8.self) }

    /// The next line it prints that `matches`, skipping the others; fails after `timeout`.
    func line(_ what: String, timeout: Duration, where matches: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = ContinuousClock.now + timeout.scaled
        while true {
            while let next = lines.withLock({ consumed < $0.count ? $0[consumed] : nil }) {
                consumed += 1
                if matches(next) { return next }
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero, arrived.wait(timeout: .now() + left.dispatchTimeout) == .success else {
                throw TestFailure("\(name): no \(what) within \(timeout.scaled); it printed \(lines.withLock { $0 }); stderr: \(errorOutput)")
            }
        }
    }

    /// The attack's verdict, its last line.
    func result(timeout: Duration) throws -> JSONValue {
        try line("result", timeout: timeout) { $0["result"] != nil }["result"]!
    }

    func send(_ text: String) { input.fileHandleForWriting.write(Data((text + "\n").utf8)) }

    /// Closes its stdin, the scripts' "stop", and waits for it to exit (killing it past `timeout`).
    func stop(timeout: Duration = .seconds(10)) {
        guard !stopped else { return }
        stopped = true
        try? input.fileHandleForWriting.close()
        if outputDone.wait(timeout: .now() + timeout.scaled.dispatchTimeout) == .timedOut { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }
}

/// The polite client (Tests/hostile/polite.py) as its own uid: calls every 20 ms and measures them.
final class PoliteProcess {
    private let script: HostileScript

    init(socket: String, slot: String, subscribe: Bool = false) throws {
        script = try HostileScript("polite.py", ["--socket", socket, "--slot", slot] + (subscribe ? ["--subscribe"] : []), as: HostileUID.polite)
        _ = try script.line("first answer", timeout: .seconds(10)) { $0["ready"] == true }
    }

    /// Stops it and checks what it measured: every call answered, none with an error, p99 in bound.
    @discardableResult
    func stopAndCheck(during attack: String, file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        script.stop()
        let summary = try script.line("summary", timeout: .seconds(1)) { $0["count"] != nil }
        // The numbers in the log even when they pass: how close to the bound each attack came.
        print("polite client during \(attack): \(summary)")
        XCTAssertGreaterThan(summary["count"]?.intValue ?? 0, 0, "the polite client made calls during \(attack): \(summary)", file: file, line: line)
        XCTAssertEqual(summary["lost"]?.intValue, 0, "the polite client's lost replies during \(attack): \(summary)", file: file, line: line)
        XCTAssertEqual(summary["errors"], [:], "the polite client's errors during \(attack): \(summary)", file: file, line: line)
        XCTAssertLessThan(summary["p99_ms"]?.doubleValue ?? .infinity, HostileBounds.politeP99Ms,
                          "the polite client's p99 during \(attack): \(summary)", file: file, line: line)
        return summary
    }
}

/// The daemon's memory and descriptors, as /proc shows them.
struct DaemonUsage: CustomStringConvertible {
    var rssKB: Int
    var fds: Int
}

extension DaemonUsage {
    init(pid: pid_t) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        rssKB = rss.flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? -1
        fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Back to within `HostileBounds.usageGrowth` of `before` (less is fine: nothing leaked).
    /// Under a sanitizer RSS is not the daemon's memory: the shadow of every page the heap ever
    /// touched stays, and the sanitizer's allocator keeps what was freed (make tsan: 124 MB
    /// before 300 subscribers that never read, 163 MB after); there only descriptors are bounded.
    func isWithinBound(of before: DaemonUsage) -> Bool {
        let bound = 1 + HostileBounds.usageGrowth
        return (Sanitizer.isActive || Double(rssKB) <= Double(before.rssKB) * bound) && Double(fds) <= Double(before.fds) * bound
    }

    var description: String { "RSS \(rssKB) kB, \(fds) fds" }
}

/// One hostile test's stage: a daemon on the hostile config with small [limits], the polite
/// client running, and the daemon's usage once it settled with the polite client on.
final class HostileRun {
    let daemon: DaemonProcess
    private(set) var polite: PoliteProcess!
    private(set) var before: DaemonUsage!
    private(set) var peak: DaemonUsage!

    /// `limits` override or add to `hostileLimits`; `subscribe`, the polite client also reads events.
    init(limits: [String: String] = [:], subscribe: Bool = false) throws {
        daemon = try DaemonProcess(config: hostileConfig(limits: limits))
        try daemon.waitFor("the preloaded slots full") { try daemon.allSlotsFull() }
        polite = try PoliteProcess(socket: daemon.socket, slot: HostileSlot.interstitial, subscribe: subscribe)
        try fillBoundedStores()
        before = settledUsage()
        peak = before
    }

    /// The daemon keeps bounded stores that fill with ordinary use (the ring of recent events
    /// ListEvents reads): filled before the baseline, what comes back after an attack is
    /// measured against a daemon in its steady state, and any growth left is the attack's.
    /// The ring is full when the most ListEvents gives stops growing. Root's Shows and closes
    /// are not rate limited.
    private func fillBoundedStores() throws {
        // An over-large limit is refused naming the largest, the ring's size.
        var most = 1
        do { _ = try daemon.call("io.adorch.Ads.ListEvents", ["limit": 1_000_000]) } catch {
            most = Int("\(error)".firstMatch(of: /expected 1 to (\d+)/)?.1 ?? "") ?? 1
        }
        var kept = -1
        while true {
            for _ in 0..<100 {
                let shown = try? daemon.call("io.adorch.Ads.Show", ["slot": .string(HostileSlot.interstitial)])
                if let id = shown?["ad"]?["id"]?.stringValue {
                    _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "close"])
                }
            }
            let now = (try daemon.call("io.adorch.Ads.ListEvents", ["limit": .int(Int64(most))]))["events"]?.arrayValue?.count ?? 0
            if now == kept { return }
            kept = now
        }
    }

    /// RSS and fds once two samples 200 ms apart agree: the polite client's connections are
    /// open and its warm-up allocations made.
    private func settledUsage() -> DaemonUsage {
        var last = DaemonUsage(pid: daemon.pid)
        let deadline = ContinuousClock.now + Duration.seconds(5).scaled
        while ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.2)
            let now = DaemonUsage(pid: daemon.pid)
            defer { last = now }
            if now.fds == last.fds, abs(now.rssKB - last.rssKB) * 100 <= last.rssKB { return now }
        }
        return last
    }

    /// Takes the baseline again: after a first round of an attack whose state the daemon keeps
    /// in bounded stores (SQLite's page cache, glibc's arenas at their working size), the next
    /// round measures what an attack leaves behind, not what the first use of a store costs.
    /// A leak still shows: it grows again in the second round.
    func rebaseline() {
        before = settledUsage()
        peak = before
    }

    /// An attack of Tests/hostile/attackers.py on this daemon, as `uid`.
    func attack(_ attack: String, _ arguments: [String] = [], as uid: Int = HostileUID.attacker) throws -> HostileScript {
        try HostileScript("attackers.py", [attack, "--socket", daemon.socket] + arguments, as: uid)
    }

    /// The attack's result, sampling the daemon's usage while waiting for it (the peak is in
    /// the failure messages).
    func result(of script: HostileScript, timeout: Duration) throws -> JSONValue {
        let deadline = ContinuousClock.now + timeout.scaled
        while true {
            do { return try script.result(timeout: .milliseconds(100)) } catch where ContinuousClock.now < deadline {
                let now = DaemonUsage(pid: daemon.pid)
                peak = DaemonUsage(rssKB: max(peak.rssKB, now.rssKB), fds: max(peak.fds, now.fds))
            }
        }
    }

    /// After the attacker exited: the daemon still serves, its RSS and fds come back to
    /// within 10 % of before, and the polite client saw nothing of the attack; returns the
    /// polite client's summary.
    @discardableResult
    func finish(_ attack: String, file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        XCTAssertTrue(daemon.isRunning, "adorchd survives \(attack): \(daemon.howItEnded ?? "")", file: file, line: line)
        var after = DaemonUsage(pid: daemon.pid)
        let deadline = ContinuousClock.now + Duration.seconds(15).scaled
        while !after.isWithinBound(of: before), ContinuousClock.now < deadline, daemon.isRunning {
            Thread.sleep(forTimeInterval: 0.1)
            after = DaemonUsage(pid: daemon.pid)
        }
        print("adorchd before \(attack): \(before!), peak: \(peak!), after: \(after)")
        XCTAssertTrue(after.isWithinBound(of: before), "after \(attack): \(after), before: \(before!), peak: \(peak!)", file: file, line: line)
        return try polite.stopAndCheck(during: attack, file: file, line: line)
    }
}

/// The hostile config's slots: one of each kind an attack needs, all filled by sim at once.
enum HostileSlot {
    static let interstitial = "s"
    static let rewarded = "r"
    static let banner = "b"
    static let interactive = "i"
}

/// The hostile config's own [limits]: small, so that the attacks reach them in seconds.
enum HostileLimit {
    static let partialMessageTimeoutMs = 2000
    static let connections = 200
    static let connectionsPerUID = 50
}

let hostileLimits: [String: String] = [
    "partial_message_timeout_ms": "\(HostileLimit.partialMessageTimeoutMs)",
    "max_connections": "\(HostileLimit.connections)",
    "max_connections_per_uid": "\(HostileLimit.connectionsPerUID)",
]

/// The hostile tests' config: the three uids admitted to io.adorch.Ads, `hostileLimits` with
/// `limits` over them, and `HostileSlot`'s slots.
func hostileConfig(limits: [String: String] = [:]) -> String {
    let merged = hostileLimits.merging(limits) { $1 }
    let fast = "latency_ms=0"
    return simConfig(slots: """
    [access]
    ads_users = [\(HostileUID.all.map { "\"\($0)\"" }.joined(separator: ", "))]

    [limits]
    \(merged.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: "\n"))

    [[slots]]
    id = "\(HostileSlot.interstitial)"
    format = "interstitial"
    buffer = 10
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "\(fast)"

    [[slots]]
    id = "\(HostileSlot.rewarded)"
    format = "rewarded"
    buffer = 10
    reward_name = "coins"
    reward_amount = 1
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "\(fast)"

    [[slots]]
    id = "\(HostileSlot.banner)"
    format = "banner"
    width = 320
    height = 50
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "\(fast)"

    [[slots]]
    id = "\(HostileSlot.interactive)"
    format = "interactive"
    fetch_timeout_ms = 5000
    start_timeout_ms = 10000
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "script=opt_out latency_ms=5 step_ms=5"
    """)
}

extension Duration {
    var dispatchTimeout: DispatchTimeInterval { .nanoseconds(Int(max(.zero, self) / .nanoseconds(1))) }
}
