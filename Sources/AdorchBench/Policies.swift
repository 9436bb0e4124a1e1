/// The reference policies' loads: the waterfall A, B, C in order until one fills. Every step
/// is one network request; a rate-limited answer is just another failure to them.
final class Waterfalls {
    /// Each step in flight: its slot, its network, and whether every step before it was
    /// answered rate_limited.
    private var jobs: [Int: (slot: Int, network: Int, limitedSoFar: Bool)] = [:]
    private(set) var running: [Int]
    /// Whether the waterfall that ended last failed with every one of its networks answering
    /// rate_limited: no network did any work for it.
    private(set) var lastFailedAllRateLimited = false

    init(slots: Int) { running = Array(repeating: 0, count: slots) }

    func start(_ slot: Int, _ sim: DaySimulator) {
        jobs[sim.load(slot: slot, network: 0)] = (slot, 0, true)
        running[slot] += 1
    }

    /// The waterfall's end (a fill, or the last network's failure), or nil while it goes on.
    func finished(_ load: Int, _ result: LoadResult, _ sim: DaySimulator) -> (slot: Int, ad: (id: Int, expiresAt: Double)?)? {
        guard let job = jobs.removeValue(forKey: load) else { return nil }
        let limitedSoFar = job.limitedSoFar && result == .rateLimited
        if case .fill(let ad, let expiresAt) = result {
            running[job.slot] -= 1
            lastFailedAllRateLimited = false
            return (job.slot, (ad, expiresAt))
        }
        if job.network + 1 < sim.workload.networks.count {
            jobs[sim.load(slot: job.slot, network: job.network + 1)] = (job.slot, job.network + 1, limitedSoFar)
            return nil
        }
        running[job.slot] -= 1
        lastFailedAllRateLimited = limitedSoFar
        return (job.slot, nil)
    }
}

/// Ads a policy holds per slot, soonest expiry first.
struct Held {
    var ads: [[(id: Int, expiresAt: Double)]]

    init(slots: Int) { ads = Array(repeating: [], count: slots) }

    mutating func add(_ slot: Int, _ ad: (id: Int, expiresAt: Double)) {
        ads[slot].append(ad)
        ads[slot].sort { $0.expiresAt < $1.expiresAt }
    }

    mutating func prune(_ slot: Int, _ sim: DaySimulator) { ads[slot].removeAll { !sim.isValid($0.id) } }

    mutating func take(_ slot: Int, _ sim: DaySimulator) -> Int? {
        prune(slot, sim)
        return ads[slot].isEmpty ? nil : ads[slot].removeFirst().id
    }
}

/// classic: one ad per slot; reload when it is shown, when it expires and when a show
/// fails; a failed waterfall retries after 2^min(6, n) s, reset on success (AppLovin MAX's
/// integration guide).
public final class ClassicPolicy: PreloadPolicy {
    public let name = "classic"
    private var runs: Waterfalls!
    private var held: Held!
    private var attempts: [Int] = []
    private var retryAt: [Double?] = []

    public init() {}

    public func start(_ sim: DaySimulator) {
        let n = sim.workload.slots.count
        (runs, held, attempts, retryAt) = (Waterfalls(slots: n), Held(slots: n), Array(repeating: 0, count: n), Array(repeating: nil, count: n))
        for slot in 0..<n { reload(slot, sim) }
    }

    private func reload(_ slot: Int, _ sim: DaySimulator) {
        guard runs.running[slot] == 0, retryAt[slot] == nil else { return }
        runs.start(slot, sim)
    }

    public func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? {
        let ad = held.take(slot, sim)
        reload(slot, sim)
        return ad
    }

    public func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {
        guard let (slot, ad) = runs.finished(load, result, sim) else { return }
        if let ad {
            held.add(slot, ad)
            attempts[slot] = 0
            sim.wake(at: ad.expiresAt)
        } else {
            attempts[slot] += 1
            retryAt[slot] = sim.now + Double(1 << min(6, attempts[slot]))
            sim.wake(at: retryAt[slot]!)
        }
    }

    public func wake(_ sim: DaySimulator) {
        for slot in held.ads.indices {
            if let at = retryAt[slot], at <= sim.now {
                retryAt[slot] = nil
                reload(slot, sim)
            }
            held.prune(slot, sim)
            if held.ads[slot].isEmpty { reload(slot, sim) }
        }
    }
}

/// buffered: keep the configured buffer; load a new ad whenever one is taken; retry with
/// exponential backoff; drop and reload an ad 5 minutes before it expires (Google Mobile
/// Ads' preloading API).
public final class BufferedPolicy: PreloadPolicy {
    public let name = "buffered"
    private var runs: Waterfalls!
    private var held: Held!
    private var failures: [Int] = []
    private var backoffUntil: [Double] = []
    private let refreshAhead = 300.0

    public init() {}

    public func start(_ sim: DaySimulator) {
        let n = sim.workload.slots.count
        (runs, held, failures, backoffUntil) = (Waterfalls(slots: n), Held(slots: n), Array(repeating: 0, count: n), Array(repeating: 0, count: n))
        for slot in 0..<n { topUp(slot, sim) }
    }

    private func topUp(_ slot: Int, _ sim: DaySimulator) {
        guard sim.now >= backoffUntil[slot] else { return }
        while held.ads[slot].count + runs.running[slot] < sim.workload.slots[slot].buffer { runs.start(slot, sim) }
    }

    public func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? {
        let ad = held.take(slot, sim)
        topUp(slot, sim)
        return ad
    }

