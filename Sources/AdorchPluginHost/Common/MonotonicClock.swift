import AdorchEngine
import Glibc

extension Moment {
    /// Now on CLOCK_MONOTONIC, the clock of a request's deadline_monotonic_ns.
    public static func monotonicNow() -> Moment {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Moment(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }
}
