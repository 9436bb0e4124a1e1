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
        // Saturating at both ends of the clock: past its end is "never", not a moment long past.
        let ns = d.nanosecondsClamped
        guard ns >= 0 else { return Moment(nanoseconds: m.nanoseconds >= ns.magnitude ? m.nanoseconds - ns.magnitude : 0) }
        let (sum, overflow) = m.nanoseconds.addingReportingOverflow(UInt64(ns))
        return Moment(nanoseconds: overflow ? .max : sum)
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

    /// `nanoseconds` rounded toward zero and clamped to 0...Int64.max (NaN is 0): a wait
    /// computed in floating point never traps, whatever it was computed from.
    public static func saturating(nanoseconds: Double) -> Duration {
        if nanoseconds >= 0x1p63 { return .nanoseconds(Int64.max) }
        return .nanoseconds(nanoseconds > 0 ? Int64(nanoseconds) : 0)
    }

    /// Milliseconds, clamped to UInt32, for the plugin ABI.
    public var millisecondsUInt32: UInt32 { UInt32(clamping: nanosecondsClamped / 1_000_000) }
}
