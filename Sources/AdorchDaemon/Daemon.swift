import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import AdorchRewards
import AdorchSystemd
import AdorchVarlink
import Dispatch
import Foundation
import Logging

/// What the command line says; each field overrides the config's.
public struct DaemonOptions: Sendable {
    public var configPath: String?
    public var socketPath: String?
    public var stateDir: String?
    public var pluginDir: String?
    /// Serve io.adorch.Debug (tests only: it can freeze the engine queue).
    public var debugInterface: Bool
    /// Load plugins without PluginFileTrust's ownership and permission checks (development).
    public var insecurePlugins: Bool

    public init(configPath: String? = nil, socketPath: String? = nil, stateDir: String? = nil, pluginDir: String? = nil,
                debugInterface: Bool = false, insecurePlugins: Bool = false) {
        self.configPath = configPath
        self.socketPath = socketPath
        self.stateDir = stateDir
        self.pluginDir = pluginDir
        self.debugInterface = debugInterface
        self.insecurePlugins = insecurePlugins
    }
}

/// A plugin the daemon tried to load and could not.
public struct PluginRefusal: Sendable {
    public var name: String
    public var path: String
    public var reason: String
}

/// The Dispatch shell around the pure engine: one serial queue owns the engine, a timer
/// wakes it when it asked to be, and its effects become plugin calls, logs and events.
///
/// @unchecked Sendable: it owns the engine queue, and every mutable field is touched only
/// on that queue.
public final class Daemon: @unchecked Sendable {
    public static let version = "0.1.0"

    let queue = DispatchQueue(label: "adorch.engine")
    let logger: Logger
    let options: DaemonOptions
    private(set) var config: DaemonConfig {
        didSet {
            accessPolicy.withLock { $0 = config.access }
            showLimiter.withLock { $0.rate = config.showRate }
        }
    }
    /// Show calls per uid, counted on the Varlink queue before they reach the engine.
    private let showLimiter: LockedValue<ShowRateLimiter>
    /// The config's access rules, read by the Varlink queue for every call.
    private let accessPolicy: LockedValue<AccessPolicy>
    private var engine: Engine
    private var sessions = InteractiveSessions()
    private var plugins: [String: LoadedPlugin] = [:]
    private var refusals: [String: PluginRefusal] = [:]
    private var subscribers: [UInt64: Subscriber] = [:]
    /// Who each ad was handed to (Show, Load): only that uid may report on it or acknowledge
    /// its reward. An entry lives as long as the ad's plugin object.
    private var holders: [AdID: UInt32] = [:]
    /// Load requests waiting for the engine's answer.
    private var pendingLoads: [RequestID: @Sendable (Result<[ShownAd], LoadFailure>) -> Void] = [:]
    private var nextRequest: RequestID = 1
    private var nextSubscriber: UInt64 = 1
    /// The latest events, oldest first, for `adorchctl events` without --follow.
    private var recentEvents: [(slot: String?, json: JSONValue)] = []
    static let recentEventsKept = 512
    private var timer: DispatchSourceTimer?
    /// STATUS= for systemd, sent when the summary changed, at most once a second.
    private var statusTicker: DispatchSourceTimer?
    /// Writes the scheduler's estimates every `EstimatesFile.interval`.
    private var estimatesTicker: DispatchSourceTimer?
    private var estimatesFile: EstimatesFile
    private var lastStatus = ""
    /// WATCHDOG=1 from the engine queue itself: a stuck engine stops the pings.
    private var watchdog: DispatchSourceTimer?
    private var server: VarlinkServer?
    /// Rewards, durably; opened by start.
    private(set) var ledger: RewardLedger?
    /// The app security key of the server-to-server reward callback, if one is configured.
    private var rewardKey: String?
    private let startedAt = Date()
    /// Ad ids are `<bootTag>-<n>`: an id from an earlier run of the daemon is never mistaken
    /// for one of this run's.
    let bootTag = String(UInt32.random(in: 0x1000_0000...UInt32.max), radix: 16)
    public private(set) var socketPath: String
    public let stateDir: String

    public init(config: DaemonConfig, options: DaemonOptions, logger: Logger) {
        self.config = config
        self.accessPolicy = LockedValue(config.access)
        self.showLimiter = LockedValue(ShowRateLimiter(rate: config.showRate))
        self.options = options
        self.logger = logger
        self.socketPath = options.socketPath ?? config.socketPath ?? DefaultPaths.socket
        self.stateDir = options.stateDir ?? config.stateDir ?? DefaultPaths.stateDir
        self.engine = Engine(slots: [], plugins: [], settings: config.scheduler)
        self.estimatesFile = EstimatesFile(stateDir: stateDir)
    }

