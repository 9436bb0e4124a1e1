/// How long something took, counted into fixed buckets: a Prometheus histogram's state.
/// A value type with no lock: each one lives on one queue (the engine's, for loads and Shows).
public struct LatencyHistogram: Sendable, Equatable {
    /// The buckets' upper bounds in seconds, for every latency adorch reports (loads and
    /// Shows): half a millisecond, where an answered Show sits, up to a minute, past the
    /// longest default load timeout. Fixed, so series from different hosts and runs add up.
    public static let bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    /// Observations per bucket (not cumulative), the last one past every bound (+Inf).
    public private(set) var counts = [UInt64](repeating: 0, count: bounds.count + 1)
    public private(set) var sum = 0.0
    public private(set) var count: UInt64 = 0

    public init() {}

    /// One observation: a scan over 16 bounds and three adds.
    public mutating func observe(_ duration: Duration) {
        let seconds = Double(max(0, duration.nanosecondsClamped)) / 1e9
        var index = 0
        while index < Self.bounds.count, seconds > Self.bounds[index] { index += 1 }
        counts[index] += 1
        sum += seconds
        count += 1
    }

    /// The counts as Prometheus wants them: each bucket holds every observation up to its bound.
    public var cumulative: [UInt64] {
        var total: UInt64 = 0
        return counts.map { total += $0; return total }
    }
}

/// What the loads asked of one network came to: how many ended each way, and how long they took.
public struct NetworkLoads: Sendable, Equatable {
    /// The outcome a filled load counts under; a failed one counts under its `AdErrorCode`.
    public static let filled = "filled"

    /// Loads ended, by outcome: `filled` or an `AdErrorCode` raw value (a bounded set).
    public internal(set) var ended: [String: Int] = [:]
    /// From the load's start to its answer (or its deadline), whatever the outcome.
    public internal(set) var latency = LatencyHistogram()

    public init() {}
}
