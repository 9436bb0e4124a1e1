import CEpoll
import Dispatch
import Foundation

/// Tells a serial queue when its sockets can be read or written: one epoll instance, waited
/// on by a thread of its own.
///
/// In place of Dispatch read and write sources, whose epoll backend on Linux corrupts its own
/// lists under connection churn: its manager thread walks a list another thread is unlinking
/// from (swift-corelibs-libdispatch#949). A plain Dispatch echo server whose clients connect,
/// send and hang up dies of it within minutes.
///
/// Every watch is one-shot: an event disarms it, and it is armed again only after its handler
/// has run on the queue, so the thread never reports a socket the queue is still working on.
/// A watch leaves the epoll set before its descriptor is closed, and it is named by a number
/// that is never reused: an event already on its way for a closed descriptor finds no handler,
/// even when the descriptor's number now belongs to a new connection.
///
/// @unchecked Sendable: `watches`, `nextToken` and `firing` are touched only on `queue`;
/// the thread reads only `epollFD` and `wakeFD`, which never change.
final class SocketWatcher: @unchecked Sendable {
    struct Interest: OptionSet, Sendable {
        let rawValue: UInt32
        static let readable = Interest(rawValue: 1)
        static let writable = Interest(rawValue: 2)
    }

    /// Names one watch for as long as the watcher lives.
    struct Token: Hashable, Sendable {
        fileprivate let rawValue: UInt64
    }

    private struct Watch {
        let fd: Int32
        var interest: Interest
        let handler: (Interest) -> Void
    }

    private let queue: DispatchQueue
    private let epollFD: Int32
    /// Wakes the thread to end it; it is watched under token 0, which no socket gets.
    private let wakeFD: Int32
    private var watches: [UInt64: Watch] = [:]
    private var nextToken: UInt64 = 1
    /// The watch whose handler is running: it is re-armed when the handler returns.
    private var firing: UInt64?

    /// Starts the thread. Fails only when the process is out of descriptors.
    init(queue: DispatchQueue, name: String) throws(VarlinkSocketError) {
        self.queue = queue
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw .system(path: name, call: "epoll_create1", errno: errno) }
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wakeFD >= 0 else {
            let code = errno
            Glibc.close(epollFD)
            throw .system(path: name, call: "eventfd", errno: code)
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = 0
        _ = epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    deinit {
        Glibc.close(epollFD)
        Glibc.close(wakeFD)
    }

    /// Ends the thread; what it already saw is still handed to the queue. [any thread]
    func shutdown() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    /// Calls `handler` on the queue with what `fd` is ready for, each time it is, until
    /// `unwatch`. [queue]
    func watch(_ fd: Int32, for interest: Interest, handler: @escaping (Interest) -> Void) -> Token {
        dispatchPrecondition(condition: .onQueue(queue))
        let token = nextToken
        nextToken += 1
        watches[token] = Watch(fd: fd, interest: interest, handler: handler)
        control(EPOLL_CTL_ADD, fd: fd, token: token, interest: interest)
        return Token(rawValue: token)
    }

    /// Changes what a watch waits for. [queue]
    func update(_ token: Token, to interest: Interest) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard var watch = watches[token.rawValue], watch.interest != interest else { return }
        watch.interest = interest
        watches[token.rawValue] = watch
        // Re-arming a watch whose event is on its way to the queue can only report it twice,
        // and a handler finds nothing to do the second time.
        if firing != token.rawValue { control(EPOLL_CTL_MOD, fd: watch.fd, token: token.rawValue, interest: interest) }
    }

    /// Stops watching; only then may the caller close the descriptor. [queue]
    func unwatch(_ token: Token) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let watch = watches.removeValue(forKey: token.rawValue) else { return }
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, watch.fd, nil)
    }

    private func control(_ operation: Int32, fd: Int32, token: UInt64, interest: Interest) {
        var event = epoll_event()
        // A hang-up is news only to a watch that reads: one that paused reading would be told
        // of it over and over (it stays true), and spin.
        event.events = EPOLLONESHOT.rawValue
            | (interest.contains(.readable) ? EPOLLIN.rawValue | EPOLLRDHUP.rawValue : 0)
            | (interest.contains(.writable) ? EPOLLOUT.rawValue : 0)
        event.data.u64 = token
        if epoll_ctl(epollFD, operation, fd, &event) != 0 {
            // Only a bug of ours (a closed or unknown descriptor) gets here; the socket would
            // never be served again, so it must not pass quietly.
            preconditionFailure("epoll_ctl(\(operation)) on fd \(fd): \(String(cString: strerror(errno)))")
        }
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 128)
        while true {
            let count = events.withUnsafeMutableBufferPointer { epoll_wait(epollFD, $0.baseAddress, Int32($0.count), -1) }
            if count < 0 {
                if errno == EINTR { continue }
                preconditionFailure("epoll_wait: \(String(cString: strerror(errno)))")
            }
            var ready: [(UInt64, UInt32)] = []
            ready.reserveCapacity(Int(count))
            var stopping = false
            for event in events[0..<Int(count)] {
                if event.data.u64 == 0 { stopping = true } else { ready.append((event.data.u64, event.events)) }
            }
            // All that is ready, handled on the queue in one go. `sync` runs it on this thread
            // when the queue is idle: a call costs no thread wake-up to get there. Nothing on
            // the queue ever waits for this thread, so waiting for the queue cannot deadlock.
            if !ready.isEmpty { queue.sync { fire(ready) } }
            if stopping { return }
        }
    }

    private func fire(_ ready: [(UInt64, UInt32)]) {
        let readable = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue
        let writable = EPOLLOUT.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue
        for (token, events) in ready {
            guard let watch = watches[token] else { continue }  // unwatched since it was reported
            var interest: Interest = []
            if events & readable != 0 { interest.insert(.readable) }
            if events & writable != 0 { interest.insert(.writable) }
            firing = token
            watch.handler(interest)
            firing = nil
            if let armed = watches[token] { control(EPOLL_CTL_MOD, fd: armed.fd, token: token, interest: armed.interest) }
        }
    }
}
