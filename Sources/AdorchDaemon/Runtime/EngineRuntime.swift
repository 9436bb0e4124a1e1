import AdorchEngine
import AdorchLocking
import AdorchPaths
import AdorchPluginHost
import AdorchSystemd
import AdorchVarlink
import Dispatch
import Foundation
import Logging

/// [engine queue] The only owner of the engine queue: the pure engine and the interactive
/// sessions, the plugins, events and rewards they drive, the timers that wake them, and
/// start, stop and reload. Calls from the Varlink side hop here once and answer through a
/// completion; nothing here ever waits for the Varlink queue.
///
/// What the engine queue owns is `RuntimeState`, reachable only through `state`, a
/// `QueueBound` that asserts the engine queue at every access: the accessors below are the only
/// way in, so a read from another queue stops the daemon where it happens instead of racing.
/// The rest is immutable.
final class EngineRuntime: Sendable {
    let queue: DispatchQueue
    let logger: Logger
    let options: DaemonOptions
    let ids: ExternalIDs
    let gate: CallGate
    let stateDir: String
    let startedAt = Date()
    private let state: QueueBound<RuntimeState>

    init(config: DaemonConfig, options: DaemonOptions, stateDir: String, gate: CallGate, logger: Logger) {
        let queue = DispatchQueue(label: "adorch.engine"), ids = ExternalIDs()
        self.queue = queue
        self.ids = ids
        self.options = options
        self.stateDir = stateDir
        self.gate = gate
        self.logger = logger
        state = QueueBound(RuntimeState(config: config, options: options, stateDir: stateDir, ids: ids, logger: logger), queue: queue)
    }

    // MARK: The engine queue's state, through `state` only

    private(set) var config: DaemonConfig {
        get { state.value.config }
        set { state.value.config = newValue }
    }
    var engine: Engine {
        get { state.value.engine }
        _modify { yield &state.value.engine }
    }
    var sessions: InteractiveSessions {
        get { state.value.sessions }
        _modify { yield &state.value.sessions }
    }
    var unrecordedRewards: [UnrecordedReward] {
        get { state.value.unrecordedRewards }
        _modify { yield &state.value.unrecordedRewards }
    }
    var rewardRetryArmed: Bool {
        get { state.value.rewardRetryArmed }
        set { state.value.rewardRetryArmed = newValue }
    }
    /// The socket apps call (set by start).
    var socketPath: String { state.value.socketPath }
    /// Rewards, durably; opened by start.
    private(set) var rewards: RewardDesk? {
        get { state.value.rewards }
        set { state.value.rewards = newValue }
    }
    /// The frequency rules' impressions, durably; opened once a config has rules
    /// (`openCapHistory`): a daemon without any keeps no second database (its idle footprint).
    private(set) var capHistory: CapHistoryFile? {
        get { state.value.capHistory }
        set { state.value.capHistory = newValue }
    }
    /// The privacy signals apps set, durably, and which applies to a call; opened by start.
    var notices: NoticeSender? {
        get { state.value.notices }
        set { state.value.notices = newValue }
    }
    var unwrittenNotices: [(id: AdID, plugin: String, step: NoticeStep)] {
        get { state.value.unwrittenNotices }
        _modify { yield &state.value.unwrittenNotices }
    }
    var noticesOverBound: Int {
        get { state.value.noticesOverBound }
        set { state.value.noticesOverBound = newValue }
    }
    var overBoundLoggedAt: Date? {
        get { state.value.overBoundLoggedAt }
        set { state.value.overBoundLoggedAt = newValue }
    }
    private(set) var privacyBook: PrivacyBook? {
        get { state.value.privacy }
        set { state.value.privacy = newValue }
    }
    /// Show and Load calls waiting for the engine's answer, by request.
    var pendingShows: [RequestID: @Sendable (Result<ShownAd, ShowError>) -> Void] {
        get { state.value.pendingShows }
        _modify { yield &state.value.pendingShows }
    }
    var pendingLoads: [RequestID: @Sendable (Result<[ShownAd], LoadFailure>) -> Void] {
        get { state.value.pendingLoads }
        _modify { yield &state.value.pendingLoads }
    }
    /// Show calls per slot, for the metrics (`ShowStats`).
    var showStats: [String: ShowStats] {
        get { state.value.showStats }
        _modify { yield &state.value.showStats }
    }
    /// The [metrics] listener, applied at start and at each reload (`attach`).
    private(set) var metricsEndpoint: MetricsEndpoint? {
        get { state.value.metricsEndpoint }
        set { state.value.metricsEndpoint = newValue }
    }
    /// Wakes the engine when it asked to be.
    var timer: DispatchSourceTimer? {
        get { state.value.timer }
        set { state.value.timer = newValue }
    }
    var feed: EventFeed { state.value.feed }
    var plugins: PluginRegistry { state.value.plugins }
    private var estimatesFile: EstimatesFile {
        get { state.value.estimatesFile }
        _modify { yield &state.value.estimatesFile }
    }
    private var stateLock: Int32 {
        get { state.value.stateLock }
        set { state.value.stateLock = newValue }
    }
    private var nextRequest: RequestID {
        get { state.value.nextRequest }
        set { state.value.nextRequest = newValue }
    }
    /// When `timer` fires next, if it is set.
    private var armedFor: Moment? {
        get { state.value.armedFor }
        set { state.value.armedFor = newValue }
    }
    private var tickers: [DispatchSourceTimer] {
        get { state.value.tickers }
        _modify { yield &state.value.tickers }
    }
    private var lastStatus: String {
        get { state.value.lastStatus }
        set { state.value.lastStatus = newValue }
    }