    /// Loads the plugins, fills the slots and starts serving on the socket systemd passed
    /// (socket activation) or on one of its own; then tells systemd it is ready. Throws only
    /// if the socket cannot be served: a refused plugin is logged and the daemon runs on.
    public func start() throws {
        try prepareStateDirectory()
        ledger = try RewardLedger(path: stateDir + "/adorch.sqlite")
        rewardKey = try loadRewardKey(config)
        queue.sync {
            loadPlugins(config.plugins)
            engine = Engine(slots: config.slots, plugins: Set(plugins.keys), settings: config.scheduler,
                            seed: UInt64.random(in: 1...UInt64.max))
            timer = makeTimer { [unowned self] in advance() }
            if let (kept, away) = estimatesFile.load(logger: logger) {
                let (effects, refused) = engine.restore(kept, away: away, now: now())
                if refused > 0 { logger.warning("scheduler estimates: \(refused) values out of range in \(estimatesFile.path) were not taken") }
                apply(effects)
            }
            advance()
            estimatesTicker = makeTimer(every: EstimatesFile.interval) { [unowned self] in saveEstimates() }
        }
        let api = ControlAPI(daemon: self)
        var interfaces = [VarlinkInterface(description: adsInterfaceIDL), VarlinkInterface(description: managerInterfaceIDL)]
        if options.debugInterface { interfaces.append(VarlinkInterface(description: debugInterfaceIDL)) }
        let server = try VarlinkServer(
            info: VarlinkServiceInfo(vendor: "adorch", product: "adorchd", version: Self.version, url: "https://adorch.invalid/"),
            interfaces: interfaces, limits: config.limits, logger: logger,
            handler: { call, replier in api.handle(call, replier) }
        )
        // Everything a call may read is set before accepting: with socket activation a client
        // is already waiting and is served at once. On the queue: plugins already report, and
        // publishing their events reads `server` there (ThreadSanitizer saw the race).
        let activated = SocketActivation.listeningSockets().first
        queue.sync {
            self.server = server
            if let fd = activated { socketPath = VarlinkServer.boundPath(of: fd) ?? "fd \(fd)" }
        }
        if let fd = activated {
            server.listen(fileDescriptor: fd)
        } else {
            try server.listen(path: socketPath)
        }
        queue.sync {
            let summary = summary()
            lastStatus = summary
            ServiceNotifier.ready(status: summary)
            logger.notice("adorchd \(Self.version) ready on \(socketPath): \(summary)", metadata: MessageID.daemonReady.metadata)
            statusTicker = makeTimer(every: .seconds(1)) { [unowned self] in publishStatus() }
            if let interval = ServiceNotifier.watchdogInterval {
                watchdog = makeTimer(every: interval / 2) { ServiceNotifier.watchdog() }
                logger.info("watchdog: pinging every \(interval / 2)")
            }
        }
    }

    /// The state directory (ledger, estimates) must exist and be writable: said in words,
    /// as a config error, before anything else starts.
    private func prepareStateDirectory() throws(StateDirectoryError) {
        do {
            try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        } catch {
            throw StateDirectoryError(path: stateDir, reason: "cannot be created: \(inWords(error))")
        }
        guard access(stateDir, W_OK | X_OK) == 0 else {
            throw StateDirectoryError(path: stateDir, reason: "is not writable by uid \(getuid()): \(String(cString: strerror(errno)))")
        }
    }

    /// The graceful stop: STOPPING=1, no new connections, calls already taken answered,
    /// subscriptions ended with a final reply, every ad destroyed through its plugin, the
    /// plugins' deinit, then the connections closed.
    public func stop() {
        ServiceNotifier.stopping()
        logger.notice("adorchd stopping", metadata: MessageID.daemonStopping.metadata)
        server?.stopAccepting()
        queue.sync {
            for source in [timer, statusTicker, watchdog, estimatesTicker] { source?.cancel() }
            saveEstimates()
            apply(sessions.endAll(where: { _, _ in true }, reason: "the daemon is stopping", now: now()) + engine.shutdown(now: now()))
            for subscriber in subscribers.values {
                subscriber.replier.fail(VarlinkError("io.adorch.Ads.ShuttingDown"))
            }
            subscribers.removeAll()
            for plugin in plugins.values.sorted(by: { $0.info.name < $1.info.name }) where !plugin.shutdown() {
                logger.error("plugin \(plugin.info.name) did not return from a call within 5 s: stopping without its deinit",
                             metadata: ["plugin": "\(plugin.info.name)"])
            }
        }
        server?.stop()
        if !ServiceNotifier.flush(timeout: .seconds(2)) {
            logger.warning("the service manager did not read STOPPING=1 within 2 s")
        }
        logger.notice("adorchd stopped")
    }

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

    private func saveEstimates() {
        dispatchPrecondition(condition: .onQueue(queue))
        estimatesFile.save(engine.estimates(at: now()), logger: logger)
    }

    private func publishStatus() {
        let summary = summary()
        guard summary != lastStatus else { return }
        lastStatus = summary
        ServiceNotifier.status(summary)
    }

    /// Blocks the engine queue (io.adorch.Debug, tests only): the watchdog pings must stop.
    func freezeEngine(for duration: Duration, completion: @escaping @Sendable () -> Void) {
        logger.warning("debug: freezing the engine queue for \(duration)")
        completion()
        queue.async { Thread.sleep(forTimeInterval: duration.seconds) }
    }

