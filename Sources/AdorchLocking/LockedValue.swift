#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value that several threads share, reached only under its lock.
///
/// In place of Synchronization.Mutex: on Linux ThreadSanitizer cannot see Mutex's futex (a
/// correctly locked `Mutex<[String: Int]>` updated from two threads is reported as a race),
/// so nothing behind a Mutex could be checked. A pthread mutex it sees. No Foundation, so
/// the Swift plugins can use it without loading Foundation.
///
/// @unchecked Sendable: `value` is only read or written inside `withLock`, under `mutex`.
public final class LockedValue<Value: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: consuming Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<Result: ~Copyable, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// A flag set once, from any thread: the first `setIfUnset` says true, every later one false.
public final class LockedFlag: Sendable {
    private let set = LockedValue(false)

    public init() {}

    public func setIfUnset() -> Bool {
        set.withLock { isSet in
            defer { isSet = true }
            return !isSet
        }
    }
}