    /// Opens the ledger, loads the plugins, builds the engine (with the estimates kept from
    /// the last run) and starts its timers, on the engine queue (the caller waits). Throws only if two plugin names are one file, or
    /// the state directory or the ledger cannot be used: a refused plugin is logged and the
    /// daemon runs on.
    /// `socketPath`: the socket apps will call, hidden from the plugins' hosts.
    func start(socketPath: String) throws {
        try queue.sync {
            state.value.socketPath = socketPath
            try config.checkPluginFiles(pluginDir: options.pluginDir)
            try prepareStateDirectory()
            rewards = try RewardDesk(stateDir: stateDir, config: config, logger: logger)
            privacyBook = try PrivacyBook(stateDir: stateDir, logger: logger)
            try openNoticesLeftBefore()
            // Before any plugin starts: a history that cannot be opened now fails the start.
            let caps = config.slots.contains(where: \.hasCaps) ? try CapHistoryFile(stateDir: stateDir, logger: logger) : nil
            plugins.route(reports: reportHandler, exits: exitHandler)
            plugins.confinement = confinement(of: config)
            plugins.load(config.plugins, dirs: config.pluginDir)
            engine = Engine(slots: plugins.markingSignals(config.slots), plugins: Set(plugins.loaded.keys), settings: config.scheduler,
                            seed: UInt64.random(in: 1...UInt64.max))
            logUnservable(config.slots)
            if let caps { useCapHistory(caps) }
            // After the history: a promise whose impression had not counted counts now.
            restorePromises()
            timer = makeTimer { [unowned self] in advance() }
            if let (kept, away) = estimatesFile.load(logger: logger) {
                let (effects, refused) = engine.restore(kept, away: away, now: now())
                if refused > 0 { logger.warning("scheduler estimates: \(refused) values out of range in \(estimatesFile.path) were not taken") }
                apply(effects)
            }
            advance()
            tickers.append(makeTimer(every: EstimatesFile.interval) { [unowned self] in saveEstimates() })
            tickers.append(makeTimer(every: .seconds(3600)) { [unowned self] in capHistory?.prune(keeping: engine.capHistoryKept) })
        }
    }