    public func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {
        guard let (slot, ad) = runs.finished(load, result, sim) else { return }
        if let ad {
            held.add(slot, ad)
            failures[slot] = 0
            sim.wake(at: ad.expiresAt - refreshAhead)
        } else {
            failures[slot] += 1
            backoffUntil[slot] = sim.now + min(300, Double(1 << min(9, failures[slot] - 1)))
            sim.wake(at: backoffUntil[slot])
        }
        topUp(slot, sim)
    }

    public func wake(_ sim: DaySimulator) {
        for slot in held.ads.indices {
            for ad in held.ads[slot] where ad.expiresAt - refreshAhead <= sim.now { sim.drop(ad.id) }
            held.prune(slot, sim)
            topUp(slot, sim)
        }
    }
}

/// smart: 2 ads cached per slot, at most 2 loads in parallel, a cache check every 30 s that
/// backs off (30 s, 60 s, 120 s, … up to 10 min) while consecutive no-fills accumulate
/// (OpenMediation's OMSmartLoad).
public final class SmartPolicy: PreloadPolicy {
    public let name = "smart"
    private var runs: Waterfalls!
    private var held: Held!
    private var failures: [Int] = []
    private var nextCheck: [Double] = []

    public init() {}

    private func interval(_ slot: Int) -> Double { min(600, 30 * Double(1 << min(5, failures[slot]))) }

    public func start(_ sim: DaySimulator) {
        let n = sim.workload.slots.count
        (runs, held, failures, nextCheck) = (Waterfalls(slots: n), Held(slots: n), Array(repeating: 0, count: n), Array(repeating: 0, count: n))
        for slot in 0..<n { check(slot, sim) }
    }

    private func check(_ slot: Int, _ sim: DaySimulator) {
        held.prune(slot, sim)
        while held.ads[slot].count + runs.running[slot] < 2, runs.running[slot] < 2 { runs.start(slot, sim) }
        nextCheck[slot] = sim.now + interval(slot)
        sim.wake(at: nextCheck[slot])
    }

    public func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? { held.take(slot, sim) }

    public func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {
        guard let (slot, ad) = runs.finished(load, result, sim) else { return }
        if let ad {
            held.add(slot, ad)
            failures[slot] = 0
        } else {
            failures[slot] += 1
        }
    }

    public func wake(_ sim: DaySimulator) {
        for slot in held.ads.indices where nextCheck[slot] <= sim.now { check(slot, sim) }
    }
}

/// oracle: knows when every show request it is to serve will come (not those a capped day's
/// check refuses, and not what the networks will answer) and holds exactly as many ads as
/// requests in the next `horizon` seconds: the upper bound a real scheduler can approach. A waterfall that every network answered rate_limited is
/// retried after 2^min(6, n) s, n such waterfalls in a row, not at once: else the oracle
/// would hammer the networks into a lockout for the rest of the day, an answer every 50 ms
/// per ad it wants (the standard day's last network has no limit: no waterfall fails so).
public final class OraclePolicy: PreloadPolicy {
    public let name = "oracle"
    private var runs: Waterfalls!
    private var held: Held!
    /// Each slot's request times, and how many of them have come (shown or missed).
    private var upcoming: [[Double]] = []
    private var served: [Int] = []
    private var limitedEnds: [Int] = []
    private var pausedUntil: [Double] = []
    private let horizon: Double

    public init(horizon: Double = 120) { self.horizon = horizon }

    public func start(_ sim: DaySimulator) {
        let n = sim.workload.slots.count
        (runs, held, upcoming, served) = (Waterfalls(slots: n), Held(slots: n), sim.letIn, Array(repeating: 0, count: n))
        (limitedEnds, pausedUntil) = (Array(repeating: 0, count: n), Array(repeating: 0, count: n))
        for times in upcoming { for t in times { sim.wake(at: t - horizon) } }
        wake(sim)
    }

    /// Requests still to come in [now, now + horizon]: two binary searches over the sorted
    /// times, not a scan, since a busy slot has thousands of them and this runs on every event.
    private func due(_ slot: Int, _ now: Double) -> Int {
        let times = upcoming[slot]
        func firstIndex(from start: Int, where before: (Double) -> Bool) -> Int {
            var (lo, hi) = (start, times.count)
            while lo < hi {
                let mid = (lo + hi) / 2
                if before(times[mid]) { lo = mid + 1 } else { hi = mid }
            }
            return lo
        }
        let first = firstIndex(from: served[slot]) { $0 < now }
        return firstIndex(from: first) { $0 <= now + horizon } - first
    }

    private func topUp(_ slot: Int, _ sim: DaySimulator) {
        held.prune(slot, sim)
        guard sim.now >= pausedUntil[slot] else { return }
        let due = due(slot, sim.now)
        while held.ads[slot].count + runs.running[slot] < due { runs.start(slot, sim) }
    }

    public func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? {
        if served[slot] < upcoming[slot].count, upcoming[slot][served[slot]] <= sim.now { served[slot] += 1 }
        return held.take(slot, sim)
    }

    public func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {
        guard let (slot, ad) = runs.finished(load, result, sim) else { return }
        if let ad { held.add(slot, ad) }
        if ad == nil, runs.lastFailedAllRateLimited {
            limitedEnds[slot] += 1
            pausedUntil[slot] = sim.now + Double(1 << min(6, limitedEnds[slot]))
            sim.wake(at: pausedUntil[slot])
        } else {
            limitedEnds[slot] = 0
        }
        topUp(slot, sim)
    }

    public func wake(_ sim: DaySimulator) {
        for slot in upcoming.indices { topUp(slot, sim) }
    }
}
