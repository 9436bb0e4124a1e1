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
/// One poll(2) loop on the listener's own queue watches every open connection at once, each
/// with its own deadline: a silent, slow or non-reading client costs only its own scrape,
/// never another's, and never the engine or Varlink queues. Past `maxConnections` the oldest
/// connection left silent is dropped for the newcomer, so idle connections cannot crowd out a scraper.
///
/// @unchecked Sendable: it owns its Dispatch queue; `fd` and `wake` are set once before the queue runs.
final class MetricsListener: @unchecked Sendable {
    /// Each phase of a connection (its request arriving whole, the daemon's answer, the
    /// answer's sending) must end within this, or the connection is closed.
    static let requestTimeout: Duration = .seconds(2)
    /// A scrape's request line and headers are a few hundred bytes.
    static let maxRequestBytes = 8192
    /// Also the kernel's queue of half-open connections: past it the kernel answers with SYN
    /// cookies, and a connection made from a cookie is handed over without waiting for its
    /// first bytes (`TCP_DEFER_ACCEPT` does not hold for it).
    static let backlog: Int32 = 64
    /// Connections read at once: a handful of scrapers, with room to spare.
    static let maxConnections = 16
    /// A connection silent for less than this is not dropped for a newcomer: a scraper sends
    /// its request right after connecting, and one handed over before its request (a SYN
    /// cookie's) must not be taken for silent by the connections accepted in the same burst.
    static let silentGrace: Duration = .milliseconds(100)
    /// Connections open at once while the newest are within `silentGrace`: past it a newcomer is reset.
    static let maxOpen = 4 * maxConnections
    /// A scrape within this of the last render of its format gets that render again: a
    /// client scraping thousands of times a second costs one render a second, not a core.
    static let renderReuse: Duration = .seconds(1)

    let address: MetricsAddress
    private let queue = DispatchQueue(label: "adorch.metrics")
    private let render: @Sendable (MetricsFormat, @escaping @Sendable (String) -> Void) -> Void
    private let logger: Logger
    /// Rendered answers by connection, and whether the loop has ended (the wake pipe closed).
    private let mailbox = LockedValue<(answers: [UInt64: [UInt8]], closed: Bool, stopping: Bool)>(([:], false, false))
    /// The last render of each format and when it was made (`renderReuse`).
    private let rendered = LockedValue<[MetricsFormat: (at: ContinuousClock.Instant, text: String)]>([:])
    private var fd: Int32 = -1
    /// A pipe whose write end wakes the poll loop: an answer is ready, or stop.
    private var wake: (read: Int32, write: Int32) = (-1, -1)

    /// `render` makes the metrics text in a format and hands it to its completion (any queue).
    init(address: MetricsAddress, logger: Logger,
         render: @escaping @Sendable (MetricsFormat, @escaping @Sendable (String) -> Void) -> Void) {
        (self.address, self.logger, self.render) = (address, logger, render)
    }

    /// Binds and listens; throws with the reason (address in use, not an address of this host).
    func start() throws(MetricsListenError) {
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw MetricsListenError(address: address, errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        // The kernel holds a connection back until its first bytes arrive (for up to the
        // request timeout): a connection opened and left silent takes none of the listener's
        // slots, and a scrape's request is there to read when it is accepted.
        var deferred = Int32(Self.requestTimeout.components.seconds)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_DEFER_ACCEPT, &deferred, socklen_t(MemoryLayout<Int32>.size))
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
        var pipeFDs: [Int32] = [-1, -1]
        guard bound == 0, listen(fd, Self.backlog) == 0, pipe(&pipeFDs) == 0 else {
            let code = errno
            close(fd)
            throw MetricsListenError(address: address, errno: code)
        }
        wake = (pipeFDs[0], pipeFDs[1])
        for end in pipeFDs { Self.setNonBlockingCloseOnExec(end) }
        let listening = fd
        queue.async { [self] in loop(listening) }
    }

    /// Ends the loop, which closes every connection and the socket.
    func stop() {
        mailbox.withLock { box in
            box.stopping = true
            if !box.closed { var byte: UInt8 = 1; _ = write(wake.write, &byte, 1) }
        }
    }

