import AdorchLocking
import AdorchTestSupport
import Foundation
import Logging
import XCTest

@testable import AdorchVarlink

/// A real server on a Unix socket in a folder of its own, with a test interface: Echo answers
/// at once, Stream is answered continuously by `broadcast`.
final class TestServer: @unchecked Sendable {
    static let idl = """
    interface org.example.test
    method Echo(n: int) -> (n: int)
    method Stream() -> (n: int)
    """

    /// Repliers of the Stream calls in progress, and the log lines written.
    final class Record: @unchecked Sendable {
        private let lock = NSLock()
        private var streams: [VarlinkReplier] = []
        private var lines: [String] = []
        func addStream(_ replier: VarlinkReplier) { lock.withLock { streams.append(replier) } }
        var allStreams: [VarlinkReplier] { lock.withLock { streams } }
        func addLine(_ line: String) { lock.withLock { lines.append(line) } }
        var log: [String] { lock.withLock { lines } }
    }

    private struct Collector: LogHandler {
        let record: Record
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            record.addLine("\(event.message) uid=\(event.metadata?["peer_uid"].map { "\($0)" } ?? "-")")
        }
    }

    let server: VarlinkServer
    let directory: String
    let path: String
    let record = Record()

    /// With `clock`, the server's deadlines read it and are checked only by `server.sweepNow()`.
    init(limits: VarlinkLimits, clock: VarlinkClock = .system) throws {
        directory = NSTemporaryDirectory() + "adorch-varlink-\(UUID().uuidString)"
        path = directory + "/socket"
        let record = self.record
        server = try VarlinkServer(
            info: VarlinkServiceInfo(vendor: "test", product: "test", version: "0", url: "-"),
            interfaces: [VarlinkInterface(description: Self.idl)], limits: limits,
            logger: Logger(label: "test") { _ in Collector(record: record) }, clock: clock
        ) { call, replier in
            switch call.member {
            case "Echo":
                replier.reply(["n": call.parameters["n"] ?? .null])
            default:
                record.addStream(replier)
                replier.reply(["n": 0], continues: true)
            }
        }
        try server.listen(path: path)
        // Clients of other uids connect too.
        chmod(directory, 0o777)
        chmod(path, 0o666)
    }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Log lines containing `text`.
    func logLines(_ text: String) -> [String] { record.log.filter { $0.contains(text) } }

    /// Waits until `condition` holds, up to `timeout` (scaled, as every test's wait).
    func wait(_ what: String, timeout: Duration = .seconds(5), _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + timeout.scaled
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("never happened: \(what)") }
            usleep(5000)
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Tests that connect as another user need root to change their effective uid (the kernel
/// records it at connect time, for SO_PEERCRED).
func requireRoot() throws {
    guard geteuid() == 0 else { throw XCTSkip("needs root, to connect as other uids") }
}

/// A raw client connection, for misbehaving on purpose.
final class RawConnection: Sendable {
    let fd: Int32

    /// Connects as `uid` (its effective uid while connecting), with a small receive buffer if
    /// `receiveBuffer` is given.
    init(_ path: String, uid: uid_t? = nil, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        if let uid { XCTAssertEqual(seteuid(uid), 0) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let code = errno
        if uid != nil { XCTAssertEqual(seteuid(0), 0) }
        guard rc == 0 else {
            close(fd)
            throw TestFailure("connect: \(String(cString: strerror(code)))")
        }
    }

    deinit { close(fd) }

    /// Sends all of `bytes`; false once the server has closed.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    func call(_ method: String, _ parameters: [String: JSONValue] = [:], more: Bool = false) -> Bool {
        send(VarlinkWire.call(method, parameters, more: more))
    }

    /// The next message, without its NUL; nil at the end of the stream (or after 5 s).
    func readMessage() -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            guard recv(fd, &byte, 1, 0) == 1 else { return nil }
            if byte == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }

    /// Every message until the server closes the connection (or 5 s pass).
    func readToEnd() -> [String] {
        var messages: [String] = []
        while let message = readMessage() { messages.append(message) }
        return messages
    }

    /// True once the server closed the connection: a read finds the end, not a timeout.
    func isClosed() -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }
}

/// A clock a test moves by hand: the server's deadlines see only what the test advanced.
final class ManualClock: Sendable {
    private let offset = LockedValue(Duration.zero)
    private let origin = ContinuousClock.now

    var now: ContinuousClock.Instant { origin + offset.withLock { $0 } }
    var varlink: VarlinkClock { VarlinkClock.manual { [self] in now } }

    func advance(by duration: Duration) { offset.withLock { $0 += duration } }
}
