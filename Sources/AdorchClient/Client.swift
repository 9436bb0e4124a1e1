import AdorchLocking
@_exported import AdorchJSON
import AdorchPaths
import Foundation
import Logging
import Synchronization

/// A client of adorchd's io.adorch.Ads (and Manager.GetStatus and GetCaps): one connection
/// for calls, shared by every task, and one more per event stream (a Subscribe holds its
/// connection).
///
/// Waiting: a call waits `callTimeout` for its reply (Load its own timeout more), then fails
/// with `.timeout`; a cancelled task's call ends at once with `CancellationError`. Neither
/// sends a call that was not written yet; one already sent may have taken effect.
///
/// Reconnecting: a call finds the connection gone (the daemon restarted) and connects again,
/// retrying as `reconnect` says. Reads (ListSlots, ListRewards, ListEvents, GetStatus,
/// GetCaps) whose connection broke after they were sent are sent again on the new one; any
/// other call that was sent fails with `.connectionLost`, as it may have taken effect. Event
/// streams subscribe again and go on (`events`).
public final class Client: Sendable {
    /// The socket: the argument, else `$ADORCH_SOCKET`, else this user's daemon socket if it
    /// exists, else the system service's.
    public let socketPath: String
    public let reconnect: ReconnectPolicy
    /// How long a call waits for its reply (nil: for ever); also how long the SDK layer waits
    /// for a new subscription's answer.
    public let callTimeout: Duration?
    public let logger: Logger
    private let connection = LockedValue<Connection?>(nil)
    /// Whether a connection was ever made: from then on, a failed connect is a daemon away
    /// (restarting), retried as `reconnect` says, by calls and new event streams alike.
    private let wasConnected = Atomic<Bool>(false)
    /// Whether a task logs its retries: one at a time, so a restart is one line per retry,
    /// however many calls and streams wait for it.
    private let retriesLogged = Atomic<Bool>(false)
    /// Set by `close`: from then on no connection is made and every call fails with `.closed`.
    private let isClosed = Atomic<Bool>(false)
    /// The tasks feeding the open event streams, which `close` ends.
    private let streams = LockedValue<[UUID: Task<Void, Never>]>([:])

    /// How long a call waits for its reply unless told otherwise (the Python client's too).
    public static let defaultCallTimeout: Duration = .seconds(30)
    /// The longest a Load may take in the daemon (LoadBounds.timeoutMilliseconds in
    /// Sources/AdorchEngine/LoadBounds.swift): a Load without `timeoutMs` runs to its slot's
    /// load_timeout_ms, which the client does not know, so it waits this much more.
    static let longestLoad: Duration = .seconds(60)

    public init(socketPath: String? = nil, reconnect: ReconnectPolicy = ReconnectPolicy(),
                callTimeout: Duration? = Client.defaultCallTimeout, logger: Logger = Logger(label: "io.adorch.client")) {
        self.socketPath = socketPath ?? Self.defaultSocketPath()
        self.reconnect = reconnect
        self.callTimeout = callTimeout
        self.logger = logger
    }

    deinit { connection.withLock { $0?.close() } }

    /// The system service's socket (`SocketPath.system`).
    public static var systemSocket: String { SocketPath.system }

