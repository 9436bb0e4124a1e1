import Dispatch
import Foundation

/// One client connection: reads calls, answers them in order, writes replies.
///
/// It takes a bounded turn on the server's queue each time its socket is ready (one read, a
/// bounded number of calls), so a client that floods or drips bytes waits for the others
/// instead of holding the queue.
///
/// @unchecked Sendable: all its state is confined to the server's queue; the functions other
/// threads may call (`send`, `onClose`) only hop to it, and the rest assert they are on it.
final class VarlinkConnection: @unchecked Sendable {
    /// Calls started in one turn: past it, the next ones wait behind the other connections.
    static let callsPerTurn = 64

    private let fd: Int32
    /// Unowned: the server holds its connections. A block a connection sends to the server's
    /// queue holds the server too, so a test's server that goes away first cannot be read dead.
    private unowned let server: VarlinkServer
    private var framer: VarlinkFramer
    private var watch: SocketWatcher.Token?
    /// A write found the socket full; the rest goes out when it is writable.
    private var waitingToWrite = false
    /// `maxQueuedCalls` calls, or a largest message's worth of them, wait: the socket is not
    /// read until they drop below it.
    private var readingPaused = false
    /// The client shut down its sending side: what it sent is answered, then it closes.
    private var inputEnded = false
    private var outgoing = SendBuffer()
    /// `outgoing.unsent` as last added to its uid's sum at the server.
    private var countedUnsent = 0
    /// `framer.heldBytes` as last added to its uid's sum at the server.
    private var countedPending = 0
    private var busy = false
    /// Inside `pump`: a reply delivered now is flushed when the loop ends, with the others.
    private var pumping = false
    /// A pump ran out of its turn with calls left: it goes on after the others had theirs.
    private var pumpScheduled = false
    /// Numbers calls, so a reply to an ended call can never slip into the next one's stream.
    private var serial: UInt64 = 0
    private var closeWhenFlushed = false
    private var closed = false
    private var closeHandlers: [@Sendable () -> Void] = []
    /// When the first byte of the message not yet ended came: the rest must come within
    /// `partialMessageTimeout` of it, however the client spaces it out (time while reading
    /// is paused does not count).
    private var partialSince: ContinuousClock.Instant?
    /// The last byte read or call ended: the idle timeout counts from here.
    private var lastActive: ContinuousClock.Instant
    /// Set once the connection is to close after its last reply: if the client does not
    /// read that reply by then, it is closed anyway.
    private var closeBy: ContinuousClock.Instant?
    let peer: PeerCredentials?
    let uid: UInt32

    init(fd: Int32, peer: PeerCredentials?, server: VarlinkServer, framer: VarlinkFramer) {
        self.fd = fd
        self.server = server
        self.framer = framer
        self.peer = peer
        self.uid = peer?.uid ?? VarlinkServer.unknownUID
        lastActive = server.clock.now()
    }

    func start() {
        watch = server.watcher.watch(fd, for: .readable) { [self] ready in
            if ready.contains(.readable) { readOnce() }
            if ready.contains(.writable), waitingToWrite, !closed {
                waitingToWrite = false
                updateInterest()
                flush()
                if !waitingToWrite { pump() }
            }
        }
    }

