/// Interactive ad sessions (docs/rules.md, "Interactive sessions"): init, start, pause, resume
/// and stop, the renderer's events, and the bookkeeping renderers leave to every app: exactly
/// one terminal event per session, the ad-free-pod credit carried on it, and the fetch and
/// start timeouts.
///
/// Pure like `Engine`: every input carries its time, every output is an `Effect`. Session ids
/// come from the engine's id sequence (`Engine.issueID`), so a plugin report names one thing.
public struct InteractiveSessions: Sendable {
    /// Per slot, since the daemon started.
    public private(set) var counters: [String: SessionCounters] = [:]
    private var live: [AdID: Session] = [:]
    /// Ended sessions, remembered for a while to tell a report that crossed the stop from a
    /// plugin reporting after its object was destroyed.
    private var ended: [AdID: EndedSession] = [:]
    private let memory: Duration
    /// At most this many live sessions in all: each holds a plugin object.
    public let maxLive: Int
    /// A session whose renderer never sends a terminal event ends after this long.
    public let maxLife: Duration
    /// What one uid may hold: live sessions, and how long one may wait unstarted.
    public var budgets = UIDBudgets()
    /// What a viewer who said little or nothing allows: a session's class (docs/privacy.md, "Inventory").
    public var privacy = PrivacySettings()

    public init(memory: Duration = .seconds(600), maxLive: Int = 1000, maxLife: Duration = .seconds(3600)) {
        self.memory = memory
        self.maxLive = maxLive
        self.maxLife = maxLife
    }

    /// Whether this id is a session's, live or recently ended (its reports belong here).
    public func owns(_ id: AdID) -> Bool { live[id] != nil || ended[id] != nil }

    /// Live sessions of a slot.
    public func liveCount(in slot: String) -> Int { live.values.filter { $0.slot == slot }.count }

    /// The slot of a live session, whose access rules apply to every call on it.
    public func slot(of id: AdID) -> String? { live[id]?.slot }

    // MARK: Calls from apps

    /// InitInteractive: a fresh plugin object that starts fetching at once. `plugin` is the
    /// first loaded plugin of the slot's waterfall that runs interactive sessions, if any.
    /// The session is `owner`'s: only it (and root) may start, pause, resume or stop it.
    /// `viewer`: their privacy signals (nil: they set none); the session is fetched under the
    /// best class they allow from the plugin's network, and refused when they allow none.
    public mutating func initiate(_ id: AdID, slot: SlotConfig, plugin: WaterfallEntry?, viewer: ViewerPrivacy?, request: InteractiveRequest,
                                  owner: UInt32?, now: Moment) -> Result<[Effect], SessionError> {
        guard slot.format == .interactive else {
            return .failure(.invalidParameter(name: "slot", reason: "\(slot.id) is \(slot.format.slotInWords): \(slot.format.howToUse)"))
        }
        guard let entry = plugin else {
            return .failure(.unavailable(slot: slot.id, reason: "no plugin of \(slot.id)'s waterfall that runs interactive sessions is loaded"))
        }
        if let owner, UIDBudgets.bind(owner) {
            let own = live.values.count { $0.owner == owner }
            guard own < budgets.maxSessions else { return .failure(.tooManySessions(uid: owner, live: own, limit: budgets.maxSessions)) }
        }
        guard live.count < maxLive else {
            return .failure(.unavailable(slot: slot.id, reason: "\(maxLive) sessions are live already: stop one first"))
        }
        guard let classed = privacy.loadPrivacy(for: viewer, from: entry.privacy) else {
            return .failure(.unavailable(slot: slot.id, reason: "\(entry.plugin) may serve this viewer no ad their privacy signals allow"))
        }
        live[id] = Session(slot: slot.id, plugin: entry.plugin, owner: owner, fetchTimeout: slot.fetchTimeout, startTimeout: slot.startTimeout,
                           fetchDeadline: now + slot.fetchTimeout, unstartedDeadline: now + budgets.unstartedSessionTimeout,
                           endsAt: now + maxLife)
        counters[slot.id, default: SessionCounters()].initiated += 1
        var fetching = entry
        fetching.timeout = slot.fetchTimeout
        return .success([.load(LoadOrder(
            adID: id, plugin: entry.plugin, slotID: slot.id, format: .interactive, entry: fetching,
            deadline: now + slot.fetchTimeout, reward: nil, testMode: slot.testMode, targetingJSON: slot.targetingJSON,
            interactive: request, privacy: classed
        ))])
    }

