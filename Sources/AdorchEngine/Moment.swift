/// A point on a monotonic clock, in nanoseconds from an arbitrary origin.
///
/// The engine never reads a clock: every input carries the `Moment` it happened at, so a
/// test drives hours of traffic with a manual clock and the daemon passes CLOCK_MONOTONIC.
public struct Moment: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    public static let zero = Moment(nanoseconds: 0)

    public static func < (a: Moment, b: Moment) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func + (m: Moment, d: Duration) -> Moment {
        let ns = d.nanosecondsClamped
        return ns >= 0
            ? Moment(nanoseconds: m.nanoseconds &+ UInt64(ns))
            : Moment(nanoseconds: m.nanoseconds >= UInt64(-ns) ? m.nanoseconds - UInt64(-ns) : 0)
    }

    public static func - (m: Moment, d: Duration) -> Moment { m + (Duration.zero - d) }

    /// The time from `b` to `a`.
    public static func - (a: Moment, b: Moment) -> Duration {
        a >= b ? .nanoseconds(Int64(clamping: a.nanoseconds - b.nanoseconds))
            : .zero - .nanoseconds(Int64(clamping: b.nanoseconds - a.nanoseconds))
    }

    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// Whole nanoseconds, clamped to Int64.
    public var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }

    /// Seconds as a floating-point number, for reports and arithmetic on fractions.
    public var seconds: Double { Double(nanosecondsClamped) / 1e9 }

    /// Milliseconds, clamped to UInt32, for the plugin ABI.
    public var millisecondsUInt32: UInt32 { UInt32(clamping: nanosecondsClamped / 1_000_000) }
}
