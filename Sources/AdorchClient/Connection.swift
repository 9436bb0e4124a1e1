import AdorchLocking
import AdorchJSON
import Foundation
import Synchronization

import Glibc

/// One reply of the daemon: parameters, or an error's name and parameters.
typealias Reply = VarlinkReply

/// One Varlink connection: calls go out in order and the daemon answers them in order, so the
/// replies are matched to the waiters first in, first out. An I/O thread of its own polls the
/// non-blocking socket: it writes the queued calls and reads the replies, so a caller never
/// waits in a syscall (no thread of the cooperative pool blocks, whatever the daemon does),
/// and the lock is never held across one that could block. The thread owns the descriptors
/// and closes them when the connection ends.
final class Connection: Sendable {
    /// Who waits for a reply: a plain call (one reply), a `more` call (replies until one
    /// without `continues`), or a call whose caller gave up (cancelled, timed out) after it
    /// was sent: its reply is read and dropped, so the next one goes to the right waiter.
    private enum Sink {
        case call(CheckedContinuation<Reply, any Error>)
        case stream(AsyncStream<Result<Reply, AdorchError>>.Continuation)
        case abandoned
    }

    private struct Waiter {
        let id: UInt64
        let method: String
        var sink: Sink
        let deadline: ContinuousClock.Instant?
        /// Where its message lies in the byte count of everything queued on this connection.
        var start: Int
        var end: Int
    }

    private struct State {
        var waiters: [Waiter] = []
        /// Bytes queued and not yet written; `outbox[0]` is byte `written` of the connection.
        var outbox: [UInt8] = []
        var written = 0
        var nextID: UInt64 = 0
        /// The socket took no more (the daemon closed it): nothing more is written, the replies
        /// already sent are still read.
        var writeFailed = false
        var closeRequested = false
        /// Set once the connection is over: every call after it fails at once.
        var ended = false
        /// An error the daemon sent unasked (a refusal: too many connections, a reader too
        /// slow), or a reply that is not JSON: it ends the connection, and is what the calls
        /// in flight fail with.
        var refusal: AdorchError?
    }

    /// The call never reached the daemon whole: the connection had ended, or it ended before
    /// the last byte of the call was written. Safe to send again on a new connection, whatever
    /// the call (part of a message is nothing to the daemon).
    struct NotSent: Error {
        let reason: AdorchError
    }

    let path: String
    private let fd: Int32
    /// A socket pair that wakes the I/O thread (a call queued, a deadline added, close): it
    /// reads `wake[0]`, the callers write to `wake[1]`; both non-blocking.
    private let wake: [Int32]
    private let state = LockedValue(State())