    /// Start: show the unit as soon as the fetch has completed (now, or when it does). The
    /// start timeout runs from here.
    public mutating func start(_ id: AdID, by caller: UInt32?, now: Moment) -> Result<[Effect], SessionError> {
        if let refusal = refusal(of: id, by: caller) { return .failure(refusal) }
        let session = live[id]!
        guard !session.startAsked else {
            return .failure(.invalidParameter(name: "session_id", reason: "the session was started already"))
        }
        live[id]!.startAsked = true
        live[id]!.unstartedDeadline = nil
        live[id]!.startDeadline = now + session.startTimeout
        return .success(session.fetchDeadline == nil ? sendStart(id) : [])
    }

    /// Pause or resume; asking for the state the session is already in changes nothing.
    public mutating func control(_ control: SessionControl, _ id: AdID, by caller: UInt32?) -> Result<[Effect], SessionError> {
        if let refusal = refusal(of: id, by: caller) { return .failure(refusal) }
        let session = live[id]!
        let pausing = control == .pause
        guard session.paused != pausing else { return .success([]) }
        live[id]!.paused = pausing
        return .success([.controlSession(id, plugin: session.plugin, control)])
    }

    /// Stop: the session and its plugin object end now; the session's last event is `stopped`.
    public mutating func stop(_ id: AdID, by caller: UInt32?, now: Moment) -> Result<[Effect], SessionError> {
        if let refusal = refusal(of: id, by: caller) { return .failure(refusal) }
        counters[live[id]!.slot, default: SessionCounters()].stopped += 1
        return .success(end(id, as: "stopped", detail: nil, now: now))
    }

    // MARK: Reports and time

    /// A plugin reported on a session (the caller checked `owns`).
    public mutating func pluginReported(_ report: PluginReport, for id: AdID, from plugin: String, now: Moment) -> [Effect] {
        if report == .destroyed {
            ended[id]?.destroyConfirmed = true
            return []
        }
        guard let session = live[id], session.plugin == plugin else { return late(report, for: id, from: plugin) }
        let fetching = session.fetchDeadline != nil
        switch report {
        case .loaded(let payload, _, _, _, _, _, _) where fetching:
            live[id]!.fetchDeadline = nil
            var effects = [event("fetch_complete", id, detail: payload)]
            if session.startAsked { effects += sendStart(id) }
            return effects
        case .loadedInvalid(let reason) where fetching:
            counters[session.slot, default: SessionCounters()].contractViolations += 1
            return terminalError(id, message: "plugin_fault: \(reason)", code: .pluginFault, now: now)
        case .failed(.noFill, _, let message) where fetching:
            return end(id, as: "no_ads_available", detail: nil, message: message, now: now)
        case .failed(let code, let networkCode, let message) where fetching:
            return terminalError(id, message: "\(code.rawValue) (network code \(networkCode)): \(message)", code: code, now: now)
        case .other(let name, let detail) where Self.terminalNames.contains(name):
            return end(id, as: name, detail: detail, now: now)
        case .other("started", let detail):
            guard session.startSent else { return ignored(id, session, why: "started before the host started the session") }
            live[id]!.started = true
            live[id]!.startDeadline = nil
            return [event("started", id, detail: detail)]
        case .other(let name, let detail):
            if name == "ad_free_pod" {
                live[id]!.adFreePod = true
                counters[session.slot, default: SessionCounters()].adFreePods += 1
            }
            return [event(name, id, detail: detail)]
        case .loaded, .loadedInvalid, .failed:
            return ignored(id, session, why: "a second fetch completion")
        case .mediaCached, .reward, .destroyed:
            return ignored(id, session, why: "an ad report that does not apply to a session")
        }
    }

