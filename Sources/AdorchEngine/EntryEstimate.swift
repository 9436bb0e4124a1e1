/// What one waterfall entry has shown the scheduler (docs/scheduler.md, "Refill time and
/// lifetime"): how long its loads take, how often they fill and how long its ads live.
/// Moving averages that start from a prior worth one load, so the first answers count at
/// once and a long history still moves with the network.
public struct EntryEstimate: Sendable, Equatable, Codable {
    /// The weight of one load in the long run: about the last twenty loads count.
    static let weight = 0.05

    /// Seconds from a load's start to its answer, filled or not (a timeout counts in full).
    public private(set) var attemptSeconds: Double
    /// The share of loads that brought an ad.
    public private(set) var fillRate: Double
    /// Seconds a loaded ad stays valid.
    public private(set) var lifetimeSeconds: Double
    /// Loads seen (the prior counts as one).
    public private(set) var samples = 1
    /// Fills seen, for the lifetime's average (the first replaces the prior: a TTL is only a bound).
    public private(set) var fillSamples = 0

    /// Before any load: half the entry's timeout, an even chance to fill, the slot's TTL.
    public init(timeout: Duration, ttl: Duration) {
        attemptSeconds = timeout.seconds / 2
        fillRate = 0.5
        lifetimeSeconds = ttl.seconds
    }

    /// What a run could have written: finite, in range (a load answers within an hour, an ad
    /// lives at most a year).
    var isSane: Bool {
        attemptSeconds.isFinite && (0...3600).contains(attemptSeconds) && fillRate.isFinite && (0...1).contains(fillRate)
            && lifetimeSeconds.isFinite && (0...31_536_000).contains(lifetimeSeconds) && samples >= 1 && fillSamples >= 0
    }

    /// How many failed loads in a row are ordinary for this entry: the mean run before a
    /// fill, 1 / fill rate, counted up to 20 (a network that never fills is not asked on forever).
    var expectedNoFillRun: Int { Int((1 / max(fillRate, 0.05)).rounded(.up)) }

    /// One load ended after `attempt`; `lifetime` is the ad's, if it filled.
    mutating func note(attempt: Duration, lifetime: Duration?) {
        samples += 1
        let w = max(Self.weight, 1 / Double(samples))
        attemptSeconds += w * (max(attempt.seconds, 0) - attemptSeconds)
        fillRate += w * ((lifetime == nil ? 0 : 1) - fillRate)
        if let lifetime {
            // Lifetimes are averaged over fills only.
            fillSamples += 1
            lifetimeSeconds += max(Self.weight, 1 / Double(fillSamples)) * (lifetime.seconds - lifetimeSeconds)
        }
    }
}
