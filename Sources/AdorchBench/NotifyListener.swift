import Foundation
import Synchronization

/// A NOTIFY_SOCKET listener: what systemd would hear from adorchd (READY=1, STATUS=, …).
/// The benchmarks time READY=1 with it and wait on STATUS= instead of polling the daemon.
public final class NotifyListener {
    public let path: String
    private let fd: Int32
    /// Every message received so far, in order.
    public private(set) var history: [String] = []

    public init(in dir: URL) throws {
        path = dir.appendingPathComponent("notify.sock").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw BenchError("bind \(path): \(String(cString: strerror(errno)))") }
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Set once a thread reads and drops everything; that thread then owns the socket.
    private let discarding = Flag()

    deinit {
        if discarding.isSet { discarding.stop.store(true, ordering: .relaxed) } else { close(fd) }
    }

    /// The next datagram, or nil if none came within 100 ms.
    public func next() -> (at: ContinuousClock.Instant, text: String)? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[0..<n], as: UTF8.self)
        history.append(text)
        return (ContinuousClock.now, text)
    }

    /// From now on a thread of its own reads and drops every notification. A long run needs
    /// it: past ten unread datagrams (net.unix.max_dgram_qlen) the daemon's next sd_notify
    /// blocks, as it would if systemd stopped reading.
    public func discardFromNow() {
        guard !discarding.isSet else { return }
        discarding.set()
        let fd = fd, flag = discarding
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            // recv returns at least every 100 ms (SO_RCVTIMEO), to see the stop flag.
            while !flag.stop.load(ordering: .relaxed) { _ = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) } }
            close(fd)
        }
    }

    /// Reads until a message satisfies `match`; returns everything read, that one last.
    public func read(until what: String, timeout: Duration = .seconds(10), _ match: (String) -> Bool) throws -> [(at: ContinuousClock.Instant, text: String)] {
        let deadline = ContinuousClock.now + timeout
        var seen: [(at: ContinuousClock.Instant, text: String)] = []
        while ContinuousClock.now < deadline {
            guard let message = next() else { continue }
            seen.append(message)
            if match(message.text) { return seen }
        }
        throw BenchError("no \(what) within \(timeout); got \(seen.map(\.text))")
    }
}

private final class Flag: Sendable {
    private let value = Atomic(false)
    let stop = Atomic(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}

/// A benchmark could not measure something; the message says what and why.
public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
