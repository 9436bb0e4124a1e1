import Dispatch
import Foundation

/// One client connection: reads calls, answers them in order, writes replies.
///
/// @unchecked Sendable: all its state is confined to the server's queue; the functions other
/// threads may call (`send`, `onClose`) only hop to it, and the rest assert they are on it.
final class VarlinkConnection: @unchecked Sendable {
    private let fd: Int32
    private unowned let server: VarlinkServer
    private var framer: VarlinkFramer
    private var watch: SocketWatcher.Token?
    /// A write found the socket full; the rest goes out when it is writable.
    private var waitingToWrite = false
    private var outgoing = SendBuffer()
    private var busy = false
    /// Inside `pump`: a reply delivered now is flushed when the loop ends, with the others.
    private var pumping = false
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
        dispatchPrecondition(condition: .onQueue(server.queue))
        while !closed {
            // The server's one receive buffer: every connection reads on its queue.
            let received = server.receiveBuffer
            let n = recv(fd, received.baseAddress, received.count, 0)
            if n == 0 { return close(reason: nil) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                return close(reason: "read failed: \(String(cString: strerror(errno)))")
            }
            if closeWhenFlushed { continue }  // refused: input is drained until the error is out
            do {
                try framer.append(UnsafeRawBufferPointer(rebasing: received[0..<n]))
                if let refusal, framer.messageCount > 0 { return refuse(refusal) }
                watchPartialMessage()
                if framer.messageCount > server.limits.maxQueuedCalls {
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
        dispatchPrecondition(condition: .onQueue(server.queue))
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
        framer.dropMessages()
        enqueue(VarlinkWire.error(error))
        closeWhenFlushed = true
        flush()
    }

    /// Varlink answers calls in order: the next queued call starts when the last one ended.
    /// Each call is decoded where it arrived, in the framer's storage.
    private func pump() {
        dispatchPrecondition(condition: .onQueue(server.queue))
        guard !pumping else { return }
        pumping = true
        while !busy, !closeWhenFlushed, !closed, let decoded = framer.takeMessage({ VarlinkCall.decode(bytes: $0, peer: peer) }) {
            switch decoded {
            case .failure(let error):
                pumping = false
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
        pumping = false
        flush()
        if outgoing.unsent > server.limits.maxUnsentBytes { dropSlowReader() }
    }

    func send(_ message: [UInt8], final: Bool, serial: UInt64) {
        server.queue.async { [self] in deliver(message, final: final, serial: serial) }
    }

    /// On the server's queue: writes a reply to call `serial`, if that call is still the one in progress.
    func deliver(_ message: [UInt8], final: Bool, serial: UInt64) {
        dispatchPrecondition(condition: .onQueue(server.queue))
        guard !closed, busy, serial == self.serial else { return }
        enqueue(message)
        if final { busy = false }
        if pumping { return }
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
        framer.dropMessages()
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

    private func enqueue(_ message: [UInt8]) { outgoing.append(message) }

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
        dispatchPrecondition(condition: .onQueue(server.queue))
        framer.dropMessages()
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
