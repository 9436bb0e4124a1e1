import Dispatch

/// A value that lives on one serial queue: every read and write asserts that it runs there,
/// so a wrong-queue access stops the process where it happens instead of racing (the model is
/// swift-nio's `NIOLoopBound`). The box may be handed to any thread; only its queue opens it.
/// The check is dispatch_assert_queue, kept in release builds.
///
/// @unchecked Sendable: `storage` is read and written only on `queue`, asserted at every access.
public final class QueueBound<Value>: @unchecked Sendable {
    public let queue: DispatchQueue
    private var storage: Value

    /// Made before anything runs on `queue` for it: no other thread holds it yet.
    public init(_ value: Value, queue: DispatchQueue) {
        self.storage = value
        self.queue = queue
    }

    public var value: Value {
        get {
            dispatchPrecondition(condition: .onQueue(queue))
            return storage
        }
        _modify {
            dispatchPrecondition(condition: .onQueue(queue))
            yield &storage
        }
    }
}