    /// One client: what it sent so far, then (after the daemon answered) what is left to send.
    private struct Connection {
        var fd: Int32
        let id: UInt64
        let accepted: ContinuousClock.Instant
        var deadline: ContinuousClock.Instant
        var input: [UInt8] = []
        /// nil while the request is still arriving or the daemon is rendering.
        var output: [UInt8]?
        var sent = 0
        var rendering = false
        /// Answered before its request was read whole (431): what it still sends is read and
        /// dropped after the answer, so that closing does not reset the answer away.
        var discarding = false

        /// Its request has come whole: it is being answered, and is never dropped for a newcomer.
        var isAnswering: Bool { rendering || output != nil }
    }

    private func loop(_ listening: Int32) {
        var connections: [Connection] = []
        var nextID: UInt64 = 0
        while !mailbox.withLock({ $0.stopping }) {
            var fds = [pollfd(fd: listening, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            // A connection waiting for the daemon's answer is not watched (poll skips a negative
            // fd): a client that hung up meanwhile would wake the loop until then.
            for c in connections {
                fds.append(pollfd(fd: c.output == nil && c.rendering ? -1 : c.fd, events: Int16(c.output == nil ? POLLIN : POLLOUT), revents: 0))
            }
            let soonest = connections.map(\.deadline).min()
            let wait = soonest.map { max(0, Int32(($0 - ContinuousClock.now) / .milliseconds(1)) + 1) } ?? -1
            guard poll(&fds, nfds_t(fds.count), wait) >= 0 || errno == EINTR else {
                logger.error("metrics: poll failed: \(String(cString: strerror(errno)))")
                break
            }
            if fds[1].revents != 0 {
                var drained = [UInt8](repeating: 0, count: 64)
                while read(wake.read, &drained, drained.count) > 0 {}
                let answers = mailbox.withLock { box in defer { box.answers = [:] }; return box.answers }
                for index in connections.indices {
                    guard let answer = answers[connections[index].id] else { continue }
                    (connections[index].output, connections[index].rendering) = (answer, false)
                    connections[index].deadline = .now + Self.requestTimeout
                }
            }
            for (index, entry) in zip(connections.indices, fds.dropFirst(2)) where entry.revents != 0 {
                step(&connections[index])
            }
            let now = ContinuousClock.now
            for index in connections.indices where connections[index].deadline <= now && connections[index].fd >= 0 {
                expire(&connections[index])
            }
            connections.removeAll { $0.fd < 0 }
            if fds[0].revents != 0 {
                while case let client = accept(listening, nil, nil), client >= 0 {
                    Self.setNonBlockingCloseOnExec(client)
                    // Full: the oldest connection silent for `silentGrace` makes room. One being
                    // answered is never dropped, so connections opened and left silent, however
                    // fast, cannot take a scrape's answer from it. If none is, the newcomer waits
                    // its turn beside them, up to `maxOpen`; past that it goes.
                    let now = ContinuousClock.now
                    if connections.count >= Self.maxConnections {
                        if let silent = makeRoom(in: &connections, now: now) {
                            let dropped = connections.remove(at: silent)
                            if dropped.fd >= 0 { Self.reset(dropped.fd) }
                        } else if connections.count >= Self.maxOpen {
                            Self.reset(client)
                            continue
                        }
                    }
                    connections.append(Connection(fd: client, id: nextID, accepted: now, deadline: now + Self.requestTimeout))
                    nextID += 1
                }
                // EMFILE and the like: the socket stays readable, so do not spin on it.
                if ![EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED].contains(errno) { Thread.sleep(forTimeInterval: 0.1) }
            }
        }
        for c in connections { close(c.fd) }
        close(listening)
        mailbox.withLock { box in
            box.closed = true
            close(wake.read)
            close(wake.write)
        }
    }

    /// The connection to drop for a newcomer: the oldest silent for `silentGrace`, or one its
    /// client closed. What arrived since the last poll is read first, so a scraper accepted
    /// in the same burst as a churn of silent connections is answered, not taken for silent.
    private func makeRoom(in connections: inout [Connection], now: ContinuousClock.Instant) -> Int? {
        for index in connections.indices where !connections[index].isAnswering {
            var peek: UInt8 = 0
            if recv(connections[index].fd, &peek, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) >= 0 || (errno != EAGAIN && errno != EINTR) {
                step(&connections[index])  // bytes, the client's close, or an error: read it
                if connections[index].isAnswering { continue }
            }
            if connections[index].fd >= 0, now - connections[index].accepted < Self.silentGrace { continue }
            return index
        }
        return nil
    }

    /// The connection is readable or writable: reads what came, or sends what is left. A
    /// connection done with sets its fd to -1 (closed).
    private func step(_ c: inout Connection) {
        if let output = c.output {
            let n = output.withUnsafeBytes { send(c.fd, $0.baseAddress! + c.sent, $0.count - c.sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 { c.sent += n }
            let failed = n < 0 && errno != EAGAIN && errno != EINTR
            if c.sent == output.count, c.discarding, !failed {
                // Sent: the rest of what it sends is read and dropped until it closes or its time is up.
                shutdown(c.fd, Int32(SHUT_WR))
                c.output = nil
            } else if c.sent == output.count || failed {
                finish(&c)
            }
            return
        }
        guard !c.rendering else { return }
        var buffer = [UInt8](repeating: 0, count: Self.maxRequestBytes - c.input.count + 1)
        let n = recv(c.fd, &buffer, buffer.count, 0)
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard n > 0 else { return finish(&c) }
        guard !c.discarding else { return }
        c.input += buffer[..<n]
        if let head = HTTPRequestHead(c.input) {
            answer(head, on: &c)
        } else if c.input.count > Self.maxRequestBytes {
            c.discarding = true
            reply(&c, status: "431 Request Header Fields Too Large", body: "a request line and headers within \(Self.maxRequestBytes) bytes\n")
        }
    }

    private func answer(_ head: HTTPRequestHead, on c: inout Connection) {
        guard head.isHTTP1 else { return reply(&c, status: "400 Bad Request", body: "not an HTTP/1.x request\n") }
        guard head.path == "/metrics" else { return reply(&c, status: "404 Not Found", body: "only /metrics is served\n") }
        guard head.method == "GET" || head.method == "HEAD" else {
            return reply(&c, status: "405 Method Not Allowed", body: "GET /metrics\n", extra: "Allow: GET, HEAD\r\n")
        }
        let format = MetricsFormat.negotiated(accept: head.accept)
        let (id, isHead, wake) = (c.id, head.method == "HEAD", wake.write)
        if let last = rendered.withLock({ $0[format] }), ContinuousClock.now - last.at < Self.renderReuse {
            c.output = Self.response(status: "200 OK", type: format.contentType, body: last.text, sendBody: !isHead)
            c.deadline = .now + Self.requestTimeout
            return step(&c)
        }
        c.rendering = true
        c.deadline = .now + Self.requestTimeout
        render(format) { [mailbox, rendered] text in
            rendered.withLock { $0[format] = (.now, text) }
            let response = Self.response(status: "200 OK", type: format.contentType, body: text, sendBody: !isHead)
            mailbox.withLock { box in
                guard !box.closed else { return }
                box.answers[id] = response
                var byte: UInt8 = 1
                _ = write(wake, &byte, 1)
            }
        }
    }

    /// The connection's time ran out: while reading the request, it is told so; while the
    /// daemon renders, that it is busy (one try to send either); while sending, it is reset.
    private func expire(_ c: inout Connection) {
        if c.discarding, c.output == nil { return finish(&c) }
        if c.output == nil {
            if c.rendering { logger.warning("metrics: the daemon did not answer a scrape within \(Self.requestTimeout)") }
            let response = c.rendering
                ? Self.response(status: "503 Service Unavailable", type: "text/plain", body: "the daemon is busy; scrape again\n")
                : Self.response(status: "400 Bad Request", type: "text/plain",
                                body: "a request line and headers within \(Self.maxRequestBytes) bytes and \(Self.requestTimeout)\n")
            _ = response.withUnsafeBytes { send(c.fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            return finish(&c)
        }
        Self.reset(c.fd)
        c.fd = -1
    }

    /// Closes with a reset: the kernel drops what a client too slow to read has not taken,
    /// instead of trickling it out after the close.
    private static func reset(_ fd: Int32) {
        var abort = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        close(fd)
    }

    private func reply(_ c: inout Connection, status: String, body: String, extra: String = "") {
        c.output = Self.response(status: status, type: "text/plain", body: body, extra: extra)
        c.deadline = .now + Self.requestTimeout
        step(&c)
    }

    private func finish(_ c: inout Connection) {
        close(c.fd)
        c.fd = -1
    }

    /// Glibc's module leaves out pipe2 and accept4 (GNU extensions): the flags one call later.
    private static func setNonBlockingCloseOnExec(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    static func response(status: String, type: String, body: String, sendBody: Bool = true, extra: String = "") -> [UInt8] {
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\(extra)Connection: close\r\n\r\n"
        return Array(head.utf8) + (sendBody ? Array(body.utf8) : [])
    }
}

/// The [metrics] listener as the config asks for it, started at start and at each reload.
/// An optional endpoint never stops ad serving: a listener that cannot listen is logged
/// (naming `metrics.listen` and the errno), shown in GetStatus, and tried again at the next
/// reload, while adorchd runs on without it.
final class MetricsEndpoint: Sendable {
    /// What GetStatus shows: the address asked for and, if not listening, why.
    struct State: Sendable, Equatable {
        var address: MetricsAddress
        var error: String?
    }

    private let logger: Logger
    private let render: @Sendable (MetricsFormat, @escaping @Sendable (String) -> Void) -> Void
    private let current = LockedValue<(listener: MetricsListener?, state: State?)>((nil, nil))

    init(logger: Logger, render: @escaping @Sendable (MetricsFormat, @escaping @Sendable (String) -> Void) -> Void) {
        (self.logger, self.render) = (logger, render)
    }

    var state: State? { current.withLock { $0.state } }

    /// Serves `address` (nil: no listener): a listener already on it stays; one elsewhere
    /// stops; a failed one is tried again.
    func apply(_ address: MetricsAddress?) {
        current.withLock { now in
            if let listener = now.listener, listener.address == address { return }
            if let listener = now.listener {
                listener.stop()
                logger.notice("metrics: no longer serving http://\(listener.address)/metrics")
            }
            now = (nil, address.map { State(address: $0) })
            guard let address else { return }
            let listener = MetricsListener(address: address, logger: logger, render: render)
            do {
                try listener.start()
                now.listener = listener
                logger.notice("metrics: serving http://\(address)/metrics")
            } catch {
                now.state?.error = "\(error)"
                logger.error("\(error); adorchd runs without the metrics listener and tries again at the next reload")
            }
        }
    }

    func stop() { apply(nil) }
}

/// An HTTP/1.x request's line and headers, once they have come whole (up to the blank line,
/// CRLF or bare LF line ends alike).
struct HTTPRequestHead: Equatable {
    var method: String
    var path: String
    var isHTTP1: Bool
    /// Every Accept header's value, joined as one list (RFC 9110 allows several).
    var accept: String?

    init?(_ bytes: [UInt8]) {
        guard let end = Self.endOfHead(bytes) else { return nil }
        // "\r\n" is one Character in Swift: split on newlines, not on "\n".
        let lines = String(decoding: bytes[..<end], as: UTF8.self).split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        let parts = lines.first?.split(separator: " ") ?? []
        isHTTP1 = parts.count == 3 && parts[2].hasPrefix("HTTP/1.")
        method = parts.first.map(String.init) ?? ""
        path = parts.count > 1 ? parts[1].split(separator: "?", maxSplits: 1).first.map(String.init) ?? "" : ""
        let accepts = lines.dropFirst().filter { $0.lowercased().hasPrefix("accept:") }.map { $0.dropFirst("accept:".count) }
        accept = accepts.isEmpty ? nil : accepts.joined(separator: ",")
    }

    /// Where the blank line that ends the head starts; nil until it has come.
    static func endOfHead(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            let next = newline + 1
            if next < bytes.count, bytes[next] == UInt8(ascii: "\n") { return newline }
            if next + 1 < bytes.count, bytes[next] == UInt8(ascii: "\r"), bytes[next + 1] == UInt8(ascii: "\n") { return newline }
            index = next
        }
        return nil
    }
}

/// The metrics listener could not listen: a start error, naming the address and why.
public struct MetricsListenError: Error, CustomStringConvertible {
    public var address: MetricsAddress
    public var errno: Int32
    public var description: String {
        "metrics.listen = \"\(address)\": cannot listen: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