    /// The socket is served: events reach subscribers, systemd hears READY=1 with the
    /// summary, and STATUS= and the watchdog pings start.
    func serving(_ server: VarlinkServer, at socketPath: String) {
        queue.sync {
            feed.server = server
            let summary = summary()
            lastStatus = summary
            ServiceNotifier.ready(status: summary)
            logger.notice("adorchd \(AdorchVersion.current) ready on \(socketPath): \(summary)", metadata: MessageID.daemonReady.metadata)
            // Only now that this daemon serves: one that fails to start must leave the history alone.
            capHistory?.prune(keeping: engine.capHistoryKept)
            tickers.append(makeTimer(every: .seconds(1)) { [unowned self] in publishStatus() })
            if let interval = ServiceNotifier.watchdogInterval {
                // From the engine queue itself: a stuck engine stops the pings.
                tickers.append(makeTimer(every: interval / 2) { ServiceNotifier.watchdog() })
                logger.info("watchdog: pinging every \(interval / 2)")
            }
        }
    }

    /// Sessions and ads end (every object destroyed through its plugin), subscriptions end
    /// with a final reply, the estimates are saved, then the plugins' deinit.
    func stop() {
        queue.sync {
            for source in tickers + [timer].compactMap({ $0 }) { source.cancel() }
            saveEstimates()
            // Before the ads end: their losses wait in the outbox for the next start.
            closeNotices()
            apply(sessions.endAll(where: { _, _ in true }, reason: "the daemon is stopping", now: now()) + engine.shutdown(now: now()))
            feed.endSubscriptions()
            plugins.shutdownAll()
            retryUnrecordedRewards()
            if !unrecordedRewards.isEmpty {
                logger.error("rewards: \(unrecordedRewards.count) granted rewards could not be written to the ledger and are lost with this stop; no app was told they were granted")
            }
            if capHistory?.hasWaiting == true {
                logger.error("frequency caps: impressions that could not be written to the caps history are lost with this stop; the promises of rewarded ads among them count theirs again at the next start")
            }
            rewards?.checkpoint()
            capHistory?.checkpoint()
            privacyBook?.checkpoint()
            checkpointNotices()
        }
    }

    func applyConfig(_ next: DaemonConfig, hidden: Confinement, changed: [String],
                             prestarted: PluginRegistry.Prestarted = [:]) -> Result<String, ConfigError> {
        // A config naming no plugins keeps the ones found in the plugin directories.
        let wanted = Set(next.plugins.map(\.name))
        let removed = next.plugins.isEmpty ? [] : plugins.loaded.keys.filter { !wanted.contains($0) }
        plugins.confinement = hidden
        // A changed plugin stops, its ads with it, and starts again as its section now says.
        for name in changed {
            let why = plugins.configs[name] != next.plugins.first(where: { $0.name == name })
                ? "a reload changed [plugins.\(name)], so it was started again"
                : "a reload changed what its host may not open (the reward key, the state directory or the config), so its host was started again"
            apply(engine.pluginLost(name, reason: why, now: now()))
            apply(sessions.endAll(where: { _, plugin in plugin == name }, reason: why, now: now()))
            plugins.stopForRestart(name, because: why)
        }
        // A plugin that is down (its host restarting, or disabled after its crashes) is started again.
        plugins.load(next.plugins.filter { plugins[$0.name] == nil }, dirs: next.pluginDir, prestarted: prestarted)
        if !next.plugins.isEmpty { plugins.forgetRefusals(except: wanted) }
        apply(engine.setAvailablePlugins(Set(plugins.loaded.keys).subtracting(removed), now: now()))
        apply(engine.reconfigure(slots: plugins.markingSignals(next.slots), settings: next.scheduler, now: now()))
        // Back after the new slots are in place: their first loads use the new waterfalls.
        for name in plugins.loaded.keys.sorted() where engine.isDown(name) { apply(engine.pluginRestored(name, now: now())) }
        sessions.budgets = next.scheduler.budgets
        sessions.privacy = next.scheduler.privacy
        let interactive = Set(next.slots.filter { $0.format == .interactive }.map(\.id))
        apply(sessions.endAll(where: { slot, plugin in !interactive.contains(slot) || removed.contains(plugin) },
                              reason: "the reload removed its slot or its plugin", now: now()))
        for name in removed.sorted() { plugins.remove(name) }
        if next.limits != config.limits || next.socketPath != config.socketPath {
            logger.notice("reload: socket, max_message_bytes and connection [limits] changes take effect at the next start")
        }
        metricsEndpoint?.apply(next.metrics)
        // A slot's Show series go with it, as its engine counters do: the labels stay those
        // of the running config, and a slot added again starts from 0 like its counters.
        let kept = Set(next.slots.map(\.id))
        showStats = showStats.filter { kept.contains($0.key) }
        for slot in next.slots { showStats[slot.id]?.keepCappedRules(of: slot) }
        openCapHistory(for: next)
        capHistory?.prune(keeping: engine.capHistoryKept)
        logUnservable(next.slots)
        config = next
        gate.update(next)
        return .success(summary())
    }

