import AdorchLocking
import Foundation
import Logging

/// Where the metrics listener listens ([metrics] listen = "127.0.0.1:9464" or "[::1]:9464").
/// Loopback only unless [metrics] allow_remote = true: the metrics name the slots and
/// plugins, which is nothing an outside scraper should read without the operator saying so.
public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    /// The example the shipped config, docs/metrics.md and the errors give.
    public static let example = "127.0.0.1:9464"

    public var host: String
    public var port: UInt16
    public var isIPv6: Bool

    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The [metrics] table: nil when absent or without `listen` (no listener).
    static func read(_ t: TableReader?) throws(ConfigError) -> MetricsAddress? {
        guard let t else { return nil }
        try t.only(["listen", "allow_remote"])
        let allowRemote = try t.bool("allow_remote") ?? false
        guard let text = try t.string("listen") else { return nil }
        guard let address = parse(text) else {
            throw t.error("listen", "expected an IP address and port, as \"\(example)\" or \"[::1]:9464\", got \"\(text)\"")
        }
        guard address.isLoopback || allowRemote else {
            throw t.error("listen", "\(text) is not a loopback address; set [metrics] allow_remote = true to serve metrics beyond this host")
        }
        return address
    }

    /// "a.b.c.d:port" or "[v6]:port", port 1...65535; nil otherwise.
    static func parse(_ text: String) -> MetricsAddress? {
        let host: Substring, portText: Substring, isIPv6: Bool
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            (host, portText, isIPv6) = (text[text.index(after: text.startIndex)..<close], text[text.index(close, offsetBy: 2)...], true)
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            (host, portText, isIPv6) = (text[..<colon], text[text.index(after: colon)...], false)
        }
        guard portText.allSatisfy(\.isWholeNumber), portText.allSatisfy(\.isASCII), let port = UInt16(portText), port > 0 else { return nil }
        var buffer = in6_addr()
        guard inet_pton(isIPv6 ? AF_INET6 : AF_INET, String(host), &buffer) == 1 else { return nil }
        return MetricsAddress(host: String(host), port: port, isIPv6: isIPv6)
    }

    public var isLoopback: Bool { isIPv6 ? host == "::1" : host.hasPrefix("127.") }
}

/// [metrics queue] A minimal HTTP/1.1 responder: GET /metrics answers the metrics (OpenMetrics
/// if the Accept header asks for it, else the text format), anything else 404 or 405, then
/// the connection closes. Written here rather than taken from swift-nio: adorchd is linked
/// statically and its idle footprint is benchmarked (BENCHMARKS.md); the whole metrics
/// feature (this, the renderer, the model) adds 130 KB of code and data to the release
/// adorchd (size(1): text+data 63,658,944 -> 63,792,795 bytes), and an enabled listener
/// one thread (idle RSS 17.9 -> 18.2 MB), where NIO would bring its event loops, channels and
/// HTTP codec, and their threads, for one request per scrape.
///
/// One connection at a time, on the listener's own queue: a slow or hostile scraper holds
/// only that queue, for at most `requestTimeout`, never the engine or Varlink queues; others
/// wait in the kernel's backlog of `backlog` and past it are refused by the kernel.
///
/// @unchecked Sendable: it owns its Dispatch queue; `fd` is set once before the queue runs.
final class MetricsListener: @unchecked Sendable {
    /// A request's whole header must arrive within this; and the metrics be ready within it.
    static let requestTimeout: Duration = .seconds(2)
    /// A scrape's request line and headers are a few hundred bytes.
    static let maxRequestBytes = 8192
    static let backlog: Int32 = 8

    let address: MetricsAddress
    private let queue = DispatchQueue(label: "adorch.metrics")
    private let render: @Sendable (MetricsFormat, @escaping @Sendable (String) -> Void) -> Void
    private let logger: Logger
    private let stopping = LockedValue(false)
    private var fd: Int32 = -1

    /// `render` makes the metrics text in a format and hands it to its completion (any queue).
    init(address: MetricsAddress, logger: Logger,
         render: @escaping @Sendable (MetricsFormat, @escaping @Sendable (String) -> Void) -> Void) {
        (self.address, self.logger, self.render) = (address, logger, render)
    }