    /// One read, and the calls it completes: the socket is watched again after this turn.
    private func readOnce() {
        dispatchPrecondition(condition: .onQueue(server.queue))
        guard !closed else { return }
        // The server's one receive buffer: every connection reads on its queue.
        let received = server.receiveBuffer
        var n: Int
        repeat { n = recv(fd, received.baseAddress, received.count, 0) } while n < 0 && errno == EINTR
        if n == 0 {
            // A half-close: the client sent its last call and waits for the answers. A client
            // that is gone altogether (hung up), or one with nothing left to answer or a refusal
            // already on its way, is not waited for.
            guard busy || framer.messageCount > 0, !closeWhenFlushed, !peerHungUp() else { return close(reason: nil) }
            inputEnded = true
            return updateInterest()
        }
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            return close(reason: "read failed: \(String(cString: strerror(errno)))")
        }
        lastActive = server.clock.now()
        if closeWhenFlushed { return }  // refused: input is drained until the error is out
        let before = framer.messageCount
        do {
            try framer.append(UnsafeRawBufferPointer(rebasing: received[0..<n]))
        } catch {
            return refuse(.invalidParameter("message: larger than \(server.limits.maxMessageSize) bytes"), kind: "max_message_bytes",
                          log: "closing a connection: a message larger than \(server.limits.maxMessageSize) bytes")
        }
        countPending()
        if server.isOverPendingBudget(uid) { return dropOverPendingBudget() }
        if framer.pendingBytes == 0 {
            partialSince = nil
        } else if partialSince == nil || framer.messageCount > before {
            partialSince = lastActive  // a new message began in this read
        }
        pump()
    }

    /// Whether the client closed its end for good, not only its sending side: the socket is
    /// then hung up (POLLHUP), which a half-close does not do. Its hang-up is also what wakes
    /// a half-closed connection that no longer reads, so a gone client is closed then.
    private func peerHungUp() -> Bool {
        var probe = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        return poll(&probe, 1, 0) > 0 && probe.revents & Int16(POLLHUP) != 0
    }

    /// The server's periodic check of the deadlines a client may not outwait.
    func sweep(at now: ContinuousClock.Instant) {
        dispatchPrecondition(condition: .onQueue(server.queue))
        guard !closed else { return }
        let limits = server.limits
        if let closeBy {
            if now >= closeBy { close(reason: "it did not read its last reply in time") }
        } else if let partialSince, !readingPaused, now - partialSince >= limits.partialMessageTimeout {
            server.counted(.incompleteMessages)
            refuse(ConnectionError.incompleteMessage(["message": .string("no end of message (NUL) within \(limits.partialMessageTimeout)")]),
                   kind: "partial_message_timeout_ms",
                   log: "closing a connection: \(framer.pendingBytes) bytes of a message and no end within \(limits.partialMessageTimeout)")
        } else if !busy, framer.messageCount == 0, partialSince == nil, now - lastActive >= limits.idleConnectionTimeout {
            server.counted(.closedIdle)
            close(reason: "no call for \(limits.idleConnectionTimeout)")
        }
    }

    /// Replies to a broken message or an exceeded limit and closes: after one, the stream
    /// cannot be trusted.
    private func refuse(_ error: VarlinkError, kind: String, log: String) {
        server.logRefusal(kind, log, peer: peer)
        dropInput()
        // The error ends the stream: no reply of a call in progress comes after it.
        busy = false
        enqueue(VarlinkWire.error(error))
        closeWhenFlushed = true
        closeBy = server.clock.now() + server.limits.partialMessageTimeout
        flush()
    }

    /// Varlink answers calls in order: the next queued call starts when the last one ended.
    /// Each call is decoded where it arrived, in the framer's storage.
    private func pump() {
        dispatchPrecondition(condition: .onQueue(server.queue))
        guard !pumping else { return }
        pumping = true
        var turn = Self.callsPerTurn
        // A client whose socket is full is not reading its replies: its next call waits until
        // it does, so a pipeline of calls it never reads costs the daemon one reply, not all.
        while !busy, !waitingToWrite, !closeWhenFlushed, !closed, turn > 0, let decoded = framer.takeMessage({ VarlinkCall.decode(bytes: $0, peer: peer) }) {
            turn -= 1
            switch decoded {
            case .failure(let error):
                pumping = false
                return refuse(error, kind: "invalid_message", log: "closing a connection: \(error)")
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
        pumping = false
        countPending()
        if inputEnded, !busy, framer.messageCount == 0 { closeWhenFlushed = true }
        flush()
        if closed || closeWhenFlushed { return }
        if overUnsentLimit { return dropSlowReader() }
        if turn == 0, !busy, framer.messageCount > 0, !pumpScheduled {
            pumpScheduled = true
            server.queue.async { [self, server] in
                withExtendedLifetime(server) {
                    pumpScheduled = false
                    pump()
                }
            }
        }
        // Counted in bytes too: a thousand calls of a megabyte each would be a gigabyte.
        let full = framer.messageCount >= server.limits.maxQueuedCalls || framer.queuedBytes >= server.limits.maxMessageSize
        if full != readingPaused {
            readingPaused = full
            // The rest of a message could not be sent while we did not read: its time starts again.
            if !full, partialSince != nil { partialSince = server.clock.now() }
            updateInterest()
        }
    }

    func send(_ message: [UInt8], final: Bool, serial: UInt64) {
        server.queue.async { [self, server] in withExtendedLifetime(server) { deliver(message, final: final, serial: serial) } }
    }

    /// The final reply to call `serial`, encoded by `encode` on the server's queue.
    func sendBuilt(serial: UInt64, _ encode: @escaping @Sendable () -> [UInt8]) {
        server.queue.async { [self, server] in withExtendedLifetime(server) { deliver(encode(), final: true, serial: serial) } }
    }

    /// On the server's queue: writes a reply to call `serial`, if that call is still the one in progress.
    func deliver(_ message: [UInt8], final: Bool, serial: UInt64) {
        dispatchPrecondition(condition: .onQueue(server.queue))
        guard !closed, busy, serial == self.serial else { return }
        enqueue(message)
        if final {
            busy = false
            lastActive = server.clock.now()
        }
        if pumping { return }
        flush()
        if closed { return }
        if overUnsentLimit { return dropSlowReader() }
        pump()
    }

    /// Over the unsent bytes of the connection, or (root aside) of its uid.
    private var overUnsentLimit: Bool {
        let unsent = outgoing.unsent
        return unsent > 0 && (unsent > server.limits.maxUnsentBytes || server.isOverUnsentBudget(uid))
    }

    /// A reader that does not keep up (a subscriber that stopped reading) would make the
    /// daemon hold every event for it. The events it has not been sent are dropped, its call
    /// ends with a final error (behind what the socket already holds), and the connection
    /// closes once that is written, or after the partial-message timeout if it never reads.
    private func dropSlowReader() {
        let limits = server.limits
        let unsent = outgoing.unsent
        server.counted(.droppedSlowReaders)
        let reason = if unsent > limits.maxUnsentBytes {
            (kind: "max_unsent_bytes", log: "\(unsent) bytes unsent, the limit is \(limits.maxUnsentBytes)",
             message: "more than \(limits.maxUnsentBytes) bytes of replies were left unread")
        } else {
            (kind: "max_unsent_bytes_per_uid",
             log: "uid \(uid) has \(server.unsentBytes(of: uid)) bytes unsent over its connections, the limit is \(limits.maxUnsentBytesPerUID)",
             message: "more than \(limits.maxUnsentBytesPerUID) bytes of replies were left unread over uid \(uid)'s connections")
        }
        server.logRefusal(reason.kind, "disconnecting a client that does not read its replies: \(reason.log)", peer: peer)
        let reserved = outgoing.reservedBytes
        outgoing.dropUnsentMessages()
        server.freed(reserved - outgoing.reservedBytes)
        enqueue(VarlinkWire.error(ConnectionError.readerTooSlow(["message": .string(reason.message)])))
        busy = false
        dropInput()
        closeWhenFlushed = true
        closeBy = server.clock.now() + limits.partialMessageTimeout
        flush()
    }

    /// Calls received and not handled are memory the client chose to make the daemon hold.
    /// Past its uid's budget of them (root aside), the connection whose read went over is
    /// refused, as a reader too slow is on the other side.
    private func dropOverPendingBudget() {
        let limit = server.limits.maxPendingBytesPerUID
        server.counted(.droppedPendingBytes)
        refuse(ConnectionError.tooManyPendingBytes(
                            ["message": .string("more than \(limit) bytes of calls were received and not yet handled over uid \(uid)'s connections ([limits] max_pending_bytes_per_uid)")]),
               kind: "max_pending_bytes_per_uid",
               log: "closing a connection: uid \(uid) has \(server.pendingBytes(of: uid)) bytes of calls received and not handled over its connections, the limit is \(limit)")
    }

    /// Nothing more is read from a connection that is closing: what it sent goes now.
    private func dropInput() {
        server.freed(framer.reservedBytes)
        framer.release()
        partialSince = nil
        countPending()
    }

    /// Brings its uid's sum of bytes received and not handled up to date.
    private func countPending() {
        let held = framer.heldBytes
        guard held != countedPending else { return }
        server.pendingChanged(uid, by: held - countedPending)
        countedPending = held
    }

    func onClose(_ body: @escaping @Sendable () -> Void) {
        server.queue.async { [self, server] in
            withExtendedLifetime(server) { if closed { body() } else { closeHandlers.append(body) } }
        }
    }

    private func enqueue(_ message: [UInt8]) { outgoing.append(message) }

    private func flush() {
        while !outgoing.isEmpty, !closed {
            let n = outgoing.write { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    waitWritable()
                    break
                }
                return close(reason: "write failed: \(String(cString: strerror(errno)))")
            }
        }
        if outgoing.unsent != countedUnsent, !closed {
            server.unsentChanged(uid, by: outgoing.unsent - countedUnsent)
            countedUnsent = outgoing.unsent
        }
        if outgoing.isEmpty, closeWhenFlushed { close(reason: nil) }
    }

    private func waitWritable() {
        guard !waitingToWrite else { return }
        waitingToWrite = true
        updateInterest()
    }

    private func updateInterest() {
        guard let watch else { return }
        var interest: SocketWatcher.Interest = readingPaused || inputEnded ? [] : .readable
        if waitingToWrite { interest.insert(.writable) }
        server.watcher.update(watch, to: interest)
    }

    /// Closes after flushing what is queued; a call still in progress gets no reply.
    func finish() {
        dispatchPrecondition(condition: .onQueue(server.queue))
        dropInput()
        closeWhenFlushed = true
        flush()
        // A reader that is not reading must not hold the daemon's exit: give up on it.
        if !closed { close(reason: "server stopping with unsent replies") }
    }

    func close(reason: String?) {
        dispatchPrecondition(condition: .onQueue(server.queue))
        guard !closed else { return }
        closed = true
        if let reason { server.log(.debug, "connection closed: \(reason)", peer: peer) }
        if let watch { server.watcher.unwatch(watch) }
        watch = nil
        _ = Glibc.close(fd)
        // The buffers go now, whoever still holds the connection (a subscriber list, a
        // replier of a call in progress).
        server.freed(outgoing.reservedBytes + framer.reservedBytes)
        outgoing.release()
        framer.release()
        server.unsentChanged(uid, by: -countedUnsent)
        countedUnsent = 0
        server.pendingChanged(uid, by: -countedPending)
        countedPending = 0
        server.connectionClosed(self)
        let handlers = closeHandlers
        closeHandlers.removeAll()
        handlers.forEach { $0() }
    }
}
