import CGlibcMalloc
import Dispatch
import Foundation
import Logging

/// Handles calls to the server's own interfaces; replies go through the replier.
public typealias VarlinkHandler = @Sendable (VarlinkCall, VarlinkReplier) -> Void

/// A Varlink server on a Unix stream socket: its sockets are watched by a `SocketWatcher`,
/// and everything else happens on its serial queue.
///
/// @unchecked Sendable: it owns its serial queue, and every mutable field (the listener,
/// the connections, the counts) is touched only on that queue.
public final class VarlinkServer: @unchecked Sendable {
    /// The uid a connection is counted under when the kernel does not say whose it is.
    static let unknownUID = UInt32.max
    /// Connections accepted in one turn: a crowd connecting at once waits behind the calls
    /// of those already connected.
    static let acceptsPerTurn = 64
    /// Freed buffers past this much are handed back to the system (malloc_trim) at the next
    /// sweep: glibc would keep them, and the daemon's footprint would stay at an attack's peak.
    static let trimAfterFreeing = 1 << 20
    /// And once more this long after such a trim: objects made during an attack (the newest
    /// events, say) pin pages among the freed ones, and are themselves gone by then.
    static let trimAgainAfter: Duration = .seconds(5)

    public let info: VarlinkServiceInfo
    public let limits: VarlinkLimits
    /// What the deadlines read the time from.
    let clock: VarlinkClock
    let queue = DispatchQueue(label: "adorch.varlink")
    let watcher: SocketWatcher
    private let logger: Logger
    private let handler: VarlinkHandler
    private let interfaces: [String: VarlinkInterface]
    private var listenFD: Int32 = -1
    private var ownsSocketPath: String?
    private var acceptWatch: SocketWatcher.Token?
    private var connections: [ObjectIdentifier: VarlinkConnection] = [:]
    /// What each uid holds: its connections, their unsent bytes, and the bytes they received
    /// and have not handled.
    private var perUID: [UInt32: (connections: Int, unsent: Int, pending: Int)] = [:]
    private let tally = VarlinkTally()
    private var refusals = RefusalLog()
    /// Runs `sweep` while connections are open: the deadlines of every connection are checked
    /// by one timer, not one per connection.
    private var sweeper: DispatchSourceTimer?
    /// Bytes of buffers freed since the last malloc_trim.
    private var freedSinceTrim = 0
    private var trimAgainAt: ContinuousClock.Instant?
    /// Out of descriptors: accepting waits until the backlog is empty again, and the start
    /// and end of that are logged once each.
    private var acceptStalled = false
    /// Where every connection reads into, in turn, on the queue; a connection keeps only
    /// the bytes it received.
    let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 1)
    /// GetInfo's reply: nothing in it changes once the server is made.
    private let getInfoReply: [UInt8]
    /// GetInterfaceDescription's replies by interface, the largest a client can ask for: made
    /// once, so that asking in a loop costs a copy each, not an encoding.
    private let descriptionReplies: [String: [UInt8]]

    /// Fails only when the process has no descriptor left for the socket watcher.
    public init(info: VarlinkServiceInfo, interfaces: [VarlinkInterface], limits: VarlinkLimits, logger: Logger,
                clock: VarlinkClock = .system, handler: @escaping VarlinkHandler) throws(VarlinkSocketError) {
        self.clock = clock
        self.watcher = try SocketWatcher(queue: queue, name: "adorch.varlink.io")
        self.info = info
        self.limits = limits
        self.logger = logger
        self.handler = handler
        var byName: [String: VarlinkInterface] = [:]
        for interface in [VarlinkInterface(description: varlinkServiceIDL), .connection] + interfaces {
            byName[interface.name] = interface
        }
        self.interfaces = byName
        descriptionReplies = byName.mapValues { VarlinkWire.reply(["description": .string($0.description)], continues: false) }
        getInfoReply = VarlinkWire.reply([
            "vendor": .string(info.vendor), "product": .string(info.product),
            "version": .string(info.version), "url": .string(info.url),
            "interfaces": .array(byName.keys.sorted().map { .string($0) }),
        ], continues: false)
    }

    deinit {
        sweeper?.cancel()
        watcher.shutdown()
        receiveBuffer.deallocate()
    }

    /// Binds and listens on `path`. A stale socket file left by a dead daemon is replaced;
    /// a live one is not (another daemon is serving there).
    public func listen(path: String) throws(VarlinkSocketError) {
        let fd = try UnixSocket.bindListening(path: path)
        queue.sync {
            ownsSocketPath = path
            startAccepting(fd)
        }
    }

    /// Serves on a listening socket handed over by systemd; it is never unlinked or closed
    /// by us. Calls may arrive at once: a client may already be waiting on it.
    public func listen(fileDescriptor fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        queue.sync { startAccepting(fd) }
    }

    /// The path a listening Unix socket is bound to, for messages.
    public static func boundPath(of fd: Int32) -> String? { UnixSocket.boundPath(fd) }

    /// Makes the folder `listen(path:)` binds in, if missing, and refuses one another user
    /// could put an impostor in (`VarlinkSocketError.unsafeFolder`): called before a daemon
    /// starts anything else, so such a start touches nothing.
    public static func prepareFolder(forSocket path: String) throws(VarlinkSocketError) { try UnixSocket.prepareFolder(forSocket: path) }

    /// Stops accepting new connections; open ones are served on. A socket file we created is
    /// removed; one systemd passed us stays open and in place for the next start.
    public func stopAccepting() {
        queue.sync {
            guard let token = acceptWatch else { return }
            watcher.unwatch(token)
            acceptWatch = nil
            // A socket handed to us by systemd stays open for the next start.
            if let path = ownsSocketPath {
                unlink(path)
                Glibc.close(listenFD)
            }
            ownsSocketPath = nil
        }
    }

    /// Stops accepting and closes every connection once what is queued for it is written
    /// (replies already on their way reach their callers).
    public func stop() {
        stopAccepting()
        queue.sync {
            for connection in connections.values { connection.finish() }
            sweeper?.cancel()
            sweeper = nil
        }
        watcher.shutdown()
    }

    /// Connections open now, and what the limits did to them since start.
    public var counts: VarlinkCounts { tally.snapshot }

    private func startAccepting(_ fd: Int32) {
        dispatchPrecondition(condition: .onQueue(queue))
        listenFD = fd
        acceptWatch = watcher.watch(fd, for: .readable) { [unowned self] _ in acceptPending() }
    }

    private func acceptPending() {
        dispatchPrecondition(condition: .onQueue(queue))
        for _ in 0..<Self.acceptsPerTurn {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EMFILE || code == ENFILE { return pauseAccepting(code) }
                if code != EAGAIN && code != EWOULDBLOCK {
                    logger.warning("accept failed: \(String(cString: strerror(code)))")
                } else if acceptStalled {
                    acceptStalled = false
                    logger.notice("accepting connections again: every waiting one is accepted, \(connections.count) are open")
                }
                return
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            tally.add(.accepted)
            let peer = UnixSocket.peerCredentials(fd)
            let uid = peer?.uid ?? Self.unknownUID
            if let refusal = connectionRefusal(uid: uid) {
                refuseAtOnce(fd, peer: peer, refusal)
                continue
            }
            let connection = VarlinkConnection(fd: fd, peer: peer, server: self, framer: VarlinkFramer(maxMessageSize: limits.maxMessageSize))
            connections[ObjectIdentifier(connection)] = connection
            tally.add(.open)
            perUID[uid, default: (0, 0, 0)].connections += 1
            connection.start()
            startSweeping()
        }
    }

    /// Why a new connection of `uid` may not be served, if it may not: the limits count only
    /// the connections being served.
    private func connectionRefusal(uid: UInt32) -> (kind: String, log: String, message: String)? {
        if connections.count >= limits.maxConnections {
            return ("max_connections", "over the limit of \(limits.maxConnections) connections",
                    "the daemon serves at most \(limits.maxConnections) connections")
        }
        guard uid != 0 else { return nil }
        let unreserved = limits.maxConnections - limits.rootReservedConnections
        if connections.count >= unreserved {
            return ("max_connections", "over the limit of \(unreserved) connections for users other than root (\(limits.rootReservedConnections) more are kept for root)",
                    "the daemon serves at most \(limits.maxConnections) connections, \(limits.rootReservedConnections) of them only for root")
        }
        if perUID[uid]?.connections ?? 0 >= limits.maxConnectionsPerUID {
            return ("max_connections_per_uid", "over the limit of \(limits.maxConnectionsPerUID) connections for uid \(uid)",
                    "uid \(uid) has \(limits.maxConnectionsPerUID) connections open, the most one user may")
        }
        return nil
    }

    /// Answers TooManyConnections before any call and closes: the client learns why at once,
    /// and the refused connection holds nothing. The error fits in the new socket's empty
    /// buffer; the client reads it even after the close.
    private func refuseAtOnce(_ fd: Int32, peer: PeerCredentials?, _ refusal: (kind: String, log: String, message: String)) {
        tally.add(.refused)
        logRefusal(refusal.kind, "refusing a connection: \(refusal.log)", peer: peer)
        let error = VarlinkWire.error(ConnectionError.tooManyConnections(["message": .string(refusal.message)]))
        _ = error.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        Glibc.close(fd)
    }

    private func startSweeping() {
        guard sweeper == nil, clock.sweepsItself else { return }
        let interval = Self.sweepInterval(limits).dispatchInterval
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.sweep() }
        sweeper = timer
        timer.resume()
    }

    /// A tenth of the shortest deadline, so each fires within 10 % of its time; at most a
    /// second, and at least 10 ms, so an idle daemon with a short timeout does not spin.
    static func sweepInterval(_ limits: VarlinkLimits) -> Duration {
        min(max(min(limits.partialMessageTimeout, limits.idleConnectionTimeout) / 10, .milliseconds(10)), .seconds(1))
    }

    /// Checks every connection's deadlines now, on the server's queue: what the sweep timer does,
    /// for a test whose clock the server does not sweep by itself (`VarlinkClock.manual`).
    public func sweepNow() { queue.sync { sweep() } }

    private func sweep() {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = clock.now()
        for connection in Array(connections.values) { connection.sweep(at: now) }
        if freedSinceTrim >= Self.trimAfterFreeing {
            freedSinceTrim = 0
            malloc_trim(0)
            trimAgainAt = now + Self.trimAgainAfter
        } else if let at = trimAgainAt, now >= at {
            trimAgainAt = nil
            malloc_trim(0)
        }
        if connections.isEmpty {
            sweeper?.cancel()
            sweeper = nil
        }
    }

    /// The waiting connection stays in the listen backlog. The socket stays readable, so
    /// accepting again at once would spin on the queue; it waits 100 ms, or less if a
    /// connection closes (a descriptor is free again).
    private func pauseAccepting(_ code: Int32) {
        guard let token = acceptWatch else { return }
        if !acceptStalled {
            logger.warning("cannot accept connections: \(String(cString: strerror(code))) with \(connections.count) connections open; new ones wait in the backlog until a descriptor is free")
        }
        acceptStalled = true
        watcher.update(token, to: [])
        queue.asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in resumeAccepting() }
    }

    private func resumeAccepting() {
        guard acceptStalled, let token = acceptWatch else { return }
        watcher.update(token, to: .readable)
    }

    // MARK: Called by connections, on the queue

    func connectionClosed(_ connection: VarlinkConnection) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        tally.add(.open, -1)
        perUID[connection.uid, default: (1, 0, 0)].connections -= 1
        if perUID[connection.uid]! == (0, 0, 0) { perUID[connection.uid] = nil }
        resumeAccepting()
    }

    /// A connection's unsent bytes changed by `delta`; called before it is closed.
    func unsentChanged(_ uid: UInt32, by delta: Int) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard delta != 0 else { return }
        perUID[uid, default: (0, 0, 0)].unsent += delta
        if perUID[uid]! == (0, 0, 0) { perUID[uid] = nil }
    }

    func unsentBytes(of uid: UInt32) -> Int { perUID[uid]?.unsent ?? 0 }

    /// Over `maxUnsentBytesPerUID`; root, the operator, is exempt.
    func isOverUnsentBudget(_ uid: UInt32) -> Bool {
        uid != 0 && unsentBytes(of: uid) > limits.maxUnsentBytesPerUID
    }

    /// A connection's bytes received and not handled changed by `delta`; called before it is closed.
    func pendingChanged(_ uid: UInt32, by delta: Int) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard delta != 0 else { return }
        perUID[uid, default: (0, 0, 0)].pending += delta
        if perUID[uid]! == (0, 0, 0) { perUID[uid] = nil }
    }

    func pendingBytes(of uid: UInt32) -> Int { perUID[uid]?.pending ?? 0 }

    /// Over `maxPendingBytesPerUID`; root, the operator, is exempt.
    func isOverPendingBudget(_ uid: UInt32) -> Bool {
        uid != 0 && pendingBytes(of: uid) > limits.maxPendingBytesPerUID
    }

    func counted(_ count: VarlinkTally.Count) {
        tally.add(count)
    }

    /// Buffers of `bytes` were given back to the allocator.
    func freed(_ bytes: Int) {
        freedSinceTrim += bytes
    }

    /// Logs a refusal the first time, then at most once a minute per uid and kind.
    func logRefusal(_ kind: String, _ message: String, peer: PeerCredentials?) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let suppressed = refusals.note(.init(uid: peer?.uid ?? Self.unknownUID, kind: kind)) else { return }
        log(.warning, message + RefusalLog.suffix(suppressed), peer: peer)
    }

    func log(_ level: Logger.Level, _ message: String, peer: PeerCredentials?) {
        var metadata: Logger.Metadata = [:]
        if let peer {
            metadata["peer_pid"] = "\(peer.pid)"
            metadata["peer_uid"] = "\(peer.uid)"
        }
        logger.log(level: level, "\(message)", metadata: metadata)
    }

    /// Sends one continuing reply to many streaming calls (subscribers): it is encoded once
    /// and reaches every connection in a single hop to the server's queue, so the cost of an
    /// event grows with its subscribers by a write each, not by an encoding and a wakeup each.
    public func broadcast(_ parameters: [String: JSONValue], to repliers: [VarlinkReplier]) {
        guard !repliers.isEmpty else { return }
        let streaming = VarlinkWire.reply(parameters, continues: true)
        let final = repliers.contains { !$0.wantsMore } ? VarlinkWire.reply(parameters, continues: false) : streaming
        queue.async {
            for replier in repliers {
                replier.connection?.deliver(replier.wantsMore ? streaming : final, final: !replier.wantsMore, serial: replier.serial)
            }
        }
    }

    /// Routes one call: org.varlink.service is answered here, unknown names are refused,
    /// the rest goes to the handler.
    func dispatch(_ call: VarlinkCall, replier: VarlinkReplier) {
        dispatchPrecondition(condition: .onQueue(queue))
        if call.interface == "org.varlink.service" {
            switch call.member {
            case "GetInfo":
                replier.replyOnQueue(getInfoReply)
            case "GetInterfaceDescription":
                guard let name = try? call.string("interface") else { return replier.replyOnQueue(VarlinkWire.error(.invalidParameter("interface"))) }
                guard let reply = descriptionReplies[name] else { return replier.replyOnQueue(VarlinkWire.error(.interfaceNotFound(name))) }
                replier.replyOnQueue(reply)
            default:
                replier.replyOnQueue(VarlinkWire.error(.methodNotFound(call.method)))
            }
            return
        }
        guard let interface = interfaces[call.interface] else { return replier.fail(.interfaceNotFound(call.interface)) }
        guard interface.methods.contains(call.member) else { return replier.fail(.methodNotFound(call.method)) }
        handler(call, replier)
    }
}
