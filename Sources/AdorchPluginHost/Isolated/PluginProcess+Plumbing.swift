import AdorchLocking
import Dispatch
import Foundation

/// The one thread children that must die with their parent are spawned from, alive as long
/// as the process: such a child asks the kernel (PR_SET_PDEATHSIG) to kill it when its parent
/// goes, and "parent" there is the thread that spawned it. Spawned from a Dispatch worker,
/// which exits after a few idle seconds, a restarted host was killed about 5 s after it
/// started. The daemon spawns its plugin hosts here; the tests and benchmarks their daemons.
public enum SpawnThread {
    private static let jobs = LockedValue<[@Sendable () -> Void]>([])
    private static let ready = DispatchSemaphore(value: 0)
    private static let started: Bool = {
        let thread = Thread {
            while true {
                ready.wait()
                jobs.withLock { $0.removeFirst() }()
            }
        }
        thread.name = "adorch.spawn"
        thread.start()
        return true
    }()

    /// Runs `body` on the spawn thread and returns its result.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        _ = started
        let done = DispatchSemaphore(value: 0)
        let result = LockedValue<T?>(nil)
        jobs.withLock { $0.append { result.withLock { $0 = body() }; done.signal() } }
        ready.signal()
        done.wait()
        return result.withLock { $0! }
    }
}

/// Where the reader thread's replies go: held while the start waits for them, then handed
/// to the instance, with an end that came meanwhile handed on too.
final class Router: Sendable {
    private struct Routes {
        var held: [PluginWire.Reply] = []
        var ended: String?? = nil
        var onReply: (@Sendable (PluginWire.Reply) -> Void)?
        var onEnd: (@Sendable (String?) -> Void)?
    }

    private let routes = LockedValue(Routes())
    let arrived = DispatchSemaphore(value: 0)

    func reply(_ reply: PluginWire.Reply) {
        let onReply = routes.withLock { r -> (@Sendable (PluginWire.Reply) -> Void)? in
            if r.onReply == nil { r.held.append(reply) }
            return r.onReply
        }
        guard let onReply else {
            arrived.signal()
            return
        }
        onReply(reply)
    }

    /// A frame that does not decode ends the host: it is not speaking this daemon's wire.
    func malformed(_ why: String) { end("it sent a malformed message: \(why)") }

    func end(_ why: String?) {
        guard let onEnd = routes.withLock({ r -> (@Sendable (String?) -> Void)? in
            if r.ended == nil { r.ended = .some(why) } else { return nil }
            return r.onEnd
        }) else {
            arrived.signal()
            return
        }
        onEnd(why)
    }

    func take() -> ([PluginWire.Reply], String??) {
        routes.withLock { r in
            defer { r.held.removeAll() }
            return (r.held, r.ended)
        }
    }

    func attach(onReply: @escaping @Sendable (PluginWire.Reply) -> Void, onEnd: @escaping @Sendable (String?) -> Void) {
        let endedAlready = routes.withLock { r -> String?? in
            r.onReply = onReply
            r.onEnd = onEnd
            return r.ended
        }
        if let why = endedAlready { onEnd(why) }
    }
}
