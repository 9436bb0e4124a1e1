import AdorchJSON
import Foundation
import Synchronization

import Glibc

/// One reply of the daemon: parameters, or an error's name and parameters.
struct Reply: Sendable {
    var parameters: [String: JSONValue]
    var error: String?
    var continues: Bool
}

/// One Varlink connection: calls go out in order and the daemon answers them in order, so the
/// replies are matched to the waiters first in, first out. A reader thread of its own reads
/// the socket (blocking reads there never hold a thread of the cooperative pool, and the
/// client needs no event loop); it owns the descriptor and closes it when the connection ends.
final class Connection: Sendable {
    /// Who waits for the next reply: a plain call (one reply) or a `more` call (replies until
    /// one without `continues`).
    private enum Waiter {
        case call(method: String, CheckedContinuation<Reply, any Error>)
        case stream(method: String, AsyncStream<Result<Reply, AdorchError>>.Continuation)
    }

    private struct State {
        var waiters: [Waiter] = []
        /// Set once the connection is over: every call after it fails at once.
        var ended = false
        /// An error the daemon sent unasked (a refusal: too many connections, a reader too
        /// slow), or a reply that is not JSON: it ends the connection, and is what the calls
        /// in flight fail with.
        var refusal: AdorchError?
    }

    /// The call never left: the connection had ended, or the socket took none of it. Safe to
    /// send again on a new connection, whatever the call.
    struct NotSent: Error {
        let reason: AdorchError
    }

    let path: String
    private let fd: Int32
    private let state = Mutex(State())

    /// Connects to the socket at `path`; fails with `.cannotConnect` and the errno's text.
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
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw AdorchError(.cannotConnect(path: path, errno: errno), message: "socket: \(String(cString: strerror(errno)))") }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc != 0 {
            let code = errno
            Glibc.close(fd)
            throw AdorchError(.cannotConnect(path: path, errno: code), message: "connect \(path): \(String(cString: strerror(code)))")
        }
        self.fd = fd
        let thread = Thread { [self] in readLoop() }
        thread.name = "adorch.client.reader"
        thread.start()
    }

    var isEnded: Bool { state.withLock { $0.ended } }

    /// Sends a call and returns its reply; `.connectionLost` if the connection ends first.
    func call(_ method: String, _ parameters: [String: JSONValue]) async throws -> Reply {
        let message = Self.encode(method, parameters, more: false)
        return try await withCheckedThrowingContinuation { continuation in
            if let error = enqueue(.call(method: method, continuation), message) { continuation.resume(throwing: error) }
        }
    }

    /// Sends a `more` call; its replies, then a `.connectionLost` failure if the connection
    /// ends before the last one.
    func stream(_ method: String, _ parameters: [String: JSONValue]) -> AsyncStream<Result<Reply, AdorchError>> {
        let message = Self.encode(method, parameters, more: true)
        let (stream, continuation) = AsyncStream.makeStream(of: Result<Reply, AdorchError>.self)
        if let error = enqueue(.stream(method: method, continuation), message) {
            continuation.yield(.failure(error.reason))
            continuation.finish()
        }
        return stream
    }

    /// Ends the connection: the reader wakes up, fails whoever waits and closes the socket.
    /// Under the lock, and only while the reader has not closed it: the number may already
    /// be another connection's.
    func close() {
        state.withLock { state in
            if !state.ended { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Queues the waiter and writes the call under one lock, so waiters are in the order the
    /// daemon receives the calls. A Varlink call is a few hundred bytes: the write does not block.
    private func enqueue(_ waiter: Waiter, _ message: [UInt8]) -> NotSent? {
        state.withLock { state in
            let method: String
            switch waiter {
            case .call(let m, _), .stream(let m, _): method = m
            }
            guard !state.ended else { return NotSent(reason: state.refusal ?? Self.lost(method, path)) }
            var offset = 0
            while offset < message.count {
                let n = message.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    let reason = AdorchError(.connectionLost(method: method), message: "send to \(path): \(String(cString: strerror(errno)))")
                    // Part of a call is nothing to the daemon: it never ends that message.
                    return NotSent(reason: reason)
                }
                offset += n
            }
            state.waiters.append(waiter)
            return nil
        }
    }

    private static func encode(_ method: String, _ parameters: [String: JSONValue], more: Bool) -> [UInt8] {
        var call: [String: JSONValue] = ["method": .string(method), "parameters": .object(parameters)]
        if more { call["more"] = true }
        return Array(JSONValue.object(call).jsonData) + [0]
    }

    private func readLoop() {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        reading: while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            buffer.append(contentsOf: chunk[0..<n])
            var start = 0
            while let nul = buffer[start...].firstIndex(of: 0) {
                let frame = Data(buffer[start..<nul])
                start = nul + 1
                guard case .object(let object)? = JSONValue.parse(frame) else {
                    state.withLock { $0.refusal = AdorchError(.malformedReply, message: "a reply from \(path) is not a JSON object") }
                    break reading
                }
                deliver(Reply(parameters: object["parameters"]?.objectValue ?? [:], error: object["error"]?.stringValue,
                              continues: object["continues"]?.boolValue ?? false))
            }
            buffer.removeFirst(start)
        }
        let (waiters, refusal) = state.withLock { state in
            state.ended = true
            Glibc.close(fd)
            defer { state.waiters = [] }
            return (state.waiters, state.refusal)
        }
        for waiter in waiters {
            switch waiter {
            case .call(let method, let continuation):
                continuation.resume(throwing: refusal ?? Self.lost(method, path))
            case .stream(let method, let continuation):
                continuation.yield(.failure(refusal ?? Self.lost(method, path)))
                continuation.finish()
            }
        }
    }

    private func deliver(_ reply: Reply) {
        let waiter: Waiter? = state.withLock { state in
            guard let first = state.waiters.first else { return nil }
            if case .stream = first, reply.continues { return first }
            return state.waiters.removeFirst()
        }
        switch waiter {
        case .call(_, let continuation): continuation.resume(returning: reply)
        case .stream(_, let continuation):
            continuation.yield(.success(reply))
            if !reply.continues { continuation.finish() }
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
