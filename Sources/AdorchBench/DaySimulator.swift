import AdorchEngine
import Foundation

/// What a network load ended with, as a policy sees it.
public enum LoadResult: Sendable, Equatable {
    case fill(ad: Int, expiresAt: Double)
    case noFill, error, rateLimited, timeout
}

/// A preload policy under test: it asks the simulator for loads and wake-ups, and answers
/// show requests with an ad it holds.
public protocol PreloadPolicy: AnyObject {
    var name: String { get }
    func start(_ sim: DaySimulator)
    /// A show request now, from `user` (an `Audience` index): the ad to hand out, or nil.
    func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int?
    /// A show request the app's own frequency check refused (`DayCaps`): no ad is wanted.
    func refused(slot: Int, user: Int, _ sim: DaySimulator)
    func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator)
    /// A wake-up the policy asked for (it may have asked for several).
    func wake(_ sim: DaySimulator)
}

extension PreloadPolicy {
    /// A policy that knows nothing of caps never hears of a refused request: the app did
    /// not ask it.
    public func refused(slot: Int, user: Int, _ sim: DaySimulator) {}
}

/// One policy's day: the results the benchmark prints.
public struct DayResult: Sendable {
    public var policy: String
    /// Every request of the trace, the capped ones included.
    public var requests = 0
    /// Requests the app's frequency check refused: neither hits nor misses, and no wait.
    public var capped = 0
    public var hits = 0
    public var fills = 0
    public var wasted = 0
    public var loadCalls = 0
    public var rateLimitHits = 0
    public var waits: [Double] = []
    /// The wall-clock time the policy's run of the day took (the simulator's share included).
    public var elapsed: Duration = .zero
    /// Per slot: fills and wasted ads, to tell which slot the waste comes from; and misses.
    public var slotFills: [Int] = []
    public var slotWasted: [Int] = []
    public var slotMisses: [Int] = []
    /// On a day with a privacy mix (`DayPrivacy`), per group of viewers: requests, hits, and
    /// misses per slot; and the ads a policy handed to a viewer their class is not allowed
    /// for (a miss, not a hit). Empty and 0 on a day without one.
    public var groupRequests: [Int] = []
    public var groupHits: [Int] = []
    public var groupSlotMisses: [[Int]] = []
    public var wrongClass = 0
    /// What the shown ads paid, per 1,000 impressions each, added up.
    public var revenue = 0.0

    /// The requests the policy was asked to serve.
    public var letIn: Int { requests - capped }
    public var hitRate: Double { letIn == 0 ? 0 : Double(hits) / Double(letIn) }
    public var waste: Double { fills == 0 ? 0 : Double(wasted) / Double(fills) }
    public var requestsPerShow: Double { hits == 0 ? .infinity : Double(loadCalls) / Double(hits) }
    /// What 1,000 requests earned: each shown ad pays its price / 1,000.
    public var revenuePerThousand: Double { letIn == 0 ? 0 : revenue / Double(letIn) }
    /// Group `g`'s hit rate; nil when it asked nothing.
    public func groupHitRate(_ g: Int) -> Double? { groupRequests[g] == 0 ? nil : Double(groupHits[g]) / Double(groupRequests[g]) }

    /// The simulated wait of a request that found nothing (0 for hits), at percentile p.
    public func waitPercentile(_ p: Double) -> Double {
        let all = (waits + Array(repeating: 0, count: hits)).sorted()
        guard !all.isEmpty else { return 0 }
        return all[min(all.count - 1, Int((p * Double(all.count)).rounded(.up)) - 1)]
    }
}

/// A discrete-event simulation of the standard day for one policy: the show requests of the
/// trace, the networks' outcomes, latency, timeouts, TTLs and network B's rate limit.
public final class DaySimulator {
    public let workload: Workload
    public let trace: Trace
    /// The app-side frequency check the day runs behind, if any.
    public let caps: DayCaps?
    /// The viewers' privacy and the networks' declarations, on the privacy day only: nil,
    /// every viewer set nothing and every network declares the config's defaults.
    public let privacy: DayPrivacy?
    /// The times of the requests a policy is asked to serve, per slot: the trace's, less
    /// those the day's caps refuse (what an oracle may know ahead).
    public let letIn: [[Double]]
    /// Per request of the trace, whether the caps refuse it.
    private let refused: [[Bool]]
    public private(set) var now = 0.0
    private var outcomes: Outcomes
    private var prices: Prices
    private var events = EventQueue()
    private var result: DayResult
    private var ads: [Ad] = []
    private var loadCount = 0
    /// Per network: recent load times (for the rate limit) and until when it is limited.
    private var recentLoads: [[Double]]
    private var limitedUntil: [Double]
    /// Misses still waiting for their slot's next ad.
    private var pendingMisses: [[Double]]

