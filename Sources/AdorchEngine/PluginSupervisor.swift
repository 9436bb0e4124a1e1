/// When an isolated plugin's host is started again after it died, and when it is not
/// (docs/isolation.md, "When a plugin crashes"): at once after a first crash, then after a
/// backoff that doubles with each crash in the window; at the budget's last crash the plugin
/// is disabled until a reload. Pure: the shell reports crashes and restarts, and asks what
/// is due at a moment.
public struct PluginSupervisor: Sendable, Equatable {
    public struct Policy: Sendable, Equatable {
        /// Crashes within `window` that disable the plugin.
        public var crashBudget: Int
        public var window: Duration

        public init(crashBudget: Int = Policy.defaultCrashBudget, window: Duration = Policy.defaultWindow) {
            self.crashBudget = crashBudget
            self.window = window
        }

        public static let defaultCrashBudget = 5
        public static let defaultWindow = Duration.seconds(600)
        /// The wait before a second restart in the window; each next one doubles it.
        public static let firstBackoff = Duration.milliseconds(250)
        public static let maxBackoff = Duration.seconds(30)
    }

    public enum State: Sendable, Equatable {
        case running
        /// Down since a crash, to be started again at `at`.
        case restarting(at: Moment)
        /// A new host is being started (the shell reports `restarted` or `crashed`).
        case starting
        /// Out until a reload: the reason names the crashes.
        case disabled(reason: String)
    }

    public struct Record: Sendable, Equatable {
        public var state: State = .running
        /// Crashes since the daemon (or the reload that last named the plugin) started it.
        public var crashes = 0
        public var lastExit: String?
        public var lastCrashAt: Moment?
        /// The crashes inside the window, oldest first.
        var recent: [Moment] = []
    }

    public private(set) var records: [String: Record] = [:]
    var policies: [String: Policy] = [:]

    public init() {}

    /// A plugin was (again) loaded, with `policy`: it runs. A reload that loads a disabled
    /// one again ("disabled until reload") keeps its crash count and starts a new window.
    public mutating func supervise(_ plugin: String, policy: Policy) {
        policies[plugin] = policy
        if case .disabled? = records[plugin]?.state { records[plugin]!.recent = [] }
        records[plugin, default: Record()].state = .running
    }

    /// A plugin a reload removed is forgotten.
    public mutating func forget(_ plugin: String) {
        records[plugin] = nil
        policies[plugin] = nil
    }

    /// Its host died (`exit` says how): what happens to it now.
    @discardableResult
    public mutating func crashed(_ plugin: String, exit: String, now: Moment) -> State {
        let policy = policies[plugin] ?? Policy()
        var record = records[plugin] ?? Record()
        record.crashes += 1
        record.lastExit = exit
        record.lastCrashAt = now
        record.recent = record.recent.filter { now - $0 < policy.window } + [now]
        let inWindow = record.recent.count
        if inWindow >= policy.crashBudget {
            record.state = .disabled(reason: "\(inWindow) crashes within \(policy.window), the last: \(exit); disabled until the next reload")
        } else {
            record.state = .restarting(at: now + Self.backoff(afterCrashes: inWindow))
        }
        records[plugin] = record
        return record.state
    }

    /// The wait before restarting after the `n`th crash in the window: none after the first.
    public static func backoff(afterCrashes n: Int) -> Duration {
        guard n > 1 else { return .zero }
        let doublings = min(n - 2, 16)
        return min(Policy.firstBackoff * (1 << doublings), Policy.maxBackoff)
    }

    /// Its host is back.
    public mutating func restarted(_ plugin: String) {
        records[plugin]?.state = .running
    }

    /// Plugins whose restart is due at `now`, each now `starting`.
    public mutating func dueRestarts(at now: Moment) -> [String] {
        let due = records.filter { if case .restarting(let at) = $0.value.state { at <= now } else { false } }.keys.sorted()
        for plugin in due { records[plugin]!.state = .starting }
        return due
    }

    public func nextWakeup(after now: Moment) -> Moment? {
        records.values.compactMap { if case .restarting(let at) = $0.state { max(at, now) } else { nil } }.min()
    }

    public func state(of plugin: String) -> State? { records[plugin]?.state }
}
