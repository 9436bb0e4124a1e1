/// How fast one uid may make a call ([limits] shows_per_second_per_uid and show_burst_per_uid,
/// loads_per_second_per_uid and load_burst_per_uid, lists_per_second_per_uid and
/// list_burst_per_uid, reports_per_second_per_uid and report_burst_per_uid).
public struct CallRate: Sendable, Equatable {
    /// Calls a uid may make per second, sustained; 0 turns the limit off.
    public var perSecond: Double
    /// Calls a uid may make at once after a quiet spell.
    public var burst: Double

    public static let shows = CallRate(perSecond: 100, burst: 200)
    public static let loads = CallRate(perSecond: 20, burst: 50)
    /// ListEvents and ListRewards: reading is the caller's, but building a reply of hundreds
    /// of events is the daemon's time, which every app shares.
    public static let lists = CallRate(perSecond: 10, burst: 20)
    /// Report, and Start, Pause, Resume and Stop of a session: each costs the engine queue a
    /// turn even when its id is bad, and 49,000 a second from one app slowed every app's
    /// Shows (issue 31). An honest app sends a few per ad it shows, so ten times the Show
    /// rate and burst never holds it back.
    public static let reports = CallRate(perSecond: 10 * shows.perSecond, burst: 10 * shows.burst)
}

/// One method's calls per uid as token buckets: one app calling in a loop drains only its
/// own bucket, and every other uid's calls go on as before.
struct RateLimiter {
    var rate: CallRate
    private var buckets: [UInt32: (tokens: Double, at: ContinuousClock.Instant)] = [:]
    private var takes = 0

    init(rate: CallRate) { self.rate = rate }

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
        return .milliseconds(Int64(((1 - bucket.tokens) / rate.perSecond * 1000).rounded(.up)))
    }

    /// Forgets full buckets, so the table holds only uids that called recently.
    private mutating func prune(now: ContinuousClock.Instant) {
        buckets = buckets.filter { $0.value.tokens + ((now - $0.value.at) / .seconds(1)) * rate.perSecond < rate.burst }
    }
}