    /// Time passed: fetch and start timeouts that are due end their sessions.
    public mutating func advance(to now: Moment) -> [Effect] {
        var effects: [Effect] = []
        for (id, session) in live.sorted(by: { $0.key < $1.key }) {
            if let deadline = session.fetchDeadline, deadline <= now {
                counters[session.slot, default: SessionCounters()].fetchTimeouts += 1
                effects += terminalError(id, message: "fetch timeout: no fetch_complete within \(session.fetchTimeout) of InitInteractive",
                                         code: .timeout, now: now)
            } else if let deadline = session.startDeadline, deadline <= now {
                counters[session.slot, default: SessionCounters()].startTimeouts += 1
                effects += terminalError(id, message: "start timeout: no started within \(session.startTimeout) of Start",
                                         code: .timeout, now: now)
            } else if let deadline = session.unstartedDeadline, deadline <= now {
                counters[session.slot, default: SessionCounters()].unstartedTimeouts += 1
                effects += terminalError(id, message: "unstarted timeout: no Start within \(budgets.unstartedSessionTimeout) of InitInteractive",
                                         code: .timeout, now: now)
            } else if session.endsAt <= now {
                effects += terminalError(id, message: "the renderer sent no terminal event within \(maxLife)", code: .timeout, now: now)
            }
        }
        ended = ended.filter { $0.value.forgetAt > now }
        return effects
    }

    /// The plugin refused to start the session (its ad_show failed).
    public mutating func startRefused(_ id: AdID, now: Moment) -> [Effect] {
        guard let session = live[id], session.startSent, !session.started else { return [] }
        return terminalError(id, message: "the plugin could not start the session", code: .notReady, now: now)
    }

    /// Sessions whose slot or plugin is gone end (reload, shutdown), with the reason.
    public mutating func endAll(where shouldEnd: (_ slot: String, _ plugin: String) -> Bool, reason: String, now: Moment) -> [Effect] {
        live.filter { shouldEnd($0.value.slot, $0.value.plugin) }.keys.sorted().flatMap { terminalError($0, message: reason, code: .internal, now: now) }
    }

    /// The next moment at which `advance` has something to do: `now` if something fell due
    /// since the last advance (skipping it would leave it waiting for an unrelated wakeup).
    public func nextWakeup(after now: Moment) -> Moment? {
        let moments = live.values.flatMap { [$0.fetchDeadline, $0.startDeadline, $0.unstartedDeadline, $0.endsAt].compactMap { $0 } } + ended.values.map(\.forgetAt)
        return moments.min().map { max($0, now) }
    }

    // MARK: Helpers

    /// A session belongs to the uid that made it: another uid's call on it is refused. Root,
    /// the operator, may act on any session.
    private func refusal(of id: AdID, by caller: UInt32?) -> SessionError? {
        guard let session = live[id] else { return .sessionNotFound(id) }
        return caller == session.owner || caller == 0 ? nil : .notOwner(session.owner)
    }

    /// The renderer's terminal events (docs/rules.md, "Interactive sessions"); `stopped` (the
    /// app's own Stop) ends a session too.
    static let terminalNames: Set<String> = ["completed", "no_ads_available", "error"]

    private mutating func sendStart(_ id: AdID) -> [Effect] {
        live[id]!.startSent = true
        return [.startSession(id, plugin: live[id]!.plugin)]
    }

    private mutating func terminalError(_ id: AdID, message: String, code: AdErrorCode, now: Moment) -> [Effect] {
        end(id, as: "error", detail: nil, message: message, code: code, now: now)
    }

