import AdorchEngine
import Foundation

/// A simulated day's parameters: the standard day (bench/workload.toml) or a generated one.
public struct Workload: Sendable, Equatable {
    public struct Slot: Sendable, Equatable {
        public var id: String
        public var format: AdFormat
        public var basePerHour: Double
        public var buffer: Int
    }

    /// More than `loads` in any `window` seconds: rate_limited for `pause` seconds.
    public struct RateLimit: Sendable, Equatable {
        public var loads: Int
        public var window: Double
        public var pause: Double
    }

    public struct Network: Sendable, Equatable {
        public var name: String
        public var fill: Double
        public var medianSeconds: Double
        public var p99Seconds: Double
        public var errors: Double
        public var ttlSeconds: Double
        public var timeoutSeconds: Double
        public var rateLimit: RateLimit?
        /// What its ads pay per 1,000 impressions: each fill's price is lognormal around
        /// `ecpm` (its median) with `priceSpread` as σ. A network's `ecpm` is what its
        /// publisher configures; a bidder's price comes with each bid. 0: it pays nothing.
        public var ecpm = 0.0
        public var priceSpread = 0.5
    }

    public var seed: UInt64
    public var hours: Double
    public var dayAmplitude: Double
    /// The hour of the day curve's peak (its low is 12 h away): 12 unless the file says.
    public var peakHour: Double = 12
    public var burstsPerDay: Int
    public var burstFactor: Double
    public var burstSeconds: Double
    public var slots: [Slot]
    /// The waterfall, in order.
    public var networks: [Network]
    /// Exchanges that sell by auction (docs/bidding.md): only a policy with an auction asks
    /// them; the references are waterfall-only.
    public var bidders: [Network] = []
    /// Networks, then bidders: a load's `network` index counts in this.
    public var sources: [Network] { networks + bidders }

    public var seconds: Double { hours * 3600 }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }
}

extension SplitMix64 {
    /// Standard normal (Box-Muller), for lognormal latencies.
    mutating func normal() -> Double {
        let u = max(nextUnit(), 1e-12), v = nextUnit()
        return (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
    }
}

/// One network answer, decided before any policy runs.
public struct Outcome: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case fill, noFill, error }

    public var kind: Kind
    public var latency: Double
}

/// Show request times per slot, who asks each, and the network outcomes each (slot, network)
/// pair gives to its 1st, 2nd, ... load: every policy replays the same day.
public struct Trace: Sendable {
    public var requests: [[Double]]
    /// The user of each request (`requests`' shape): an index into the `Audience`.
    public var users: [[Int]]
    public var bursts: [Double]
    private let seed: UInt64
    private let sources: [Workload.Network]

    public init(_ workload: Workload) {
        seed = workload.seed
        sources = workload.sources
        var random = SplitMix64(seed: workload.seed)
        let end = workload.seconds
        let bursts = (0..<Int((Double(workload.burstsPerDay) * workload.hours / 24).rounded())).map { _ in random.nextUnit() * end }.sorted()
        self.bursts = bursts
        let peak = 1 + workload.dayAmplitude
        requests = workload.slots.map { slot in
            // Thinning: candidates at the highest rate, each kept with rate(t) / highest.
            let base = slot.basePerHour / 3600
            let highest = base * peak * workload.burstFactor
            var times: [Double] = []
            var t = 0.0
            while true {
                t += -log(max(random.nextUnit(), 1e-12)) / highest
                if t >= end { break }
                // The sine's zero crossing 6 h before the peak: t − 6 h for the standard noon peak.
                var rate = base * (1 + workload.dayAmplitude * sin(2 * .pi * (t - (workload.peakHour - 6) * 3600) / 86400))
                if bursts.contains(where: { t >= $0 && t < $0 + workload.burstSeconds }) { rate *= workload.burstFactor }
                if random.nextUnit() < rate / highest { times.append(t) }
            }
            return times
        }
        // From a stream of their own: the request times are those of a trace without users.
        users = Audience.draw(for: requests, seed: workload.seed)
    }

    /// A fresh cursor over the outcomes: each policy run takes its own.
    public func outcomes() -> Outcomes { Outcomes(seed: seed, networks: sources, slots: requests.count) }

    /// A fresh cursor over the prices fills pay: each policy run takes its own.
    public func prices() -> Prices { Prices(seed: seed, sources: sources, slots: requests.count) }
}

/// The outcome streams: the k-th load of slot s to network n is the same for every policy.
public struct Outcomes: Sendable {
    private var streams: [[SplitMix64]]
    private let networks: [Workload.Network]

    init(seed: UInt64, networks: [Workload.Network], slots: Int) {
        self.networks = networks
        streams = streamGrid(slots: slots, sources: networks.count) { s, n in seed ^ (UInt64(s + 1) << 32) ^ (UInt64(n + 1) &* 0x1000_0001) }
    }

    public mutating func next(slot: Int, network: Int) -> Outcome {
        let n = networks[network]
        let sigma = log(n.p99Seconds / n.medianSeconds) / 2.326
        let latency = n.medianSeconds * exp(sigma * streams[slot][network].normal())
        let draw = streams[slot][network].nextUnit()
        let kind: Outcome.Kind = draw < n.errors ? .error : draw < n.errors + (1 - n.errors) * n.fill ? .fill : .noFill
        return Outcome(kind: kind, latency: latency)
    }
}

/// The price streams, apart from the outcome streams so that prices move no other figure:
/// the k-th fill of slot s from source n pays the same to every policy.
public struct Prices: Sendable {
    /// Mixed into the seed: "PRIC".
    static let salt: UInt64 = 0x5052_4943
    private var streams: [[SplitMix64]]
    private let sources: [Workload.Network]

    init(seed: UInt64, sources: [Workload.Network], slots: Int) {
        self.sources = sources
        streams = streamGrid(slots: slots, sources: sources.count) { s, n in seed ^ Self.salt ^ (UInt64(s + 1) << 40) ^ (UInt64(n + 1) &* 0x9E37_79B9) }
    }

    /// The next fill's price per 1,000 impressions.
    public mutating func next(slot: Int, source: Int) -> Double {
        let n = sources[source]
        return n.ecpm * exp(n.priceSpread * streams[slot][source].normal())
    }
}

/// One random stream per (slot, source), each seeded by `seed(slot, source)`.
private func streamGrid(slots: Int, sources: Int, seed: (Int, Int) -> UInt64) -> [[SplitMix64]] {
    (0..<slots).map { s in (0..<sources).map { n in SplitMix64(seed: seed(s, n)) } }
}
