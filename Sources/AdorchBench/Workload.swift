import AdorchEngine
import Foundation
import TOMLKit

/// The standard day's parameters (bench/workload.toml).
public struct Workload: Sendable {
    public struct Slot: Sendable {
        public var id: String
        public var format: AdFormat
        public var basePerHour: Double
        public var buffer: Int
    }

    public struct Network: Sendable {
        public var name: String
        public var fill: Double
        public var medianSeconds: Double
        public var p99Seconds: Double
        public var errors: Double
        public var ttlSeconds: Double
        public var timeoutSeconds: Double
        /// More than `loads` in any `window` seconds: rate_limited for `pause` seconds.
        public var rateLimit: (loads: Int, window: Double, pause: Double)?
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
    public var networks: [Network]

    public var seconds: Double { hours * 3600 }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public static func load(path: String) throws -> Workload {
        let table = try TOMLTable(string: try String(contentsOfFile: path, encoding: .utf8))
        func number(_ t: TOMLTable, _ key: String) throws -> Double {
            if let d = t[key]?.double { return d }
            if let i = t[key]?.int { return Double(i) }
            throw Failure(description: "\(path): \(key) must be a number")
        }
        func text(_ t: TOMLTable, _ key: String) throws -> String {
            guard let s = t[key]?.string else { throw Failure(description: "\(path): \(key) must be a string") }
            return s
        }
        guard let bursts = table["bursts"]?.table, let slotArray = table["slots"]?.array, let networkArray = table["networks"]?.array else {
            throw Failure(description: "\(path): needs [bursts], [[slots]] and [[networks]]")
        }
        var slots: [Slot] = []
        for case let s as TOMLTable in slotArray.map({ $0.table as Any }) {
            let formatName = try text(s, "format")
            guard let format = AdFormat(rawValue: formatName), format.isPreloaded else {
                throw Failure(description: "\(path): slot format \(formatName) is not a preloaded format")
            }
            slots.append(Slot(id: try text(s, "id"), format: format, basePerHour: try number(s, "base_per_hour"), buffer: Int(try number(s, "buffer"))))
        }
        var networks: [Network] = []
        for case let n as TOMLTable in networkArray.map({ $0.table as Any }) {
            var network = Network(name: try text(n, "name"), fill: try number(n, "fill"), medianSeconds: try number(n, "median_s"),
                                  p99Seconds: try number(n, "p99_s"), errors: try number(n, "errors"),
                                  ttlSeconds: try number(n, "ttl_minutes") * 60, timeoutSeconds: try number(n, "timeout_s"))
            if n["rate_limit_loads"] != nil {
                network.rateLimit = (Int(try number(n, "rate_limit_loads")), try number(n, "rate_limit_window_s"), try number(n, "rate_limit_pause_minutes") * 60)
            }
            networks.append(network)
        }
        return Workload(seed: UInt64(try number(table, "seed")), hours: try number(table, "hours"), dayAmplitude: try number(table, "day_amplitude"),
                        peakHour: table["peak_hour"] == nil ? 12 : try number(table, "peak_hour"),
                        burstsPerDay: Int(try number(bursts, "per_day")), burstFactor: try number(bursts, "factor"),
                        burstSeconds: try number(bursts, "minutes") * 60, slots: slots, networks: networks)
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

/// Show request times per slot, and the network outcomes each (slot, network) pair gives to
/// its 1st, 2nd, ... load: every policy replays the same day.
public struct Trace: Sendable {
    public var requests: [[Double]]
    public var bursts: [Double]
    private let seed: UInt64
    private let networks: [Workload.Network]

    public init(_ workload: Workload) {
        seed = workload.seed
        networks = workload.networks
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
    }

    /// A fresh cursor over the outcomes: each policy run takes its own.
    public func outcomes() -> Outcomes { Outcomes(seed: seed, networks: networks, slots: requests.count) }
}

/// The outcome streams: the k-th load of slot s to network n is the same for every policy.
public struct Outcomes: Sendable {
    private var streams: [[SplitMix64]]
    private let networks: [Workload.Network]

    init(seed: UInt64, networks: [Workload.Network], slots: Int) {
        self.networks = networks
        streams = (0..<slots).map { s in
            networks.indices.map { n in
                let stream: UInt64 = (UInt64(s + 1) << 32) ^ (UInt64(n + 1) &* 0x1000_0001)
                return SplitMix64(seed: seed ^ stream)
            }
        }
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