    /// Binds and listens; throws with the reason (address in use, not an address of this host).
    func start() throws {
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw MetricsListenError(address: address, reason: String(cString: strerror(errno))) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        if address.isIPv6 {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = address.port.bigEndian
            inet_pton(AF_INET6, address.host, &sa.sin6_addr)
            bound = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = address.port.bigEndian
            inet_pton(AF_INET, address.host, &sa.sin_addr)
            bound = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        guard bound == 0, listen(fd, Self.backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw MetricsListenError(address: address, reason: reason)
        }
        let listening = fd
        queue.async { [self] in acceptLoop(listening) }
    }

    /// Wakes the blocked accept and ends the loop, which closes the socket.
    func stop() {
        stopping.withLock { $0 = true }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func acceptLoop(_ fd: Int32) {
        while true {
            let client = accept(fd, nil, nil)
            if stopping.withLock({ $0 }) {
                if client >= 0 { close(client) }
                break
            }
            guard client >= 0 else {
                // EMFILE and the like: do not spin on a socket that keeps failing.
                if errno != EINTR && errno != ECONNABORTED { Thread.sleep(forTimeInterval: 0.1) }
                continue
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            serve(client)
            close(client)
        }
        close(fd)
    }

    private func serve(_ client: Int32) {
        let deadline = ContinuousClock.now + Self.requestTimeout
        var timeout = timeval(tv_sec: Int(Self.requestTimeout.components.seconds), tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let request = readRequest(client, deadline: deadline) else {
            return respond(client, status: "400 Bad Request", type: "text/plain", body: "a request line and headers within \(Self.maxRequestBytes) bytes and \(Self.requestTimeout)\n")
        }
        let lines = request.split(separator: "\r\n", omittingEmptySubsequences: false)
        let parts = lines.first?.split(separator: " ") ?? []
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else {
            return respond(client, status: "400 Bad Request", type: "text/plain", body: "not an HTTP/1.x request\n")
        }
        let path = parts[1].split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard path == "/metrics" else { return respond(client, status: "404 Not Found", type: "text/plain", body: "only /metrics is served\n") }
        guard parts[0] == "GET" || parts[0] == "HEAD" else {
            return respond(client, status: "405 Method Not Allowed", type: "text/plain", body: "GET /metrics\n", extra: "Allow: GET, HEAD\r\n")
        }
        let accept = lines.dropFirst().first { $0.lowercased().hasPrefix("accept:") }.map { String($0.dropFirst("accept:".count)) }
        let format = MetricsFormat.negotiated(accept: accept)
        let text = LockedValue<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        render(format) { rendered in
            text.withLock { $0 = rendered }
            done.signal()
        }
        guard done.wait(timeout: .now() + .milliseconds(Int(Self.requestTimeout / .milliseconds(1)))) == .success, let body = text.withLock({ $0 }) else {
            logger.warning("metrics: the daemon did not answer a scrape within \(Self.requestTimeout)")
            return respond(client, status: "503 Service Unavailable", type: "text/plain", body: "the daemon is busy; scrape again\n")
        }
        respond(client, status: "200 OK", type: format.contentType, body: parts[0] == "HEAD" ? nil : body, length: body.utf8.count)
    }

    /// The request line and headers, up to the blank line; nil if they do not come whole in time.
    private func readRequest(_ client: Int32, deadline: ContinuousClock.Instant) -> String? {
        var buffer = [UInt8](repeating: 0, count: Self.maxRequestBytes)
        var used = 0
        while used < buffer.count, ContinuousClock.now < deadline {
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress! + used, $0.count - used, 0) }
            guard n > 0 else { return nil }
            used += n
            let end = Array("\r\n\r\n".utf8)
            if used >= 4, let range = buffer[..<used].firstRange(of: end) {
                return String(decoding: buffer[..<range.lowerBound], as: UTF8.self)
            }
        }
        return nil
    }

    private func respond(_ client: Int32, status: String, type: String, body: String?, length: Int? = nil, extra: String = "") {
        let content = body ?? ""
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(length ?? content.utf8.count)\r\n\(extra)Connection: close\r\n\r\n"
        var bytes = Array(head.utf8) + Array(content.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeMutableBytes { send(client, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            sent += n
        }
    }
}

/// The metrics listener could not listen: a start error, naming the address and why.
public struct MetricsListenError: Error, CustomStringConvertible {
    public var address: MetricsAddress
    public var reason: String
    public var description: String { "[metrics] listen = \"\(address)\": cannot listen: \(reason)" }
}
