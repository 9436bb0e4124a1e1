import AdorchLocking
import Foundation

/// One end of the socketpair between the daemon and an isolated plugin's host: frames out
/// (PluginWire), frames in on a reader thread of its own.
///
/// Sending never blocks the caller: a frame the socket cannot take at once waits in a
/// backlog that the channel's own queue writes out, so an engine queue sending to a host
/// that stopped reading is not held up (the watchdog ends such a host).
///
/// The descriptor is closed by the reader when the channel ends, under the lock every write
/// takes: a write can never reach another socket that reused the number, nor a reader
/// another's frames (the reader thread keeps the channel alive until then).
///
/// @unchecked Sendable: it owns a file descriptor, a reader thread and a Dispatch queue;
/// the backlog and the descriptor's state are behind its lock, the rest is immutable after init.
public final class PluginChannel: @unchecked Sendable {
    public let fd: Int32
    private let backlog = LockedValue<(frames: [[UInt8]], flushing: Bool, closed: Bool, fdClosed: Bool)>(([], false, false, false))
    private let writer: DispatchQueue

    /// `fd` is a connected stream socket; the channel makes it non-blocking and owns it.
    public init(fd: Int32, label: String) {
        self.fd = fd
        writer = DispatchQueue(label: "adorch.channel.\(label)")
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        // Only a channel that never read: a reading one is kept alive by its reader until it closed the descriptor.
        if !backlog.withLock({ $0.fdClosed }) { close(fd) }
    }

    /// Queues `frame`; written at once when nothing is waiting before it.
    public func send(_ frame: [UInt8]) {
        let start = backlog.withLock { state -> Bool in
            guard !state.closed else { return false }
            if state.frames.isEmpty, !state.flushing {
                let written = Self.writeSome(fd, frame[...])
                if written == frame.count { return false }
                state.frames.append(Array(frame[max(written, 0)...]))
            } else {
                state.frames.append(frame)
            }
            guard !state.flushing else { return false }
            state.flushing = true
            return true
        }
        if start { writer.async { [self] in flush() } }
    }

    /// Stops sending: what is still in the backlog is dropped.
    public func shutdownSending() {
        backlog.withLock { $0.closed = true; $0.frames.removeAll() }
    }

    private func flush() {
        while true {
            let next = backlog.withLock { state -> [UInt8]? in
                if state.closed || state.frames.isEmpty {
                    state.flushing = false
                    return nil
                }
                return state.frames.removeFirst()
            }
            guard var frame = next?[...] else { return }
            while !frame.isEmpty {
                let written = backlog.withLock { $0.fdClosed ? -1 : Self.writeSome(fd, frame) }
                if written < 0 { return shutdownSending() }  // the peer is gone: the reader sees it too
                frame = frame.dropFirst(written)
                if !frame.isEmpty {
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&p, 1, 100)
                }
            }
        }
    }

    /// Bytes written, 0 if the socket is full, -1 if it is broken.
    private static func writeSome(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Int {
        while true {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n >= 0 { return n }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1
        }
    }

    /// Reads frames until the peer closes or breaks the channel, on a thread of its own:
    /// `onFrame` gets each frame's body, `onEnd` once, with why it ended (nil: a clean close).
    public func startReading(name: String, onFrame: @escaping @Sendable (ArraySlice<UInt8>) -> Void,
                             onEnd: @escaping @Sendable (String?) -> Void) {
        let fd = fd
        let thread = Thread { [self] in
            let onEnd: (String?) -> Void = { why in
                self.backlog.withLock { state in
                    state.closed = true
                    state.fdClosed = true
                    state.frames.removeAll()
                    close(fd)
                }
                onEnd(why)
            }
            var buffer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            var start = 0
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n == 0 { return onEnd(nil) }
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN || errno == EWOULDBLOCK {
                        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                        _ = poll(&p, 1, -1)
                        continue
                    }
                    return onEnd(String(cString: strerror(errno)))
                }
                buffer.append(contentsOf: chunk[0..<n])
                while buffer.count - start >= 4 {
                    let length = Int(buffer[start..<(start + 4)].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                    guard length > 0, length <= PluginWire.maxFrame else {
                        return onEnd("a frame of \(length) bytes (at most \(PluginWire.maxFrame))")
                    }
                    guard buffer.count - start - 4 >= length else { break }
                    onFrame(buffer[(start + 4)..<(start + 4 + length)])
                    start += 4 + length
                }
                if start > 0, start * 2 >= buffer.count {
                    buffer.removeFirst(start)
                    start = 0
                }
            }
        }
        thread.name = "adorch.read.\(name)"
        thread.start()
    }
}
