/// How fast one uid may call Show ([limits] shows_per_second_per_uid, show_burst_per_uid).
public struct ShowRate: Sendable, Equatable {
    /// Shows a uid may make per second, sustained; 0 turns the limit off.
    public var perSecond: Double = 100
    /// Shows a uid may make at once after a quiet spell.
    public var burst: Double = 200
}

/// Show calls per uid as token buckets: one app calling Show in a loop drains only its own
/// bucket, and every other uid's Shows go on as before.
struct ShowRateLimiter {
    var rate: ShowRate
    private var buckets: [UInt32: (tokens: Double, at: ContinuousClock.Instant)] = [:]
    /// Refused Shows since start, for the status.
    private(set) var refused = 0
    private var takes = 0

    init(rate: ShowRate) { self.rate = rate }

    /// Takes a token for `uid` at `now`; nil if it had one, else how long until it will.
    mutating func take(_ uid: UInt32, now: ContinuousClock.Instant) -> Duration? {
        guard rate.perSecond > 0 else { return nil }
        takes += 1
        if takes % 4096 == 0 { prune(now: now) }
        var bucket = buckets[uid] ?? (rate.burst, now)
        bucket.tokens = min(rate.burst, bucket.tokens + ((now - bucket.at) / .seconds(1)) * rate.perSecond)
        bucket.at = now
        defer { buckets[uid] = bucket }
        if bucket.tokens >= 1 {
            bucket.tokens -= 1
            return nil
        }
        refused += 1
        return .milliseconds(Int64(((1 - bucket.tokens) / rate.perSecond * 1000).rounded(.up)))
    }

    /// Forgets full buckets, so the table holds only uids that called recently.
    private mutating func prune(now: ContinuousClock.Instant) {
        buckets = buckets.filter { $0.value.tokens + ((now - $0.value.at) / .seconds(1)) * rate.perSecond < rate.burst }
    }
}