    private struct Ad {
        var slot: Int
        var network: Int
        /// The class the policy loaded it under, if it says.
        var privacyClass: PrivacyClass?
        var expiresAt: Double
        var price: Double
        var shown = false
        var droppedAt: Double?
    }

    public init(workload: Workload, trace: Trace, caps: DayCaps?, privacy: DayPrivacy? = nil, policy name: String) {
        self.workload = workload
        self.trace = trace
        self.caps = caps
        self.privacy = privacy
        refused = caps?.refused(in: trace) ?? trace.requests.map { $0.map { _ in false } }
        letIn = zip(trace.requests, refused).map { times, refused in zip(times, refused).filter { !$0.1 }.map(\.0) }
        outcomes = trace.outcomes()
        prices = trace.prices()
        result = DayResult(policy: name, slotFills: workload.slots.map { _ in 0 }, slotMisses: workload.slots.map { _ in 0 })
        if let privacy {
            result.groupRequests = privacy.mix.groups.map { _ in 0 }
            result.groupHits = result.groupRequests
            result.groupSlotMisses = privacy.mix.groups.map { _ in workload.slots.map { _ in 0 } }
        }
        recentLoads = workload.sources.map { _ in [] }
        limitedUntil = workload.sources.map { _ in 0 }
        pendingMisses = workload.slots.map { _ in [] }
    }

    /// Runs the day, behind the app-side check of `caps` if given, with the viewers' and
    /// networks' `privacy` if given, and returns what happened.
    public static func run(_ policy: PreloadPolicy, workload: Workload, trace: Trace, caps: DayCaps? = nil,
                           privacy: DayPrivacy? = nil) -> DayResult {
        let sim = DaySimulator(workload: workload, trace: trace, caps: caps, privacy: privacy, policy: policy.name)
        for (slot, times) in trace.requests.enumerated() {
            for (i, t) in times.enumerated() { sim.events.push(t, .request(slot, i)) }
        }
        policy.start(sim)
        while let (time, event) = sim.events.pop(), time < workload.seconds {
            sim.now = time
            switch event {
            case .request(let slot, let i): sim.request(slot, i, policy)
            case .loadDone(let load, let slot, let network, let result): sim.finish(load, slot, network, result, policy)
            case .wake: policy.wake(sim)
            }
        }
        sim.now = workload.seconds
        return sim.finished()
    }

    // MARK: For policies

    /// Starts one load for a slot from a source (a network, or a bidder past the networks),
    /// under `privacyClass` if the policy has classes; its result arrives through `loadFinished`.
    @discardableResult
    public func load(slot: Int, network: Int, privacyClass: PrivacyClass? = nil) -> Int {
        loadCount += 1
        result.loadCalls += 1
        let n = workload.sources[network]
        if let limit = n.rateLimit {
            recentLoads[network] = recentLoads[network].filter { $0 > now - limit.window } + [now]
            if recentLoads[network].count > limit.loads { limitedUntil[network] = max(limitedUntil[network], now + limit.pause) }
            if now < limitedUntil[network] {
                result.rateLimitHits += 1
                events.push(now + 0.05, .loadDone(loadCount, slot, network, .rateLimited))
                return loadCount
            }
        }
        let outcome = outcomes.next(slot: slot, network: network)
        if outcome.latency > n.timeoutSeconds {
            events.push(now + n.timeoutSeconds, .loadDone(loadCount, slot, network, .timeout))
        } else {
            let done = now + outcome.latency
            let answer: LoadResult
            switch outcome.kind {
            case .fill:
                ads.append(Ad(slot: slot, network: network, privacyClass: privacyClass, expiresAt: done + n.ttlSeconds,
                              price: prices.next(slot: slot, source: network)))
                answer = .fill(ad: ads.count - 1, expiresAt: done + n.ttlSeconds)
            case .noFill: answer = .noFill
            case .error: answer = .error
            }
            events.push(done, .loadDone(loadCount, slot, network, answer))
        }
        return loadCount
    }