    /// One line per slot no plugin can fill (a plugin refused, a waterfall naming the wrong
    /// one), at start and at each reload: the slot says so too, in status and to Show.
    private func logUnservable(_ slots: [SlotConfig]) {
        for slot in slots {
            guard let missing = engine.missingPlugins(of: slot.id) else { continue }
            logger.error("slot \(slot.id) cannot be filled: \(StatusJSON.unservable(missing))", metadata: ["slot": "\(slot.id)"])
        }
    }

    /// The first config with frequency rules opens their history and reads back what it can
    /// still count (at start, or at the reload that brings rules).
    /// A reload that brings the first rules opens the history; if it cannot be opened now, the
    /// rules hold in memory until the next start or reload, which tries again.
    private func openCapHistory(for config: DaemonConfig) {
        guard capHistory == nil, config.slots.contains(where: \.hasCaps) else { return }
        do {
            useCapHistory(try CapHistoryFile(stateDir: stateDir, logger: logger))
        } catch {
            logger.error("frequency caps: \(error); the rules count in memory until the next reload or start")
        }
    }

    private func useCapHistory(_ file: CapHistoryFile) {
        engine.restoreImpressions(file.restore(keeping: engine.capHistoryKept, now: now()))
        capHistory = file
    }

    /// The state directory (ledger, estimates) must exist and be writable: said in words,
    /// as a config error, before anything else starts.
    private func prepareStateDirectory() throws(StateDirectoryError) {
        guard !stateDir.isEmpty else { throw StateDirectoryError(path: stateDir, reason: "is empty; expected a path") }
        // mkdir -p by hand: each step's errno names what is wrong where ("not a directory"
        // for a file on the way), which Foundation's error for the whole path does not.
        var made = stateDir.hasPrefix("/") ? "" : "."
        let parts = stateDir.split(separator: "/")
        for (index, part) in parts.enumerated() {
            made += "/" + part
            // The state directory itself is the daemon's alone (its files hold user ids and
            // consent strings), whatever the umask; the folders on the way are as mkdir -p makes them.
            if mkdir(made, index == parts.count - 1 ? 0o700 : 0o755) != 0, errno != EEXIST {
                throw StateDirectoryError(path: stateDir, reason: "cannot be created: \(made): \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard stat(stateDir, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw StateDirectoryError(path: stateDir, reason: "is not a directory")
        }
        guard access(stateDir, W_OK | X_OK) == 0 else {
            throw StateDirectoryError(path: stateDir, reason: "is not writable by uid \(getuid()): \(String(cString: strerror(errno)))")
        }
        let lockPath = stateDir + "/adorchd.lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StateDirectoryError(path: stateDir, reason: "cannot hold \(lockPath): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let why = errno == EWOULDBLOCK ? "is in use by another adorchd (it holds \(lockPath))" : "cannot lock \(lockPath): \(String(cString: strerror(errno)))"
            close(fd)
            throw StateDirectoryError(path: stateDir, reason: why)
        }
        stateLock = fd
    }

    /// Blocks the engine queue (io.adorch.Debug, tests only): the watchdog pings must stop.
    func freeze(for duration: Duration) {
        logger.warning("debug: freezing the engine queue for \(duration)")
        queue.async { Thread.sleep(forTimeInterval: duration.seconds) }
    }

    /// A new request id for a Show or Load call.
    func issueRequest() -> RequestID {
        defer { nextRequest += 1 }
        return nextRequest
    }

    // MARK: Timers

    /// A timer on the engine queue, once at `every` intervals or, without, re-armed by `rearm`.
    private func makeTimer(every interval: Duration? = nil, _ body: @escaping () -> Void) -> DispatchSourceTimer {
        let source = DispatchSource.makeTimerSource(queue: queue)
        source.setEventHandler(handler: body)
        if let interval {
            let nanoseconds = Int(interval.nanosecondsClamped)
            source.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds), leeway: .milliseconds(10))
        }
        source.resume()
        return source
    }

    /// Deadlines, expiries and backoffs of ads and sessions that are due, and the restarts
    /// of isolated plugins.
    private func advance() {
        armedFor = nil
        let moment = now()
        apply(engine.advance(to: moment) + sessions.advance(to: moment))
        for name in plugins.supervisor.dueRestarts(at: moment) { restartPlugin(name) }
    }

    /// Moves the timer earlier if the engine or the sessions now want to wake sooner. It is
    /// never moved later: setting a Dispatch timer wakes Dispatch's manager thread, and a
    /// Show sets and clears a deadline every call. Waking early costs one `advance` that
    /// finds nothing due and re-arms.
    func rearm() {
        guard let timer else { return }
        let current = now()
        guard let wake = [engine.nextWakeup(after: current), sessions.nextWakeup(after: current),
                          plugins.supervisor.nextWakeup(after: current)].compactMap({ $0 }).min(),
              armedFor.map({ wake < $0 }) ?? true
        else { return }
        armedFor = wake
        timer.schedule(deadline: .now() + .nanoseconds(Int((wake - current).nanosecondsClamped)), leeway: .milliseconds(2))
    }

    private func saveEstimates() {
        estimatesFile.save(engine.estimates(at: now()), logger: logger)
    }

    /// STATUS= for systemd, sent when the summary changed, at most once a second.
    private func publishStatus() {
        let summary = summary()
        guard summary != lastStatus else { return }
        lastStatus = summary
        ServiceNotifier.status(summary)
    }

    // MARK: Helpers

    func now() -> Moment { Moment.monotonicNow() }

    /// The wall-clock time of a monotonic moment, for apps (reads only the clock: any thread).
    func wallTime(_ moment: Moment) -> Date { Date(timeIntervalSinceNow: (moment - now()).seconds) }

    /// Starts the [metrics] listener the config asks for; reloads apply it from then on.
    func attach(_ endpoint: MetricsEndpoint) {
        queue.sync {
            metricsEndpoint = endpoint
            endpoint.apply(config.metrics)
        }
    }

    func detachMetrics() { queue.sync { metricsEndpoint?.stop() } }

    /// One line: slots, ready ads, plugins.
    func summary() -> String {
        let statuses = engine.slotStatuses(at: now())
        let ready = statuses.map(\.ready).reduce(0, +)
        let wanted = statuses.map(\.target.count).reduce(0, +)
        return "\(statuses.count) slots, \(ready)/\(wanted) ads ready, \(plugins.loaded.count) plugins"
            + (plugins.refusals.isEmpty ? "" : ", \(plugins.refusals.count) refused")
            + (metricsEndpoint?.state.map { $0.error == nil ? ", metrics on \($0.address)" : ", metrics not listening on \($0.address)" } ?? "")
    }
}

/// The state directory cannot be used: a config error (exit 78), never a crash.
public struct StateDirectoryError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "state directory \(path) \(reason) (set [daemon] state_dir or --state-dir)" }
}