    /// Reads the config again and applies it; on any error the running config stays and
    /// the reply and the journal say why. systemd hears RELOADING=1 and READY=1 around it.
    public func reload(completion: @escaping @Sendable (Result<String, ConfigError>) -> Void = { _ in }) {
        queue.async { [self] in
            ServiceNotifier.reloading()
            let result = applyConfig()
            ServiceNotifier.ready(status: summary())
            switch result {
            case .success(let summary):
                logger.notice("reload done: \(summary)", metadata: MessageID.reloadDone.metadata)
            case .failure(let error):
                logger.error("reload failed, keeping the running config: \(error)", metadata: MessageID.reloadFailed.metadata)
            }
            completion(result)
        }
    }

    private func applyConfig() -> Result<String, ConfigError> {
        let next: DaemonConfig
        do throws(ConfigError) {
            next = try options.configPath.map { path throws(ConfigError) in try DaemonConfig.load(path: path) } ?? .embeddedDefault()
        } catch {
            return .failure(error)
        }
        let wanted = Set(next.plugins.map(\.name))
        let removed = next.plugins.isEmpty ? [] : plugins.keys.filter { !wanted.contains($0) }
        loadPlugins(next.plugins.filter { plugins[$0.name] == nil })
        for name in removed { refusals[name] = nil }
        for name in refusals.keys where !wanted.contains(name) && !next.plugins.isEmpty { refusals[name] = nil }
        apply(engine.setAvailablePlugins(Set(plugins.keys).subtracting(removed), now: now()))
        apply(engine.reconfigure(slots: next.slots, settings: next.scheduler, now: now()))
        let interactive = Set(next.slots.filter { $0.format == .interactive }.map(\.id))
        apply(sessions.endAll(where: { slot, plugin in !interactive.contains(slot) || removed.contains(plugin) },
                              reason: "the reload removed its slot or its plugin", now: now()))
        // Removed plugins stop after the destroys just queued to them ran.
        for name in removed.sorted() {
            plugins.removeValue(forKey: name)?.shutdown()
            logger.notice("plugin \(name) removed", metadata: ["plugin": "\(name)"])
        }
        if next.limits != config.limits || next.socketPath != config.socketPath {
            logger.notice("reload: socket, max_message_bytes and connection [limits] changes take effect at the next start")
        }
        config = next
        return .success(summary())
    }

    // MARK: Rewards

    /// docs/rules.md, "Ledger first": the ledger row is on disk before any subscriber hears of the reward.
    private func record(_ grant: RewardGrant) {
        guard let ledger else { return }
        let row = RewardRecord(
            transID: grant.networkTransID ?? "adorch-\(UUID().uuidString.lowercased())", adID: externalID(grant.adID),
            userID: grant.userID, slot: grant.slot, network: grant.network, rewardName: grant.reward.name,
            rewardAmount: grant.reward.amount, extra: grant.reward.extra, grantedAt: Date(),
            holderUID: holders[grant.adID].map(Int64.init)
        )
        do {
            switch try ledger.grant(row) {
            case .granted:
                var event = EngineEvent(.rewardGranted, slot: row.slot, adID: grant.adID, network: row.network,
                                        message: "\(row.rewardAmount) \(row.rewardName), transaction \(row.transID)", userID: row.userID)
                event.detailJSON = rewardJSON(row).jsonString
                publish(event)
            case .duplicate(let why):
                logger.warning("reward refused: \(why)", metadata: ["slot": "\(row.slot)", "user_id": "\(row.userID)"])
            }
        } catch {
            logger.error("reward ledger write failed, the reward was not granted: \(error)", metadata: ["slot": "\(row.slot)"])
        }
    }

    func rewardJSON(_ row: RewardRecord) -> JSONValue {
        ["trans_id": .string(row.transID), "ad_id": .string(row.adID), "user_id": .string(row.userID), "slot": .string(row.slot),
         "network": .string(row.network), "reward_name": .string(row.rewardName), "reward_amount": .int(row.rewardAmount),
         "extra": .string(row.extra), "granted_at": .string(Self.timestamp(row.grantedAt)), "acknowledged": .bool(row.acknowledged)]
    }

