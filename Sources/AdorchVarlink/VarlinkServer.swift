import Dispatch
import Foundation
import Logging

/// What `org.varlink.service.GetInfo` says about the service.
public struct VarlinkServiceInfo: Sendable {
    public var vendor: String
    public var product: String
    public var version: String
    public var url: String

    public init(vendor: String, product: String, version: String, url: String) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
    }
}

/// One interface the server offers: its name and IDL text.
public struct VarlinkInterface: Sendable {
    public let name: String
    public let description: String
    /// The methods declared in the IDL, so that unknown ones are refused before any handler runs.
    public let methods: Set<String>

    public init(description: String) {
        let lines = description.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        self.name = lines.first { $0.hasPrefix("interface ") }.map { String($0.dropFirst("interface ".count)) } ?? ""
        self.description = description
        self.methods = Set(lines.filter { $0.hasPrefix("method ") }.compactMap {
            $0.dropFirst("method ".count).split(separator: "(").first.map { String($0).trimmingCharacters(in: .whitespaces) }
        })
    }
}

/// Handles calls to the server's own interfaces; replies go through the replier.
public typealias VarlinkHandler = @Sendable (VarlinkCall, VarlinkReplier) -> Void

/// Limits that keep one client from hurting the others.
public struct VarlinkLimits: Sendable, Equatable {
    /// The largest message accepted; a larger one closes the connection.
    public var maxMessageSize: Int
    /// Calls a client may queue behind the one in progress before it is disconnected.
    public var maxQueuedCalls: Int
    /// Open connections in all; the next one is answered TooManyConnections and closed.
    public var maxConnections: Int
    /// Open connections of one uid; root, the operator, is held only to `maxConnections`.
    public var maxConnectionsPerUID: Int
    /// How long a connection may sit on part of a message before it is closed.
    public var partialMessageTimeout: Duration
    /// Replies and events written but not yet read by the client; past this a reader that
    /// does not keep up (a slow subscriber) is sent a final error and disconnected.
    public var maxUnsentBytes: Int

    public init(maxMessageSize: Int = 1 << 20, maxQueuedCalls: Int = 1024, maxConnections: Int = 4096, maxConnectionsPerUID: Int = 512,
                partialMessageTimeout: Duration = .seconds(10), maxUnsentBytes: Int = 8 << 20) {
        self.maxMessageSize = maxMessageSize
        self.maxQueuedCalls = maxQueuedCalls
        self.maxConnections = maxConnections
        self.maxConnectionsPerUID = maxConnectionsPerUID
        self.partialMessageTimeout = partialMessageTimeout
        self.maxUnsentBytes = maxUnsentBytes
    }
}

/// A Varlink server on a Unix stream socket: its sockets are watched by a `SocketWatcher`,
/// and everything else happens on its serial queue.
///
/// @unchecked Sendable: it owns its serial queue, and every mutable field (the listener,
/// the connections) is touched only on that queue.
public final class VarlinkServer: @unchecked Sendable {
    public let info: VarlinkServiceInfo
    public let limits: VarlinkLimits
    let queue = DispatchQueue(label: "adorch.varlink")
    let watcher: SocketWatcher
    private let logger: Logger
    private let handler: VarlinkHandler
    private var interfaces: [String: VarlinkInterface] = [:]
    private var listenFD: Int32 = -1
    private var ownsSocketPath: String?
    private var acceptWatch: SocketWatcher.Token?
    private var connections: [ObjectIdentifier: VarlinkConnection] = [:]
    private var perUID: [UInt32: Int] = [:]
    private var acceptedTotal = 0
    private var refusedTotal = 0
    /// Out of descriptors: accepting waits until the backlog is empty again, and the start
    /// and end of that are logged once each.
    private var acceptStalled = false

    /// Fails only when the process has no descriptor left for the socket watcher.
    public init(info: VarlinkServiceInfo, interfaces: [VarlinkInterface], limits: VarlinkLimits, logger: Logger,
                handler: @escaping VarlinkHandler) throws(VarlinkSocketError) {
        self.watcher = try SocketWatcher(queue: queue, name: "adorch.varlink.io")
        self.info = info
        self.limits = limits
        self.logger = logger
        self.handler = handler
        for interface in [VarlinkInterface(description: varlinkServiceIDL)] + interfaces {
            self.interfaces[interface.name] = interface
        }
    }

