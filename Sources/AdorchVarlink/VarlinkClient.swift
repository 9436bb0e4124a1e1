import Foundation

/// A blocking Varlink client: one connection, one call at a time. For adorchctl and tests.
public final class VarlinkClient {
    public enum Failure: Error, CustomStringConvertible {
        case socket(VarlinkSocketError)
        case io(String)
        case malformedReply(String)

        public var description: String {
            switch self {
            case .socket(let error): error.description
            case .io(let what): what
            case .malformedReply(let what): "malformed reply: \(what)"
            }
        }
    }

    /// One reply: parameters, or an error with its name and parameters.
    public typealias Reply = VarlinkReply

    private let fd: Int32
    private var buffer = Data()

    /// Connects to `path`; `timeout` bounds every read.
    public init(path: String, timeout: Duration = .seconds(30)) throws(Failure) {
        do { fd = try UnixSocket.connect(path: path) } catch { throw .socket(error) }
        setReadTimeout(timeout)
    }

    /// Bounds every read from now on: a subscriber waits long for its first reply and briefly
    /// for events, which come only when something happens.
    public func setReadTimeout(_ timeout: Duration) {
        var tv = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(fd) }

    /// Sends one call and returns its (first) reply.
    public func call(_ method: String, _ parameters: [String: JSONValue] = [:], more: Bool = false) throws(Failure) -> Reply {
        do {
            try sendRaw(Data(VarlinkWire.call(method, parameters, more: more)))
        } catch {
            // A refused connection is answered and closed before its first call: the answer
            // says why, where the failed send says only that the daemon hung up.
            if let reason = try? nextReply() { return reason }
            throw error
        }
        return try nextReply()
    }

    /// Writes bytes as they are: for tests that send what a well-behaved client would not.
    public func sendRaw(_ data: Data) throws(Failure) {
        var offset = 0
        while offset < data.count {
            let n = data.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io("send: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    /// The next reply on the connection (for `more` calls, call again while `continues`).
    public func nextReply() throws(Failure) -> Reply {
        guard let reply = VarlinkReply(message: try nextMessage()) else { throw .malformedReply("not a JSON object") }
        return reply
    }

    private func nextMessage() throws(Failure) -> Data {
        while true {
            if let nul = buffer.firstIndex(of: 0) {
                let message = Data(buffer[buffer.startIndex..<nul])
                buffer = Data(buffer[(nul + 1)...])
                return message
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { throw .io("the daemon closed the connection") }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .io("no reply in time") }
                throw .io("recv: \(String(cString: strerror(errno)))")
            }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }
}