    /// Connects to the socket at `path`; fails with `.cannotConnect` and the errno's text
    /// (EAGAIN when the daemon's listen backlog is full: it does not accept).
    init(path: String) throws(AdorchError) {
        self.path = path
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw AdorchError(.cannotConnect(path: path, errno: ENAMETOOLONG), message: "socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw AdorchError(.cannotConnect(path: path, errno: errno), message: "socket: \(String(cString: strerror(errno)))") }
        // A Unix socket connects at once or fails (EAGAIN with a full backlog): never EINPROGRESS.
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc != 0 {
            let code = errno
            Glibc.close(fd)
            throw AdorchError(.cannotConnect(path: path, errno: code), message: "connect \(path): \(String(cString: strerror(code)))")
        }
        var wake: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0, &wake) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw AdorchError(.cannotConnect(path: path, errno: code), message: "socketpair: \(String(cString: strerror(code)))")
        }
        self.fd = fd
        self.wake = wake
        let thread = Thread { [self] in run() }
        thread.name = "adorch.client.io"
        thread.start()
    }

    /// Whether the connection takes no more calls: over, being closed, or its socket broken.
    var isEnded: Bool { state.withLock { $0.ended || $0.closeRequested || $0.writeFailed } }

    /// Sends a call and returns its reply; `.connectionLost` if the connection ends after it
    /// was sent, `NotSent` if before. `timeout` is how long to wait for the reply (`.timeout`);
    /// a cancelled task gets `CancellationError`, and a call not yet written is then never sent.
    func call(_ method: String, _ parameters: [String: JSONValue], timeout: Duration?) async throws -> Reply {
        let message = Self.encode(method, parameters, more: false)
        let deadline = timeout.map { ContinuousClock.now + $0 }
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if let error = enqueue(id, method, .call(continuation), message, deadline: deadline) { continuation.resume(throwing: error) }
            }
        } onCancel: {
            giveUp(id, CancellationError())
        }
    }

    /// Sends a `more` call; its replies, then a `.connectionLost` failure if the connection
    /// ends before the last one. The consumer cancels it by closing the connection.
    func stream(_ method: String, _ parameters: [String: JSONValue]) -> AsyncStream<Result<Reply, AdorchError>> {
        let message = Self.encode(method, parameters, more: true)
        let (stream, continuation) = AsyncStream.makeStream(of: Result<Reply, AdorchError>.self)
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        if let error = enqueue(id, method, .stream(continuation), message, deadline: nil) {
            continuation.yield(.failure((error as? NotSent)?.reason ?? Self.lost(method, path)))
            continuation.finish()
        }
        return stream
    }

    /// Ends the connection: the I/O thread wakes up, fails whoever waits and closes the socket.
    func close() {
        state.withLock { state in
            guard !state.ended else { return }
            state.closeRequested = true
            signal()
        }
    }

    /// Under the lock, only while the connection has not ended: the thread closes `wake` then.
    private func signal() {
        // A full pair already wakes the thread: the byte is not needed then.
        var one: UInt8 = 1
        _ = Glibc.write(wake[1], &one, 1)
    }

    /// Queues the waiter and its message under one lock, so waiters are in the order the daemon
    /// receives the calls; the I/O thread writes it. Nothing is queued for a cancelled task.
    private func enqueue(_ id: UInt64, _ method: String, _ sink: Sink, _ message: [UInt8], deadline: ContinuousClock.Instant?) -> (any Error)? {
        state.withLock { state in
            guard !state.ended, !state.closeRequested, !state.writeFailed else {
                return NotSent(reason: state.refusal ?? Self.lost(method, path))
            }
            if Task.isCancelled { return CancellationError() }
            let start = state.written + state.outbox.count
            state.outbox += message
            state.waiters.append(Waiter(id: id, method: method, sink: sink, deadline: deadline, start: start, end: start + message.count))
            signal()
            return nil
        }
    }

    /// The caller of call `id` stops waiting, with `error`: a call not yet written is taken
    /// out of the queue (never sent); one written, even in part, is left for its reply to be
    /// dropped (a part must be completed, or the daemon would read the next call into it).
    private func giveUp(_ id: UInt64, _ error: any Error) {
        let continuation: CheckedContinuation<Reply, any Error>? = state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }), case .call(let continuation) = state.waiters[index].sink else { return nil }
            let waiter = state.waiters[index]
            if waiter.start >= state.written {
                let length = waiter.end - waiter.start
                state.outbox.removeSubrange((waiter.start - state.written)..<(waiter.end - state.written))
                state.waiters.remove(at: index)
                for later in index..<state.waiters.count {
                    state.waiters[later].start -= length
                    state.waiters[later].end -= length
                }
            } else {
                state.waiters[index].sink = .abandoned
            }
            return continuation
        }
        continuation?.resume(throwing: error)
    }

    private static func encode(_ method: String, _ parameters: [String: JSONValue], more: Bool) -> [UInt8] {
        var call: [String: JSONValue] = ["method": .string(method), "parameters": .object(parameters)]
        if more { call["more"] = true }
        return Array(JSONValue.object(call).jsonData) + [0]
    }

    /// The I/O thread: polls the socket (for writing only while calls are queued) and the wake
    /// descriptor, until the daemon closes the connection or `close` is called.
    private func run() {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        running: while true {
            let (wantWrite, deadline, closing) = state.withLock { state in
                (!state.outbox.isEmpty && !state.writeFailed, state.waiters.compactMap { $0.deadline }.min(), state.closeRequested)
            }
            if closing { break }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN) | (wantWrite ? Int16(POLLOUT) : 0), revents: 0),
                       pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
            var wait: Int32 = -1
            if let deadline {
                let left = ContinuousClock.now.duration(to: deadline)
                // Rounded up, so the wake-up finds the deadline passed.
                wait = left <= .zero ? 0 : Int32(min(left / .milliseconds(1), Double(Int32.max - 1)).rounded(.up))
            }
            if poll(&fds, 2, wait) < 0, errno != EINTR { break }
            if fds[1].revents != 0 {
                var drained = [UInt8](repeating: 0, count: 256)
                while Glibc.read(wake[0], &drained, drained.count) > 0 {}
            }
            expire()
            if fds[0].revents & Int16(POLLOUT) != 0 { flush() }
            if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                // The replies read before the end are delivered before it.
                var over = false
                while true {
                    let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if n < 0, errno == EINTR { continue }
                    if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { break }
                    if n <= 0 {
                        over = true
                        break
                    }
                    buffer.append(contentsOf: chunk[0..<n])
                }
                var start = 0
                while let nul = buffer[start...].firstIndex(of: 0) {
                    let frame = Data(buffer[start..<nul])
                    start = nul + 1
                    guard let reply = VarlinkReply(message: frame) else {
                        state.withLock { $0.refusal = AdorchError(.malformedReply, message: "a reply from \(path) is not a JSON object") }
                        break running
                    }
                    deliver(reply)
                }
                buffer.removeFirst(start)
                if over { break running }
            }
        }
        let (waiters, refusal, written) = state.withLock { state in
            state.ended = true
            Glibc.close(fd)
            Glibc.close(wake[0])
            Glibc.close(wake[1])
            defer { state.waiters = [] }
            return (state.waiters, state.refusal, state.written)
        }
        for waiter in waiters {
            let reason = refusal ?? Self.lost(waiter.method, path)
            switch waiter.sink {
            case .call(let continuation):
                continuation.resume(throwing: waiter.end > written ? NotSent(reason: reason) : reason)
            case .stream(let continuation):
                continuation.yield(.failure(reason))
                continuation.finish()
            case .abandoned: break
            }
        }
    }

    /// Writes what the socket takes now.
    private func flush() {
        state.withLock { state in
            while !state.outbox.isEmpty {
                let n = state.outbox.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN || errno == EWOULDBLOCK { return }
                    // The daemon closed the connection (a refusal, a restart): what it sent before
                    // is still read, then the end of the connection fails the rest.
                    state.writeFailed = true
                    return
                }
                state.outbox.removeFirst(n)
                state.written += n
            }
        }
    }

    /// Fails the calls whose deadline has passed with `.timeout`.
    private func expire() {
        let now = ContinuousClock.now
        let late = state.withLock { state in
            state.waiters.filter { waiter in
                if case .call = waiter.sink, let deadline = waiter.deadline { deadline <= now } else { false }
            }.map { ($0.id, $0.method) }
        }
        for (id, method) in late {
            giveUp(id, AdorchError(.timeout, message: "no reply to \(method) from \(path) in time"))
        }
    }

    private func deliver(_ reply: Reply) {
        let sink: Sink? = state.withLock { state in
            guard let first = state.waiters.first else { return nil }
            if case .stream = first.sink, reply.continues { return first.sink }
            return state.waiters.removeFirst().sink
        }
        switch sink {
        case .call(let continuation): continuation.resume(returning: reply)
        case .stream(let continuation):
            continuation.yield(.success(reply))
            if !reply.continues { continuation.finish() }
        case .abandoned: break
        case nil:
            // A connection-level error (a refusal) comes unasked: the connection ends after it.
            if let name = reply.error {
                state.withLock { $0.refusal = AdorchError(name: name, parameters: reply.parameters) }
            }
        }
    }

    private static func lost(_ method: String, _ path: String) -> AdorchError {
        AdorchError(.connectionLost(method: method), message: "the connection to \(path) was lost during \(method)")
    }
}