    /// The socket a client made without one uses: the rule adorchctl and the C and Python
    /// libraries follow too (`SocketPath.client`).
    public static func defaultSocketPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        SocketPath.client(environment: environment)
    }

    /// Closes the client for good, from any task (as the Python client's `close`): a call in
    /// flight ends with `.closed` (one waiting for a restarting daemon, after its current retry
    /// delay), every later call fails with it, no connection is made again, and every event
    /// stream of the client ends (so do the SDK objects' callbacks and events).
    public func close() {
        isClosed.store(true, ordering: .relaxed)
        let tasks = streams.withLock { streams in
            defer { streams = [:] }
            return Array(streams.values)
        }
        for task in tasks { task.cancel() }
        connection.withLock { connection in
            connection?.close()
            connection = nil
        }
    }

    private var closed: AdorchError { AdorchError(.closed, message: "the client of \(socketPath) was closed") }

    /// `.closed` once the client is closed.
    var closedError: AdorchError? { isClosed.load(ordering: .relaxed) ? closed : nil }

    // MARK: io.adorch.Ads

    /// The slots and their ready ads; each slot's `capped` says whether a frequency rule holds a
    /// Show for `userID` (nil: for a Show without one) and until when.
    public func listSlots(userID: String? = nil) async throws -> [Slot] {
        var parameters: [String: JSONValue] = [:]
        if let userID { parameters["user_id"] = .string(userID) }
        return try decode([Slot].self, from: try await read("io.adorch.Ads.ListSlots", parameters)["slots"] ?? [])
    }

    /// Takes the best valid ad of `slot` and has its network present it. A rewarded slot needs
    /// a `userID`; `reward` overrides the slot's reward model; `privacy`, for this Show only,
    /// goes over what `setPrivacy` set.
    public func show(slot: String, userID: String? = nil, reward: RewardModel? = nil, privacy: Privacy? = nil) async throws -> Ad {
        var parameters: [String: JSONValue] = ["slot": .string(slot)]
        if let userID { parameters["user_id"] = .string(userID) }
        if let reward { parameters["reward"] = reward.json }
        if let privacy { parameters["privacy"] = privacy.json }
        return try decode(Ad.self, from: try await write("io.adorch.Ads.Show", parameters)["ad"] ?? .null)
    }

    public func report(adID: String, event: ViewerEvent) async throws {
        _ = try await write("io.adorch.Ads.Report", ["ad_id": .string(adID), "event": .string(event.rawValue)])
    }

    /// Loads ads of a banner, splash or native slot now; nil parameters take the slot's.
    /// `privacy`, for this Load only, goes over what `setPrivacy` set for the app.
    public func load(slot: String, count: Int? = nil, width: Int? = nil, height: Int? = nil, timeoutMs: Int? = nil,
                     targeting: [String: JSONValue]? = nil, privacy: Privacy? = nil) async throws -> [Ad] {
        var parameters: [String: JSONValue] = ["slot": .string(slot)]
        for (key, value) in [("count", count), ("width", width), ("height", height), ("timeout_ms", timeoutMs)] {
            if let value { parameters[key] = .int(Int64(value)) }
        }
        if let targeting { parameters["targeting"] = .object(targeting) }
        if let privacy { parameters["privacy"] = privacy.json }
        let extra = timeoutMs.map { Duration.milliseconds($0) } ?? Self.longestLoad
        return try decode([Ad].self, from: try await call("io.adorch.Ads.Load", parameters, idempotent: false, extraWait: extra)["ads"] ?? [])
    }

    public func listRewards(userID: String? = nil, since: String? = nil, after: String? = nil, limit: Int? = nil) async throws -> RewardPage {
        var parameters: [String: JSONValue] = [:]
        if let userID { parameters["user_id"] = .string(userID) }
        if let since { parameters["since"] = .string(since) }
        if let after { parameters["after"] = .string(after) }
        if let limit { parameters["limit"] = .int(Int64(limit)) }
        let reply = try await read("io.adorch.Ads.ListRewards", parameters)
        return RewardPage(rewards: try decode([Reward].self, from: reply["rewards"] ?? []), more: reply["more"]?.boolValue ?? false)
    }

    /// The app has credited this reward to its user: the daemon stops offering it. The
    /// library never calls it by itself.
    public func ackReward(_ transID: String) async throws {
        _ = try await write("io.adorch.Ads.AckReward", ["trans_id": .string(transID)])
    }

    /// A fresh interactive session (it starts fetching at once); returns its id.
    public func initInteractive(slot: String, creativeURL: String, adParameters: [String: JSONValue], slotType: SlotType) async throws -> String {
        let reply = try await write("io.adorch.Ads.InitInteractive", [
            "slot": .string(slot), "creative_url": .string(creativeURL), "ad_parameters": .object(adParameters),
            "slot_type": .string(slotType.rawValue),
        ])
        guard let id = reply["session_id"]?.stringValue else { throw AdorchError(.malformedReply, message: "InitInteractive: no session_id") }
        return id
    }

    public func start(sessionID: String) async throws { _ = try await write("io.adorch.Ads.Start", ["session_id": .string(sessionID)]) }
    public func pause(sessionID: String) async throws { _ = try await write("io.adorch.Ads.Pause", ["session_id": .string(sessionID)]) }
    public func resume(sessionID: String) async throws { _ = try await write("io.adorch.Ads.Resume", ["session_id": .string(sessionID)]) }
    public func stop(sessionID: String) async throws { _ = try await write("io.adorch.Ads.Stop", ["session_id": .string(sessionID)]) }

    /// Sets what the app's viewers said about their privacy (docs/privacy.md, "Setting a
    /// viewer's state"): for `userID`, or with nil for the app as a whole; nil `privacy`
    /// clears it. Returns once the daemon has it on disk; a string that does not decode is
    /// `.invalidParameter` naming it (`privacy.tc_string`), and nothing changes. Sent again
    /// after a lost connection: setting the same twice is setting it once.
    public func setPrivacy(_ privacy: Privacy?, userID: String? = nil) async throws {
        var parameters: [String: JSONValue] = [:]
        if let userID { parameters["user_id"] = .string(userID) }
        if let privacy { parameters["privacy"] = privacy.json }
        _ = try await call("io.adorch.Ads.SetPrivacy", parameters, idempotent: true)
    }

    /// What applies to the app's calls for `userID` (nil: for calls without one), and whether
    /// it is the user's record, the app's or none.
    public func getPrivacy(userID: String? = nil) async throws -> (privacy: Privacy?, source: PrivacySource) {
        var parameters: [String: JSONValue] = [:]
        if let userID { parameters["user_id"] = .string(userID) }
        let reply = try await read("io.adorch.Ads.GetPrivacy", parameters)
        let privacy = try reply["privacy"].flatMap { value throws(AdorchError) -> Privacy? in
            if case .null = value { return nil }
            return try decode(Privacy.self, from: value)
        }
        guard let source = reply["source"]?.stringValue.flatMap(PrivacySource.init) else {
            throw AdorchError(.malformedReply, message: "GetPrivacy: no known source in \(reply)")
        }
        return (privacy, source)
    }

    public func listEvents(slots: [String]? = nil, limit: Int? = nil) async throws -> [Event] {
        var parameters: [String: JSONValue] = [:]
        if let slots { parameters["slots"] = .array(slots.map { .string($0) }) }
        if let limit { parameters["limit"] = .int(Int64(limit)) }
        return try decode([Event].self, from: try await read("io.adorch.Ads.ListEvents", parameters)["events"] ?? [])
    }

    /// The events of `slots` (all when nil) as they happen, starting with one `subscribed`,
    /// on a connection of their own. When the daemon restarts, the stream subscribes again
    /// (logged) and goes on: the new `subscribed` is not passed on, and the rewards the daemon
    /// redelivers are (credit each trans_id once). It ends with an error only when the
    /// daemon cannot be reached within the reconnect policy, or refuses the subscription.
    public func events(slots: [String]? = nil) -> AsyncThrowingStream<Event, any Error> {
        var parameters: [String: JSONValue] = [:]
        if let slots { parameters["slots"] = .array(slots.map { .string($0) }) }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Event.self)
        if let closedError {
            continuation.finish(throwing: closedError)
            return stream
        }
        let key = UUID()
        let task = streams.withLock { [parameters] streams in
            let task = Task { [self] in
                do {
                    try await subscribe(parameters, into: continuation)
                } catch {
                    continuation.finish(throwing: error)
                }
                _ = self.streams.withLock { $0.removeValue(forKey: key) }
            }
            streams[key] = task
            return task
        }
        continuation.onTermination = { _ in task.cancel() }
        // Closed meanwhile: close did not see this stream.
        if isClosed.load(ordering: .relaxed) { task.cancel() }
        // Close is final for the reader too: events that arrived before close and wait in the
        // stream's buffer are not handed out after it.
        let pump = EventPump(stream)
        return AsyncThrowingStream { [self] in
            isClosed.load(ordering: .relaxed) ? nil : try await pump.next()
        }
    }

    // MARK: io.adorch.Manager

    public func getStatus() async throws -> Status {
        try decode(Status.self, from: .object(try await read("io.adorch.Manager.GetStatus")))
    }

    /// Every frequency rule of `slot` and its networks, with what each counts for `userID`
    /// (nil: for Shows without one) now and until when it holds: what `adorchctl caps` prints.
    public func getCaps(slot: String, userID: String? = nil) async throws -> [CapRule] {
        var parameters: [String: JSONValue] = ["slot": .string(slot)]
        if let userID { parameters["user_id"] = .string(userID) }
        return try decode([CapRule].self, from: try await read("io.adorch.Manager.GetCaps", parameters)["rules"] ?? [])
    }

    // MARK: Any method

    /// A call by name, for what the typed methods do not cover (org.varlink.service...).
    /// `idempotent`: whether it may be sent again after its connection broke (reads only).
    public func call(_ method: String, _ parameters: [String: JSONValue] = [:], idempotent: Bool) async throws -> [String: JSONValue] {
        try await call(method, parameters, idempotent: idempotent, extraWait: .zero)
    }

    /// `extraWait`: how much longer than `callTimeout` the reply may take (Load's own deadline).
    private func call(_ method: String, _ parameters: [String: JSONValue], idempotent: Bool, extraWait: Duration) async throws -> [String: JSONValue] {
        var retried = false
        while true {
            try Task.checkCancellation()
            let connection = try await connected()
            do {
                let reply = try await connection.call(method, parameters, timeout: callTimeout.map { $0 + extraWait })
                if let name = reply.error { throw AdorchError(name: name, parameters: reply.parameters) }
                return reply.parameters
            } catch where isClosed.load(ordering: .relaxed) {
                throw closed
            } catch let error as Connection.NotSent {
                // The daemon went away before this call reached it: any call may go to the next one.
                connection.close()
                guard !retried else { throw error.reason }
                retried = true
                logger.notice("adorch: connection to \(socketPath) ended before \(method) was sent, sending it on a new connection")
            } catch let error as AdorchError where error.kind == .connectionLost(method: method) {
                // Kept, ended, so that the next call reconnects with retries.
                connection.close()
                guard idempotent, !retried else { throw error }
                retried = true
                logger.notice("adorch: connection lost during \(method), sending it again on a new connection")
            }
        }
    }

    private func read(_ method: String, _ parameters: [String: JSONValue] = [:]) async throws -> [String: JSONValue] {
        try await call(method, parameters, idempotent: true)
    }

    private func write(_ method: String, _ parameters: [String: JSONValue]) async throws -> [String: JSONValue] {
        try await call(method, parameters, idempotent: false)
    }

    // MARK: Connections

    /// The live call connection, or a new one, made under the lock (a connect does not block),
    /// so that many tasks calling at once share one; a daemon away is then waited for with
    /// retries, as the policy says.
    private func connected() async throws -> Connection {
        do {
            return try connection.withLock { connection throws(AdorchError) in
                guard !isClosed.load(ordering: .relaxed) else { throw closed }
                if let current = connection, !current.isEnded { return current }
                let fresh = try Connection(path: socketPath)
                wasConnected.store(true, ordering: .relaxed)
                connection = fresh
                return fresh
            }
        } catch where !wasConnected.load(ordering: .relaxed) || error.kind == .closed {
            throw error
        } catch {}
        let fresh = try await connect()
        return try connection.withLock { connection throws(AdorchError) in
            guard !isClosed.load(ordering: .relaxed) else {
                fresh.close()
                throw closed
            }
            if let other = connection, !other.isEnded {
                // Another task reconnected meanwhile: one connection is enough.
                fresh.close()
                return other
            }
            connection = fresh
            return fresh
        }
    }

    /// Connects; once the client was connected, again and again as the policy says while the
    /// daemon is away (its socket missing or refusing), one log line per retry. The first
    /// connect of all fails at once: no daemon there is a setup error, not a restart.
    func connect() async throws -> Connection {
        let retrying = wasConnected.load(ordering: .relaxed)
        let clock = ContinuousClock()
        let deadline = clock.now + reconnect.maxWait
        var delay = reconnect.firstDelay
        var attempt = 0
        var logging = false
        defer { if logging { retriesLogged.store(false, ordering: .relaxed) } }
        while true {
            guard !isClosed.load(ordering: .relaxed) else { throw closed }
            do {
                let connection = try Connection(path: socketPath)
                wasConnected.store(true, ordering: .relaxed)
                if logging { logger.notice("adorch: reconnected to \(socketPath) after \(attempt) retries") }
                return connection
            } catch {
                guard retrying, clock.now + delay <= deadline else { throw error }
                attempt += 1
                if !logging { logging = retriesLogged.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged }
                if logging { logger.notice("adorch: daemon at \(socketPath) not reachable (\(error.message)); retry \(attempt) in \(delay)") }
                try await Task.sleep(for: delay)
                delay = min(delay * 2, reconnect.maxDelay)
            }
        }
    }

    /// One subscription after the other until the consumer stops: each time the daemon goes
    /// away (its connection ends, or it says ShuttingDown), subscribe again. A daemon that
    /// takes the connection but ends it before answering (still stopping) is asked again
    /// after the policy's delays, within its maxWait, so the loop never spins.
    private func subscribe(_ parameters: [String: JSONValue], into continuation: AsyncThrowingStream<Event, any Error>.Continuation) async throws {
        let method = "io.adorch.Ads.Subscribe"
        // Whether the app has its `subscribed`: the next ones are swallowed, not the first.
        var subscribed = false
        var unanswered: (since: ContinuousClock.Instant, delay: Duration)?
        while !Task.isCancelled {
            let connection = try await connect()
            defer { connection.close() }
            var answered = false
            try await withTaskCancellationHandler {
                for await result in connection.stream(method, parameters) {
                    guard !Task.isCancelled else { return }
                    let reply: Reply
                    switch result {
                    case .success(let success): reply = success
                    case .failure(let error) where error.kind == .connectionLost(method: method):
                        logger.notice("adorch: event stream lost its connection to \(socketPath), subscribing again")
                        return
                    case .failure(let error): throw error
                    }
                    if let name = reply.error {
                        let error = AdorchError(name: name, parameters: reply.parameters)
                        guard error.kind == .shuttingDown else { throw error }
                        logger.notice("adorch: daemon at \(socketPath) shutting down, event stream subscribing again")
                        return
                    }
                    let event = try decode(Event.self, from: reply.parameters["event"] ?? .null)
                    if event.kind == EventKind.subscribed {
                        answered = true
                        if subscribed {
                            logger.notice("adorch: event stream subscribed again (\(event.rewardsWaiting ?? 0) more rewards waiting than redelivered)")
                            continue
                        }
                        subscribed = true
                    }
                    continuation.yield(event)
                }
            } onCancel: {
                connection.close()
            }
            if answered {
                unanswered = nil
            } else if !Task.isCancelled {
                let now = ContinuousClock.now
                let wait = unanswered ?? (now, reconnect.firstDelay)
                guard now + wait.delay <= wait.since + reconnect.maxWait else {
                    throw AdorchError(.connectionLost(method: method), message: "the daemon at \(socketPath) did not answer Subscribe within \(reconnect.maxWait)")
                }
                try await Task.sleep(for: wait.delay)
                unanswered = (wait.since, min(wait.delay * 2, reconnect.maxDelay))
            }
        }
        continuation.finish()
    }
}

/// The reading end of one event stream, for `events`: an actor, since the stream's iterator
/// is state the reader's successive calls share.
private actor EventPump {
    private var iterator: AsyncThrowingStream<Event, any Error>.Iterator

    init(_ stream: AsyncThrowingStream<Event, any Error>) { iterator = stream.makeAsyncIterator() }

    func next() async throws -> Event? {
        var current = iterator
        defer { iterator = current }
        return try await current.next(isolation: self)
    }
}