    /// The key from [rewards] key_file, or the systemd credential reward-key; never the socket.
    private func loadRewardKey(_ config: DaemonConfig) throws -> String? {
        var path = config.rewardKeyFile
        if path == nil, let credentials = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"] {
            let credential = credentials + "/reward-key"
            if FileManager.default.fileExists(atPath: credential) { path = credential }
        }
        guard let path else { return nil }
        let key = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !key.isEmpty else { throw ConfigError(file: path, location: "file", message: "the reward key file is empty") }
        return key
    }

    /// A network's server-to-server reward callback, checked as the publisher's server would
    /// (docs/rules.md, "Server-to-server callback").
    func verifyRewardCallback(_ query: String, completion: @escaping @Sendable (Result<(valid: Bool, reason: String?), VarlinkError>) -> Void) {
        queue.async { [self] in
            guard let key = rewardKey, let ledger else {
                return completion(.failure(VarlinkError("io.adorch.Manager.NoRewardKey", ["message": "no [rewards] key_file or reward-key credential is configured"])))
            }
            let parsed: RewardCallback.Query
            do throws(RewardCallback.Failure) { parsed = try RewardCallback.parse(query) } catch {
                return completion(.success((false, error.description)))
            }
            guard RewardCallback.signatureIsValid(parsed, key: key) else { return completion(.success((false, "the sign does not match"))) }
            do {
                guard try ledger.acceptCallback(transID: parsed.transID, at: Date()) else {
                    return completion(.success((false, "transaction \(parsed.transID) was accepted before (replay)")))
                }
            } catch {
                return completion(.failure(VarlinkError("io.adorch.Manager.LedgerFailed", ["message": .string("\(error)")])))
            }
            completion(.success((true, nil)))
        }
    }

    func rewards(userID: String?, since: Date?, completion: @escaping @Sendable (Result<[JSONValue], Error>) -> Void) {
        queue.async { [self] in
            completion(Result { try (ledger?.unacknowledged(userID: userID, since: since) ?? []).map(rewardJSON) })
        }
    }

    /// `denied` answers instead of `completion` when the reward's ad was handed to another uid.
    func acknowledgeReward(_ transID: String, caller: UInt32?, denied: @escaping @Sendable (String) -> Void,
                           completion: @escaping @Sendable (Result<Bool, Error>) -> Void) {
        queue.async { [self] in
            do {
                if let holder = try ledger?.reward(transID: transID)?.holderUID, let caller, caller != 0, Int64(caller) != holder {
                    return denied("not the user the rewarded ad was handed to (uid \(holder))")
                }
                completion(.success(try ledger?.acknowledge(transID: transID) ?? false))
            } catch {
                completion(.failure(error))
            }
        }
    }

    /// Why `caller` may not act on ad `id`; nil if it may (root may always; an ad no one
    /// holds, e.g. one already destroyed, is left to the engine to judge).
    private func holderRefusal(of id: AdID, caller: UInt32?) -> String? {
        guard let holder = holders[id], let caller, caller != 0, caller != holder else { return nil }
        return "not the user ad \(externalID(id)) was handed to (uid \(holder))"
    }

    // MARK: Access

    /// [any thread] Why the caller may not make `call` (on `slot`), or nil if it may. A
    /// refusal is logged with the caller's uid, pid and the method.
    func refusal(of call: VarlinkCall, slot: String?) -> String? {
        guard let reason = accessPolicy.withLock({ $0.refusal(of: call, slot: slot) }) else { return nil }
        logDenied(call, reason)
        return reason
    }

    /// [any thread] How long `uid` must wait before its next Show, or nil if it may show now.
    /// Root, the operator, is not rate limited, as it is not refused by [access].
    func showWait(_ uid: UInt32?) -> Duration? {
        guard uid != 0 else { return nil }
        let wait = showLimiter.withLock { $0.take(uid ?? UInt32.max, now: .now) }
        if let wait {
            logger.notice("Show rate limit: uid \(uid.map(String.init) ?? "unknown") may show again in \(wait)",
                          metadata: ["peer_uid": "\(uid.map(String.init) ?? "")"])
        }
        return wait
    }

    func logDenied(_ call: VarlinkCall, _ reason: String) {
        let uid = call.peer.map { "\($0.uid)" } ?? "unknown"
        logger.warning("permission denied: uid \(uid) (pid \(call.peer.map { "\($0.pid)" } ?? "unknown")) called \(call.method): \(reason)", metadata: [
            "peer_uid": "\(uid)", "peer_pid": "\(call.peer.map { "\($0.pid)" } ?? "")", "method": "\(call.method)",
        ].merging(MessageID.permissionDenied.metadata) { $1 })
    }

    // MARK: Plugins

    private func loadPlugins(_ wanted: [PluginConfig]) {
        if options.insecurePlugins {
            logger.warning("--insecure-plugins: plugin files are loaded without checking who owns them or who may write them; never run a production daemon this way")
        }
        let dirs = (options.pluginDir ?? config.pluginDir).map { [$0] } ?? DefaultPaths.pluginDirs
        let list = wanted.isEmpty && plugins.isEmpty ? discoverPlugins(in: dirs) : wanted
        for plugin in list {
            let file = plugin.path ?? "libadorch-plugin-\(plugin.name).so"
            let candidates = file.hasPrefix("/") ? [file] : dirs.map { "\($0)/\(file)" }
            guard let path = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
                let reason = "plugin \(plugin.name) refused: \(file) not found in \(dirs.joined(separator: ", "))"
                logger.error("\(reason)", metadata: ["plugin": "\(plugin.name)"].merging(MessageID.pluginRefused.metadata) { $1 })
                refusals[plugin.name] = PluginRefusal(name: plugin.name, path: candidates.first ?? file, reason: reason)
                continue
            }
            do {
                // Root and the service's own user: the only ones who may have put code here.
                if !options.insecurePlugins { try PluginFileTrust.check(path, owners: [0, geteuid()]) }
                let loaded = try LoadedPlugin(
                    name: plugin.name, path: path, configJSON: plugin.configJSON, logger: logger,
                    onReport: { [weak self] name, id, report in self?.pluginReported(report, for: id, from: name) }
                )
                plugins[plugin.name] = loaded
                refusals[plugin.name] = nil
                let info = loaded.info
                let newer = info.abiMinor > PluginABI.minor
                    ? " (newer than this daemon's ABI \(PluginABI.major).\(PluginABI.minor): what \(info.abiMajor).\(info.abiMinor) added is not used)" : ""
                logger.notice(
                    "plugin \(info.name) loaded: \(info.declaredName) \(info.version), ABI \(info.abiMajor).\(info.abiMinor)\(newer), \(info.formats.map(\.rawValue).joined(separator: "/")), from \(path)",
                    metadata: ["plugin": "\(info.name)"].merging(MessageID.pluginLoaded.metadata) { $1 }
                )
            } catch {
                logger.error("\(error.description)", metadata: ["plugin": "\(plugin.name)"].merging(MessageID.pluginRefused.metadata) { $1 })
                refusals[plugin.name] = PluginRefusal(name: plugin.name, path: path, reason: error.description)
            }
        }
    }

    private func discoverPlugins(in dirs: [String]) -> [PluginConfig] {
        var found: [String: PluginConfig] = [:]
        for dir in dirs {
            for file in ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() where file.hasSuffix(".so") {
                var name = String(file.dropLast(3))
                if name.hasPrefix("libadorch-plugin-") { name = String(name.dropFirst("libadorch-plugin-".count)) }
                if found[name] == nil { found[name] = PluginConfig(name: name, path: "\(dir)/\(file)", configJSON: "{}") }
            }
        }
        return found.values.sorted { $0.name < $1.name }
    }

    /// From any plugin thread: hop to the engine queue.
    private func pluginReported(_ report: PluginReport, for id: AdID, from plugin: String) {
        queue.async { [self] in
            apply(sessions.owns(id) ? sessions.pluginReported(report, for: id, from: plugin, now: now())
                                    : engine.pluginReported(report, for: id, from: plugin, now: now()))
        }
    }

    /// Deadlines, expiries and backoffs of ads and sessions that are due.
    private func advance() {
        let moment = now()
        apply(engine.advance(to: moment) + sessions.advance(to: moment))
    }

    // MARK: Effects

    /// Carries out the engine's effects, in order, then re-arms the timer. Engine queue only.
    private func apply(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .load(let order): plugins[order.plugin]?.load(order)
            case .show(let id, let plugin, let userID): plugins[plugin]?.show(id, userID: userID)
            case .notify(let id, let plugin, let event): plugins[plugin]?.notify(id, event: event)
            case .destroy(let id, let plugin):
                holders[id] = nil
                plugins[plugin]?.destroy(id)
            case .emit(let event): publish(event)
            case .completeLoad(let request, let result): pendingLoads.removeValue(forKey: request)?(result)
            case .grantReward(let grant): record(grant)
            case .startSession(let id, let plugin):
                // A plugin stuck for longer than this is as good as a refusal; the start timeout covers the rest.
                plugins[plugin]?.show(id, userID: nil, timeout: .seconds(5)) { [self] started in
                    guard !started else { return }
                    queue.async { [self] in apply(sessions.startRefused(id, now: now())) }
                }
            case .controlSession(let id, let plugin, let control): plugins[plugin]?.control(id, control)
            }
        }
        rearm()
    }

    private func rearm() {
        guard let timer else { return }
        let current = now()
        if let wake = [engine.nextWakeup(after: current), sessions.nextWakeup(after: current)].compactMap({ $0 }).min() {
            timer.schedule(deadline: .now() + .nanoseconds(Int((wake - current).nanosecondsClamped)), leeway: .milliseconds(2))
        } else {
            timer.schedule(deadline: .distantFuture)
        }
    }

    private func publish(_ reported: EngineEvent) {
        var event = reported
        if event.kind == .session, event.message == nil,
           let message = event.detailJSON.flatMap({ JSONValue.parse(Data($0.utf8)) })?.objectValue?["message"]?.stringValue {
            event.message = message  // a renderer's error, from its detail
        }
        var metadata: Logger.Metadata = [:]
        if let slot = event.slot { metadata["slot"] = "\(slot)" }
        if let network = event.network { metadata["network"] = "\(network)" }
        if let id = event.adID { metadata[event.kind == .session ? "session_id" : "ad_id"] = "\(externalID(id))" }
        if event.kind == .session, event.terminal { metadata["ad_free_pod"] = "\(event.adFreePod)" }
        if let code = event.errorCode { metadata["error_code"] = "\(code.rawValue)" }
        if let code = event.networkCode { metadata["network_code"] = "\(code)" }
        if let user = event.userID, !user.isEmpty { metadata["user_id"] = "\(user)" }
        if let id = MessageID(event) { metadata["message_id"] = "\(id.rawValue)" }
        logger.log(level: logLevel(for: event), "\(describe(event))", metadata: metadata)

        let json = eventJSON(event)
        recentEvents.append((event.slot, json))
        if recentEvents.count > Self.recentEventsKept { recentEvents.removeFirst(recentEvents.count - Self.recentEventsKept) }
        server?.broadcast(["event": json], to: subscribers.values.filter { $0.wants(event.slot) }.map(\.replier))
    }

    private func logLevel(for event: EngineEvent) -> Logger.Level {
        switch event.kind {
        case .adLoaded, .adShown, .adExpired, .adReplaced, .adEvent, .rewardGranted: .info
        case .mediaCached: .debug
        case .adFailed, .adTimedOut, .slotEmpty, .networkPaused: .notice
        case .callbackIgnored, .contractViolation: .warning
        case .session: event.sessionEvent == "error" ? .notice : .info
        }
    }

    private func describe(_ event: EngineEvent) -> String {
        let ad = event.adID.map { " \(externalID($0))" } ?? ""
        let slot = event.slot.map { " in \($0)" } ?? ""
        let network = event.network.map { " from \($0)" } ?? ""
        switch event.kind {
        case .adLoaded: return "ad\(ad) loaded\(slot)\(network)"
        case .adFailed:
            return "ad\(ad) failed\(slot)\(network): \(event.errorCode?.rawValue ?? "?") (network code \(event.networkCode ?? 0): \(event.message ?? ""))"
        case .adTimedOut: return "ad\(ad) timed out\(slot)\(network): \(event.message ?? "")"
        case .adExpired: return "ad\(ad) expired unshown\(slot)"
        case .adReplaced: return "ad\(ad) replaced by a fresher one\(slot)"
        case .adShown: return "ad\(ad) shown\(slot)\(network)"
        case .adEvent: return "ad\(ad) \(event.viewerEvent?.rawValue ?? event.message ?? "event")\(slot)"
        case .mediaCached: return "ad\(ad) media cached\(slot)"
        case .slotEmpty: return "slot \(event.slot ?? "?") ran dry: no valid ad ready"
        case .networkPaused: return "network \(event.network ?? "?") rate-limited us (network code \(event.networkCode ?? 0)): \(event.message ?? "")"
        case .callbackIgnored: return "plugin callback ignored\(slot)\(network): \(event.message ?? "")"
        case .contractViolation: return "contract violation\(network)\(slot): \(event.message ?? "")"
        case .session:
            let end = event.terminal ? " (session ended\(event.adFreePod ? ", ad-free pod earned" : ""))" : ""
            return "session\(ad)\(slot)\(network): \(event.sessionEvent ?? "?")\(event.message.map { ": \($0)" } ?? "")\(end)"
        case .rewardGranted: return "reward granted to \(event.userID ?? "?") for ad\(ad)\(slot)\(network): \(event.message ?? "")"
        }
    }

    func eventJSON(_ event: EngineEvent) -> JSONValue {
        var object: [String: JSONValue] = [
            "kind": .string(event.kind.rawValue), "time": .string(Self.timestamp(Date())),
        ]
        if let slot = event.slot { object["slot"] = .string(slot) }
        if let id = event.adID { object[event.kind == .session ? "session_id" : "ad_id"] = .string(externalID(id)) }
        if event.kind == .session {
            object["terminal"] = .bool(event.terminal)
            if event.terminal { object["ad_free_pod"] = .bool(event.adFreePod) }
        }
        if let network = event.network { object["network"] = .string(network) }
        if let code = event.errorCode { object["error"] = .string(code.rawValue) }
        if let code = event.networkCode { object["network_code"] = .int(code) }
        if let message = event.message { object["message"] = .string(message) }
        if let viewer = event.viewerEvent { object["viewer_event"] = .string(viewer.rawValue) }
        if let user = event.userID, !user.isEmpty { object["user_id"] = .string(user) }
        if let name = event.name { object["name"] = .string(name) }
        if let detail = event.detailJSON.flatMap({ JSONValue.parse(Data($0.utf8)) }) { object["detail"] = detail }
        return .object(object)
    }

    // MARK: Operations for the control API
    // Each hops onto the engine queue asynchronously and answers through its completion: the
    // Varlink queue never waits for the engine queue, so neither can deadlock the other.

    func slotStatuses(completion: @escaping @Sendable ([SlotStatus]) -> Void) {
        queue.async { [self] in completion(engine.slotStatuses(at: now())) }
    }

    /// Takes the best valid ad and waits (briefly) for its plugin to present it. If the plugin
    /// cannot, that ad ends and the next valid one is tried, in the same call (docs/rules.md, "Show").
    func show(slot: String, userID: String?, reward: RewardModel?, holder: UInt32?,
              completion: @escaping @Sendable (Result<ShownAd, ShowError>, Date?) -> Void) {
        queue.async { [self] in
            showNext(slot: slot, userID: userID, reward: reward, triesLeft: 10) { [self] result, expiresAt in
                if case .success(let ad) = result, let holder { holders[ad.id] = holder }
                completion(result, expiresAt)
            }
        }
    }

    private func showNext(slot: String, userID: String?, reward: RewardModel?, triesLeft: Int,
                          completion: @escaping @Sendable (Result<ShownAd, ShowError>, Date?) -> Void) {
        let (result, effects) = engine.show(slot: slot, userID: userID, reward: reward, now: now())
        // Everything but the ad_show this call waits for.
        apply(effects.filter { if case .show = $0 { false } else { true } })
        guard case .success(let ad) = result, let plugin = plugins[ad.network], triesLeft > 0 else {
            return completion(result, try? wallTime(result.get().expiresAt))
        }
        plugin.show(ad.id, userID: userID) { [self] shown in
            queue.async { [self] in
                if shown { return completion(.success(ad), wallTime(ad.expiresAt)) }
                apply(engine.displayFailed(ad.id, reason: "the plugin could not present it", now: now()))
                showNext(slot: slot, userID: userID, reward: reward, triesLeft: triesLeft - 1, completion: completion)
            }
        }
    }

    /// An on-demand Load: `accepted` answers at once (bad parameters), `completion` when the
    /// waterfall gave ads or ran out.
    /// `targeting` is the app's: its keys go over the slot's (which holds the daemon-wide ones).
    func load(slot: String, _ asked: LoadParameters, targeting: [String: JSONValue]?, holder: UInt32?,
              accepted: @escaping @Sendable (ShowError) -> Void,
              completion: @escaping @Sendable (Result<[ShownAd], LoadFailure>) -> Void) {
        queue.async { [self] in
            var parameters = asked
            if let targeting {
                let base = config.slots.first { $0.id == slot }.flatMap { JSONValue.parse(Data($0.targetingJSON.utf8))?.objectValue } ?? [:]
                parameters.targetingJSON = JSONValue.object(Targeting.merge(base, targeting)).jsonString
            }
            let request = nextRequest
            nextRequest += 1
            pendingLoads[request] = { [self] result in
                if case .success(let ads) = result, let holder { for ad in ads { holders[ad.id] = holder } }
                completion(result)
            }
            let (result, effects) = engine.load(slot: slot, parameters, request: request, now: now())
            if case .failure(let error) = result {
                pendingLoads[request] = nil
                accepted(error)
            }
            apply(effects)
        }
    }

    /// `denied` answers instead of `completion` when the ad was handed to another uid than `caller`'s.
    func report(_ event: ViewerEvent, adID: String, caller: UInt32?, denied: @escaping @Sendable (String) -> Void,
                completion: @escaping @Sendable (Result<Void, ReportError>) -> Void) {
        guard let id = internalID(adID) else {
            return completion(.failure(.adNotValid(reason: "\(adID) is not an ad id of this daemon run")))
        }
        queue.async { [self] in
            if let reason = holderRefusal(of: id, caller: caller) { return denied(reason) }
            let (result, effects) = engine.report(event, for: id, now: now())
            apply(effects)
            completion(result)
        }
    }

    /// InitInteractive: a new session in the slot, fetching at once; answers its id.
    func initInteractive(slot slotID: String, _ request: InteractiveRequest,
                         completion: @escaping @Sendable (Result<String, SessionCallError>) -> Void) {
        queue.async { [self] in
            guard let slot = config.slots.first(where: { $0.id == slotID }) else { return completion(.failure(.slotNotFound(slotID))) }
            let entry = slot.waterfall.first { plugins[$0.plugin]?.info.formats.contains(.interactive) == true }
            let id = engine.issueID()
            switch sessions.initiate(id, slot: slot, plugin: entry, request: request, now: now()) {
            case .success(let effects):
                logger.info("session \(externalID(id)) initialized in \(slotID) (\(request.slotType.rawValue)) with \(entry?.plugin ?? "?")",
                            metadata: ["slot": "\(slotID)", "session_id": "\(externalID(id))"])
                apply(effects)
                completion(.success(externalID(id)))
            case .failure(let error):
                completion(.failure(.session(error)))
            }
        }
    }

    enum SessionCall: String { case start, pause, resume, stop }

    /// Start, Pause, Resume or Stop on a session.
    func session(_ call: SessionCall, _ sessionID: String, completion: @escaping @Sendable (Result<Void, SessionCallError>) -> Void) {
        queue.async { [self] in
            guard let id = internalID(sessionID) else { return completion(.failure(.session(.sessionNotFound(0)))) }
            let result = switch call {
            case .start: sessions.start(id, now: now())
            case .pause: sessions.control(.pause, id)
            case .resume: sessions.control(.resume, id)
            case .stop: sessions.stop(id, now: now())
            }
            switch result {
            case .success(let effects):
                logger.debug("session \(sessionID): \(call.rawValue)", metadata: ["session_id": "\(sessionID)"])
                apply(effects)
                completion(.success(()))
            case .failure(let error):
                completion(.failure(.session(error)))
            }
        }
    }

    func recentEvents(slots: Set<String>?, limit: Int, completion: @escaping @Sendable ([JSONValue]) -> Void) {
        queue.async { [self] in
            let matching = recentEvents.filter { event in slots.map { s in event.slot.map(s.contains) ?? false } ?? true }
            completion(matching.suffix(limit).map(\.json))
        }
    }

    func subscribe(slots: Set<String>?, replier: VarlinkReplier) {
        queue.async { [self] in
            let id = nextSubscriber
            nextSubscriber += 1
            subscribers[id] = Subscriber(slots: slots, replier: replier)
            replier.onClose { [weak self] in
                guard let self else { return }
                queue.async { self.subscribers[id] = nil }
            }
            // The first reply says the subscription is in place: events from here on reach it.
            replier.reply(["event": ["kind": "subscribed", "time": .string(Self.timestamp(Date()))]], continues: true)
            // Rewards no app acknowledged yet are delivered again to the next subscriber of their slot.
            for row in (try? ledger?.unacknowledged(slots: slots)) ?? [] {
                replier.reply(["event": [
                    "kind": .string(EngineEvent.Kind.rewardGranted.rawValue), "name": "reward", "time": .string(Self.timestamp(row.grantedAt)),
                    "slot": .string(row.slot), "ad_id": .string(row.adID), "network": .string(row.network),
                    "user_id": .string(row.userID), "detail": rewardJSON(row), "message": "redelivered: not acknowledged yet",
                ]], continues: true)
            }
        }
    }

    /// Everything GetStatus reports; plugin counters are asked of each plugin's own queue.
    func status(completion: @escaping @Sendable (DaemonStatus) -> Void) {
        queue.async { [self] in
            let loaded = plugins.values.sorted { $0.info.name < $1.info.name }
            let base = DaemonStatus(
                version: Self.version, pid: getpid(), uptime: Date().timeIntervalSince(startedAt), socket: socketPath,
                configSource: config.source, connections: server?.connectionCounts ?? (0, 0, 0),
                limits: server?.limits ?? config.limits, showRate: config.showRate, showsRateLimited: showLimiter.withLock { $0.refused },
                plugins: loaded.map { .init(info: $0.info, refusal: nil, statsJSON: nil) }
                    + refusals.values.sorted { $0.name < $1.name }.map { .init(info: nil, refusal: $0, statsJSON: nil) },
                slots: engine.slotStatuses(at: now()), networks: engine.networkStatuses(at: now()),
                unattributedCallbacks: engine.unattributedCallbacks,
                subscribers: subscribers.count,
                sessions: Dictionary(uniqueKeysWithValues: config.slots.filter { $0.format == .interactive }.map { slot in
                    (slot.id, (sessions.liveCount(in: slot.id), sessions.counters[slot.id] ?? SessionCounters()))
                })
            )
            let group = DispatchGroup()
            let stats = StatsCollector()
            for plugin in loaded {
                group.enter()
                plugin.stats(timeout: .seconds(1)) { json in
                    stats.set(plugin.info.name, json)
                    group.leave()
                }
            }
            group.notify(queue: queue) {
                var status = base
                for i in status.plugins.indices {
                    if let name = status.plugins[i].info?.name { status.plugins[i].statsJSON = stats.get(name) }
                }
                completion(status)
            }
        }
    }

    // MARK: Helpers

    func now() -> Moment {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Moment(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }

    /// The wall-clock time of a monotonic moment, for apps (reads only the clock: any thread).
    func wallTime(_ moment: Moment) -> Date { Date(timeIntervalSinceNow: (moment - now()).seconds) }

    func externalID(_ id: AdID) -> String { "\(bootTag)-\(id)" }

    func internalID(_ external: String) -> AdID? {
        let parts = external.split(separator: "-")
        guard parts.count == 2, parts[0] == bootTag else { return nil }
        return AdID(parts[1])
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    /// One line: slots, ready ads, plugins.
    func summary() -> String {
        let statuses = engine.slotStatuses(at: now())
        let ready = statuses.map(\.ready).reduce(0, +)
        let wanted = statuses.map(\.target.count).reduce(0, +)
        return "\(statuses.count) slots, \(ready)/\(wanted) ads ready, \(plugins.count) plugins"
            + (refusals.isEmpty ? "" : ", \(refusals.count) refused")
    }
}

/// Why a session call was refused, as the control API names it.
enum SessionCallError: Error {
    case slotNotFound(String)
    case session(SessionError)
}

struct Subscriber {
    var slots: Set<String>?
    var replier: VarlinkReplier

    func wants(_ slot: String?) -> Bool {
        guard let slots else { return true }
        return slot.map(slots.contains) ?? false
    }
}

/// A snapshot for io.adorch.Manager.GetStatus.
struct DaemonStatus: Sendable {
    struct Plugin: Sendable {
        var info: PluginInfo?
        var refusal: PluginRefusal?
        var statsJSON: String?
    }

    var version: String
    var pid: Int32
    var uptime: Double
    var socket: String
    var configSource: String
    var connections: (open: Int, accepted: Int, refused: Int)
    var limits: VarlinkLimits
    var showRate: ShowRate
    var showsRateLimited: Int
    var plugins: [Plugin]
    var slots: [SlotStatus]
    var networks: [NetworkStatus]
    var unattributedCallbacks: Int
    var subscribers: Int
    /// Interactive slots: live sessions and counters.
    var sessions: [String: (live: Int, counters: SessionCounters)]
}

/// Plugin stats arriving from several plugin queues.
private final class StatsCollector: Sendable {
    private let values = LockedValue<[String: String]>([:])

    func set(_ name: String, _ json: String?) { values.withLock { $0[name] = json } }

    func get(_ name: String) -> String? { values.withLock { $0[name] } }
}

/// The state directory cannot be used: a config error (exit 78), never a crash.
public struct StateDirectoryError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "state directory \(path) \(reason) (set [daemon] state_dir or --state-dir)" }
}