    deinit { watcher.shutdown() }

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
        }
        watcher.shutdown()
    }

    /// Open connections now, accepted since start, and refused for a connection limit.
    public var connectionCounts: (open: Int, accepted: Int, refused: Int) {
        queue.sync { (connections.count, acceptedTotal, refusedTotal) }
    }

    private func startAccepting(_ fd: Int32) {
        listenFD = fd
        acceptWatch = watcher.watch(fd, for: .readable) { [unowned self] _ in acceptPending() }
    }

    private func acceptPending() {
        while true {
            let fd = accept(listenFD, nil, nil)
            if fd >= 0 {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
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
            acceptedTotal += 1
            let connection = VarlinkConnection(fd: fd, server: self, framer: VarlinkFramer(maxMessageSize: limits.maxMessageSize))
            connections[ObjectIdentifier(connection)] = connection
            let uid = connection.peer?.uid ?? UInt32.max
            perUID[uid, default: 0] += 1
            connection.start()
            // Over a limit, the connection is kept just long enough to answer its first call
            // with the reason: a client sees a named error, not a bare hang-up.
            if connections.count > limits.maxConnections {
                refusedTotal += 1
                connection.refuseCalls(VarlinkError("io.adorch.TooManyConnections", [
                    "message": .string("the daemon serves at most \(limits.maxConnections) connections"),
                ]), log: "over the limit of \(limits.maxConnections) connections")
            } else if uid != 0, perUID[uid, default: 0] > limits.maxConnectionsPerUID {
                refusedTotal += 1
                connection.refuseCalls(VarlinkError("io.adorch.TooManyConnections", [
                    "message": .string("uid \(uid) has \(limits.maxConnectionsPerUID) connections open, the most one user may"),
                ]), log: "over the limit of \(limits.maxConnectionsPerUID) connections for uid \(uid)")
            }
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
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        let uid = connection.peer?.uid ?? UInt32.max
        perUID[uid, default: 1] -= 1
        if perUID[uid] == 0 { perUID[uid] = nil }
        resumeAccepting()
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
        if call.interface == "org.varlink.service" {
            switch call.member {
            case "GetInfo":
                replier.reply([
                    "vendor": .string(info.vendor), "product": .string(info.product),
                    "version": .string(info.version), "url": .string(info.url),
                    "interfaces": .array(interfaces.keys.sorted().map { .string($0) }),
                ])
            case "GetInterfaceDescription":
                guard let name = try? call.string("interface") else { return replier.fail(.invalidParameter("interface")) }
                guard let interface = interfaces[name] else { return replier.fail(.interfaceNotFound(name)) }
                replier.reply(["description": .string(interface.description)])
            default:
                replier.fail(.methodNotFound(call.method))
            }
            return
        }
        guard let interface = interfaces[call.interface] else { return replier.fail(.interfaceNotFound(call.interface)) }
        guard interface.methods.contains(call.member) else { return replier.fail(.methodNotFound(call.method)) }
        handler(call, replier)
    }
}

/// Sends the replies to one call, from any thread.
public final class VarlinkReplier: Sendable {
    fileprivate let connection: VarlinkConnection?
    fileprivate let serial: UInt64
    /// The caller asked for several replies.
    public let wantsMore: Bool

    init(connection: VarlinkConnection?, serial: UInt64, wantsMore: Bool) {
        self.connection = connection
        self.serial = serial
        self.wantsMore = wantsMore
    }

    /// A reply; with `continues`, more will follow (only if the caller asked for more).
    public func reply(_ parameters: [String: JSONValue], continues: Bool = false) {
        connection?.send(VarlinkWire.reply(parameters, continues: continues && wantsMore), final: !(continues && wantsMore), serial: serial)
    }

    /// The final, error reply.
    public func fail(_ error: VarlinkError) {
        connection?.send(VarlinkWire.error(error), final: true, serial: serial)
    }

    /// Runs `body` once when the connection closes (at once if it already has).
    public func onClose(_ body: @escaping @Sendable () -> Void) {
        if let connection { connection.onClose(body) } else { body() }
    }
}

/// One client connection. @unchecked Sendable: all its state is confined to the server's queue.
final class VarlinkConnection: @unchecked Sendable {
    private let fd: Int32
    private unowned let server: VarlinkServer
    private var framer: VarlinkFramer
    private var watch: SocketWatcher.Token?
    /// A write found the socket full; the rest goes out when it is writable.
    private var waitingToWrite = false
    private var outgoing = SendBuffer()
    private var queued: [Data] = []
    private var busy = false
    /// Numbers calls, so a reply to an ended call can never slip into the next one's stream.
    private var serial: UInt64 = 0
    private var closeWhenFlushed = false
    private var closed = false
    private var closeHandlers: [@Sendable () -> Void] = []
    /// Set when the connection is over a limit: its first call is answered with this.
    private var refusal: VarlinkError?
    /// Closes the connection if the client does not act in time: send the rest of a
    /// message, or read the final error of a dropped slow reader.
    private var deadlineTimer: DispatchSourceTimer?
    let peer: PeerCredentials?

    init(fd: Int32, server: VarlinkServer, framer: VarlinkFramer) {
        self.fd = fd
        self.server = server
        self.framer = framer
        self.peer = UnixSocket.peerCredentials(fd)
    }

    func start() {
        watch = server.watcher.watch(fd, for: .readable) { [self] ready in
            if ready.contains(.readable) { readAvailable() }
            if ready.contains(.writable), waitingToWrite, !closed {
                waitingToWrite = false
                if let watch { server.watcher.update(watch, to: .readable) }
                flush()
            }
        }
    }

    private func readAvailable() {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !closed {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return close(reason: nil) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                return close(reason: "read failed: \(String(cString: strerror(errno)))")
            }
            if closeWhenFlushed { continue }  // refused: input is drained until the error is out
            do {
                let messages = try framer.append(chunk[0..<n])
                if let refusal, !messages.isEmpty { return refuse(refusal) }
                watchPartialMessage()
                queued += messages
                if queued.count > server.limits.maxQueuedCalls {
                    return refuse(.invalidParameter("message: more than \(server.limits.maxQueuedCalls) calls queued"))
                }
            } catch {
                return refuse(.invalidParameter("message: larger than \(server.limits.maxMessageSize) bytes"))
            }
            pump()
        }
    }

    /// Over a connection limit: the first call gets `error`, then the connection closes.
    func refuseCalls(_ error: VarlinkError, log: String) {
        server.log(.warning, "refusing a connection: \(log)", peer: peer)
        refusal = error
    }

    /// A client that sends part of a message and stops holds a connection and a buffer for
    /// nothing: the rest must come within the limit, counted from the first partial byte.
    private func watchPartialMessage() {
        guard framer.pendingBytes > 0 else {
            deadlineTimer?.cancel()
            deadlineTimer = nil
            return
        }
        guard deadlineTimer == nil else { return }
        let timeout = server.limits.partialMessageTimeout
        let timer = DispatchSource.makeTimerSource(queue: server.queue)
        timer.schedule(deadline: .now() + timeout.dispatchInterval)
        timer.setEventHandler { [weak self] in
            guard let self, !closed else { return }
            server.log(.warning, "closing a connection: \(framer.pendingBytes) bytes of a message and no end within \(timeout)", peer: peer)
            refuse(VarlinkError("io.adorch.IncompleteMessage", ["message": .string("no end of message (NUL) within \(timeout)")]))
        }
        deadlineTimer = timer
        timer.resume()
    }

    /// Replies to a broken message and closes: after one, the stream cannot be trusted.
    private func refuse(_ error: VarlinkError) {
        server.log(.notice, "closing a connection: \(error)", peer: peer)
        queued.removeAll()
        enqueue(VarlinkWire.error(error))
        closeWhenFlushed = true
        flush()
    }

    /// Varlink answers calls in order: the next queued call starts when the last one ended.
    private func pump() {
        while !busy, !closeWhenFlushed, !closed, !queued.isEmpty {
            let message = queued.removeFirst()
            switch VarlinkCall.decode(message, peer: peer) {
            case .failure(let error):
                return refuse(error)
            case .success(let call):
                serial += 1
                if call.oneway {
                    server.dispatch(call, replier: VarlinkReplier(connection: nil, serial: serial, wantsMore: false))
                } else {
                    busy = true
                    server.dispatch(call, replier: VarlinkReplier(connection: self, serial: serial, wantsMore: call.more))
                }
            }
        }
    }

    func send(_ data: Data, final: Bool, serial: UInt64) {
        server.queue.async { [self] in deliver(data, final: final, serial: serial) }
    }

    /// On the server's queue: writes a reply to call `serial`, if that call is still the one in progress.
    func deliver(_ data: Data, final: Bool, serial: UInt64) {
        guard !closed, busy, serial == self.serial else { return }
        enqueue(data)
        if final { busy = false }
        flush()
        if outgoing.unsent > server.limits.maxUnsentBytes { return dropSlowReader() }
        pump()
    }

    /// A reader that does not keep up (a subscriber that stopped reading) would make the
    /// daemon hold every event for it. The events it has not been sent are dropped, its call
    /// ends with a final error (behind what the socket already holds), and the connection
    /// closes once that is written, or after the partial-message timeout if it never reads.
    private func dropSlowReader() {
        server.log(.warning, "disconnecting a client that does not read its replies: \(outgoing.unsent) bytes unsent, the limit is \(server.limits.maxUnsentBytes)", peer: peer)
        outgoing.dropUnsentMessages()
        enqueue(VarlinkWire.error(VarlinkError("io.adorch.ReaderTooSlow", [
            "message": .string("more than \(server.limits.maxUnsentBytes) bytes of replies were left unread"),
        ])))
        busy = false
        queued.removeAll()
        closeWhenFlushed = true
        flush()
        guard !closed else { return }
        let grace = DispatchSource.makeTimerSource(queue: server.queue)
        grace.schedule(deadline: .now() + server.limits.partialMessageTimeout.dispatchInterval)
        grace.setEventHandler { [weak self] in self?.close(reason: "it still did not read") }
        deadlineTimer?.cancel()
        deadlineTimer = grace
        grace.resume()
    }

    func onClose(_ body: @escaping @Sendable () -> Void) {
        server.queue.async { [self] in
            if closed { body() } else { closeHandlers.append(body) }
        }
    }

    private func enqueue(_ data: Data) { outgoing.append(data) }

    private func flush() {
        while !outgoing.isEmpty, !closed {
            let n = outgoing.write { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return waitWritable() }
                return close(reason: "write failed: \(String(cString: strerror(errno)))")
            }
        }
        if outgoing.isEmpty, closeWhenFlushed { close(reason: nil) }
    }

    private func waitWritable() {
        guard !waitingToWrite, let watch else { return }
        waitingToWrite = true
        server.watcher.update(watch, to: [.readable, .writable])
    }

    /// Closes after flushing what is queued; a call still in progress gets no reply.
    func finish() {
        queued.removeAll()
        closeWhenFlushed = true
        flush()
        // A reader that is not reading must not hold the daemon's exit: give up on it.
        if !closed { close(reason: "server stopping with unsent replies") }
    }

    func close(reason: String?) {
        guard !closed else { return }
        closed = true
        if let reason { server.log(.debug, "connection closed: \(reason)", peer: peer) }
        deadlineTimer?.cancel()
        deadlineTimer = nil
        if let watch { server.watcher.unwatch(watch) }
        watch = nil
        _ = Glibc.close(fd)
        server.connectionClosed(self)
        let handlers = closeHandlers
        closeHandlers.removeAll()
        handlers.forEach { $0() }
    }
}

extension Duration {
    var dispatchInterval: DispatchTimeInterval { .nanoseconds(Int(self / .nanoseconds(1))) }
}
