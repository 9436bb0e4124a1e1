import Glibc

/// How many valid ads a demand-aware slot keeps ready now, and why (docs/scheduler.md,
/// "The target").
///
/// Every Show that takes an ad starts a refill, so the loads under way at any moment are
/// the Shows of the last refill time: on average demand × refill time of them, and Poisson
/// distributed whatever the refill times' shape (Palm's theorem). Keeping n ads ready then
/// means a Show finds none only when n or more refills are under way at once: the target is
/// the smallest n for which that chance is below `missChance`. It is then cut to the ads
/// that are likely to be shown before they expire, and bounded by buffer_min and buffer_max.
public struct BufferTarget: Sendable, Equatable {
    /// The chance of a Show finding no ad that the target aims below.
    public static let missChance = 0.001
    /// An ad is held only if it is more likely to be shown than to expire.
    public static let useChance = 0.5

    public var count: Int
    /// Shows per minute the target plans for: the higher of the long and short rates.
    public var demandPerMinute: Double
    public var longPerMinute: Double
    public var shortPerMinute: Double
    /// Expected seconds from a refill's start to a loaded ad, through the waterfall.
    public var refillSeconds: Double
    /// Expected seconds a loaded ad stays valid.
    public var lifetimeSeconds: Double
    /// Why the count is what it is, in a few words: what `adorchctl slots` shows.
    public var reason: String

    /// The target for a slot, from its demand and what its usable entries, in waterfall
    /// order, have shown. A fixed buffer keeps its count; its demand is shown all the same.
    static func of(_ config: SlotConfig, demand: DemandEstimate, entries: [EntryEstimate], now: Moment) -> BufferTarget {
        let long = demand.longRate(at: now), short = demand.shortRate(at: now)
        let rate = max(long, short)
        let (refill, lifetime) = chain(entries, ttl: config.ttl)
        guard config.isDemandAware else {
            return BufferTarget(count: config.bufferMin, demandPerMinute: rate * 60, longPerMinute: long * 60, shortPerMinute: short * 60,
                                refillSeconds: refill, lifetimeSeconds: lifetime, reason: "fixed buffer")
        }
        // Counts above buffer_max change nothing, so neither search goes past it.
        let (needed, usable) = counts(rate: rate, refill: refill, lifetime: lifetime, upTo: config.bufferMax + 1)
        let count = min(max(min(needed, usable), config.bufferMin), config.bufferMax)
        let reason: String
        if count == config.bufferMax, needed > count {
            reason = "at buffer_max (\(needed) wanted)"
        } else if count == config.bufferMin, min(needed, usable) < count {
            reason = "at buffer_min"
        } else if usable < needed {
            reason = "rare: \(perHour(rate)) and ads live \(minutes(lifetime)), so \(usable == 0 ? "none" : "\(usable)") held"
        } else if short > 2 * long {
            reason = "burst: \(perMinute(short)) over the last \(DemandEstimate.recentCount) Shows"
        } else {
            reason = "demand \(perMinute(rate)), refill \(format1(refill)) s"
        }
        return BufferTarget(count: count, demandPerMinute: rate * 60, longPerMinute: long * 60, shortPerMinute: short * 60,
                            refillSeconds: refill, lifetimeSeconds: lifetime, reason: reason)
    }

    /// For Shows at `rate` a second, refills of `refill` seconds and ads living `lifetime`:
    /// the fewest ads that keep a Show's chance of finding none below `missChance`, and the
    /// most of which the last is still more likely to be shown than to expire; neither
    /// searched past `limit`.
    static func counts(rate: Double, refill: Double, lifetime: Double, upTo limit: Int) -> (needed: Int, usable: Int) {
        (smallestCount(mean: rate * refill, tailAtMost: missChance, upTo: limit),
         largestCount(mean: rate * lifetime, tailAtLeast: useChance, upTo: limit))
    }

    /// The waterfall as one refill sees it: entry i is asked when every entry before it
    /// failed; a refill that fails everywhere starts again. Returns the expected seconds to
    /// an ad (at most an hour) and the expected lifetime of that ad.
    static func chain(_ entries: [EntryEstimate], ttl: Duration) -> (refill: Double, lifetime: Double) {
        var reach = 1.0, time = 0.0, lifeWeighted = 0.0
        for entry in entries {
            time += reach * entry.attemptSeconds
            lifeWeighted += reach * entry.fillRate * min(entry.lifetimeSeconds, ttl.seconds)
            reach *= 1 - entry.fillRate
        }
        let fills = 1 - reach
        // No entry fills lately: refills are very slow, and the ads they may bring are taken
        // to live as long as the slot allows, so the slot keeps asking (within its entries'
        // backoffs) and sees a network that fills again.
        guard fills > 1e-6 else { return (3600, ttl.seconds) }
        return (min(time / fills, 3600), lifeWeighted / fills)
    }

    /// `count` ads shared in proportion to `weights` (largest remainders, ties to the earlier),
    /// then each share whose `floor` is set raised to one: while the slot keeps any ad, each
    /// group of Shows it keeps ads for finds one. Nothing when `count` is 0.
    static func shares(of count: Int, weights: [Double], floor: [Bool]) -> [Int] {
        let total = weights.reduce(0, +)
        guard count > 0, total > 0, total.isFinite else { return weights.map { _ in 0 } }
        let exact = weights.map { Double(count) * $0 / total }
        var shares = exact.map { Int($0.rounded(.down)) }
        let remainders = exact.indices.sorted { (exact[$1] - Double(shares[$1]), $0) < (exact[$0] - Double(shares[$0]), $1) }
        for index in remainders.prefix(count - shares.reduce(0, +)) { shares[index] += 1 }
        return zip(shares, floor).map { share, floor in floor ? max(share, 1) : share }
    }

    /// The smallest n with P(Poisson(mean) ≥ n) ≤ tail, or `limit` if that is larger.
    static func smallestCount(mean: Double, tailAtMost tail: Double, upTo limit: Int) -> Int {
        var n = 0, term = exp(-mean), below = 0.0  // below = P(X < n)
        while 1 - below > tail, n < limit {
            below += term
            n += 1
            term *= mean / Double(n)
        }
        return n
    }

    /// The largest n with P(Poisson(mean) ≥ n) ≥ chance (0 if even one is less likely), or
    /// `limit` if that is smaller.
    static func largestCount(mean: Double, tailAtLeast chance: Double, upTo limit: Int) -> Int {
        var n = 0, term = exp(-mean), below = 0.0
        // P(X ≥ n + 1) = 1 − P(X ≤ n).
        while 1 - (below + term) >= chance, n < limit {
            below += term
            n += 1
            term *= mean / Double(n)
        }
        return n
    }
}

/// One decimal, for reasons; never traps (estimates restored from a file are checked, but
/// a reason must not be what stops the daemon).
private func format1(_ x: Double) -> String {
    guard x.isFinite, abs(x) < 1e12 else { return x.isNaN ? "?" : x < 0 ? "-∞" : "∞" }
    let tenths = Int((abs(x) * 10).rounded())
    return "\(x < 0 ? "-" : "")\(tenths / 10).\(tenths % 10)"
}

private func perMinute(_ perSecond: Double) -> String { "\(format1(perSecond * 60))/min" }
private func perHour(_ perSecond: Double) -> String { "\(format1(perSecond * 3600))/h" }
private func minutes(_ seconds: Double) -> String { "\(format1(seconds / 60)) min" }