    /// The one terminal event: the session is gone after it, its object destroyed.
    private mutating func end(_ id: AdID, as name: String, detail: String?, message: String? = nil, code: AdErrorCode? = nil,
                              now: Moment) -> [Effect] {
        guard let session = live.removeValue(forKey: id) else { return [] }
        ended[id] = EndedSession(plugin: session.plugin, slot: session.slot, owner: session.owner, forgetAt: now + memory)
        switch name {
        case "completed": counters[session.slot, default: SessionCounters()].completed += 1
        case "no_ads_available": counters[session.slot, default: SessionCounters()].noAds += 1
        case "error": counters[session.slot, default: SessionCounters()].errors += 1
        default: break
        }
        var terminal = EngineEvent(.session, slot: session.slot, adID: id, network: session.plugin, errorCode: code, message: message,
                                   holder: session.owner)
        terminal.sessionEvent = name
        terminal.detailJSON = detail
        terminal.terminal = true
        terminal.adFreePod = session.adFreePod
        return [.destroy(id, plugin: session.plugin), .emit(terminal)]
    }

    private func event(_ name: String, _ id: AdID, detail: String?) -> Effect {
        let session = live[id]!
        var event = EngineEvent(.session, slot: session.slot, adID: id, network: session.plugin, holder: session.owner)
        event.sessionEvent = name
        event.detailJSON = detail
        return .emit(event)
    }

    private mutating func ignored(_ id: AdID, _ session: Session, why: String) -> [Effect] {
        counters[session.slot, default: SessionCounters()].ignoredCallbacks += 1
        return [.emit(EngineEvent(.callbackIgnored, slot: session.slot, adID: id, network: session.plugin,
                                  message: "session report ignored: \(why)", holder: session.owner))]
    }

    private mutating func late(_ report: PluginReport, for id: AdID, from plugin: String) -> [Effect] {
        guard let memory = ended[id], memory.plugin == plugin else {
            return [.emit(EngineEvent(.callbackIgnored, adID: id, network: plugin, message: "report for session \(id), which is not this plugin's, ignored"))]
        }
        // Sent before the plugin's ad_destroy returned: it crossed the stop, which is allowed.
        guard memory.destroyConfirmed else { return [] }
        counters[memory.slot, default: SessionCounters()].ignoredCallbacks += 1
        return [.emit(EngineEvent(.callbackIgnored, slot: memory.slot, adID: id, network: plugin,
                                  message: "report after the session ended ignored", holder: memory.owner))]
    }
}

/// Why a session call was refused.
public enum SessionError: Error, Equatable, Sendable {
    case sessionNotFound(AdID)
    case invalidParameter(name: String, reason: String)
    /// No session can be made in this slot now.
    case unavailable(slot: String, reason: String)
    /// The session belongs to another uid (its maker, nil if unknown).
    case notOwner(UInt32?)
    /// `uid` has `live` sessions, its `limit` (`UIDBudgets.maxSessions`).
    case tooManySessions(uid: UInt32, live: Int, limit: Int)
}

/// What happened to a slot's interactive sessions since the daemon started.
public struct SessionCounters: Sendable, Equatable {
    public var initiated = 0
    public var completed = 0
    public var noAds = 0
    public var errors = 0
    public var stopped = 0
    public var fetchTimeouts = 0
    public var startTimeouts = 0
    /// Sessions never started within `UIDBudgets.unstartedSessionTimeout`.
    public var unstartedTimeouts = 0
    public var adFreePods = 0
    public var ignoredCallbacks = 0
    public var contractViolations = 0
    public init() {}
}

private struct Session: Sendable {
    var slot: String
    var plugin: String
    /// The uid that made it (InitInteractive).
    var owner: UInt32?
    var fetchTimeout: Duration
    var startTimeout: Duration
    /// Until fetch_complete; nil after it.
    var fetchDeadline: Moment?
    /// From Start until started.
    var startDeadline: Moment?
    /// Until Start.
    var unstartedDeadline: Moment?
    /// The longest a session lives.
    var endsAt: Moment
    var startAsked = false
    var startSent = false
    var started = false
    var paused = false
    var adFreePod = false
}

private struct EndedSession: Sendable {
    var plugin: String
    var slot: String
    /// Its maker: a late report on it is that uid's event too.
    var owner: UInt32?
    var forgetAt: Moment
    var destroyConfirmed = false
}