    public func wake(at time: Double) { events.push(max(time, now), .wake) }

    /// The policy throws an unshown ad away (a refresh): it counts as waste.
    public func drop(_ ad: Int) {
        if !ads[ad].shown, ads[ad].droppedAt == nil { ads[ad].droppedAt = now }
    }

    /// What the ad pays per 1,000 impressions: a bidder says it with its bid; a network's
    /// publisher knows only its `ecpm`.
    public func price(of ad: Int) -> Double { ads[ad].price }

    public func isValid(_ ad: Int) -> Bool { !ads[ad].shown && ads[ad].droppedAt == nil && now < ads[ad].expiresAt }

    // MARK: The day

    private func request(_ slot: Int, _ i: Int, _ policy: PreloadPolicy) {
        result.requests += 1
        let user = trace.users[slot][i]
        let group = privacy?.group[user]
        if let group { result.groupRequests[group] += 1 }
        if refused[slot][i] {
            result.capped += 1
            policy.refused(slot: slot, user: user, self)
        } else if let ad = policy.show(slot: slot, user: user, self), ads.indices.contains(ad), ads[ad].slot == slot, isValid(ad),
                  allowed(ad, to: user) {
            ads[ad].shown = true
            result.hits += 1
            result.revenue += ads[ad].price
            if let group { result.groupHits[group] += 1 }
        } else {
            result.slotMisses[slot] += 1
            if let group { result.groupSlotMisses[group][slot] += 1 }
            pendingMisses[slot].append(now)
        }
    }

    /// On a privacy day, an ad goes only to a viewer its class is allowed for from its
    /// network; one handed to any other is counted, and its request is a miss.
    private func allowed(_ ad: Int, to user: Int) -> Bool {
        guard let privacy, let privacyClass = ads[ad].privacyClass else { return true }
        if privacy.allows(privacyClass, from: ads[ad].network, to: user) { return true }
        result.wrongClass += 1
        return false
    }

    private func finish(_ load: Int, _ slot: Int, _ network: Int, _ outcome: LoadResult, _ policy: PreloadPolicy) {
        if case .fill = outcome {
            result.fills += 1
            result.slotFills[slot] += 1
            // A miss "would have been served" once its slot has an ad again.
            result.waits += pendingMisses[slot].map { now - $0 }
            pendingMisses[slot] = []
        }
        policy.loadFinished(load, slot: slot, network: network, outcome, self)
    }

    private func finished() -> DayResult {
        var r = result
        r.waits += pendingMisses.flatMap { $0.map { now - $0 } }
        // Waste: loaded, never shown, and expired or dropped before the day ended.
        let wasted = ads.filter { !$0.shown && ($0.droppedAt != nil || $0.expiresAt <= now) }
        r.wasted = wasted.count
        r.slotWasted = workload.slots.indices.map { slot in wasted.filter { $0.slot == slot }.count }
        // Fills whose answer came after the day's end are not counted either way.
        r.fills = min(r.fills, ads.count)
        return r
    }
}

/// Events in time order (ties in insertion order).
struct EventQueue {
    enum Event {
        /// A slot and the request's index in the trace.
        case request(Int, Int)
        case loadDone(Int, Int, Int, LoadResult)
        case wake
    }

    private var heap: [(time: Double, seq: Int, event: Event)] = []
    private var seq = 0

    mutating func push(_ time: Double, _ event: Event) {
        seq += 1
        heap.append((time, seq, event))
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard (heap[i].time, heap[i].seq) < (heap[parent].time, heap[parent].seq) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> (Double, Event)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count, (heap[l].time, heap[l].seq) < (heap[m].time, heap[m].seq) { m = l }
            if r < heap.count, (heap[r].time, heap[r].seq) < (heap[m].time, heap[m].seq) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
        return (top.time, top.event)
    }
}
