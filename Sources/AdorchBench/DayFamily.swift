import AdorchEngine
import Foundation
import TOMLKit

/// The family of generated days: the ranges of bench/family.toml, and the days drawn from
/// them. Each day has its own random stream, taken from the family's seed in order, so the
/// first k days of a family are the same whatever its size.
public struct DayFamily: Sendable, Equatable {
    /// Drawn uniformly between `min` and `max`, or log-uniformly.
    public struct Range: Sendable, Equatable {
        public var min: Double
        public var max: Double
        public var logScale = false

        public func contains(_ x: Double) -> Bool { x >= min && x <= max }
    }

    /// An integer drawn uniformly from `min` to `max`, both included.
    public struct Count: Sendable, Equatable {
        public var min: Int
        public var max: Int

        public func contains(_ x: Int) -> Bool { x >= min && x <= max }
    }

    public var seed: UInt64
    public var count: Int
    public var hours: Double
    public var slots: Count
    public var formats: [AdFormat]
    public var basePerDay: Range
    public var buffer: Count
    public var amplitude: Range
    public var peakHour: Range
    public var bursts: Count
    public var burstFactor: Range
    public var burstMinutes: Range
    public var networks: Count
    public var fill: Range
    public var medianSeconds: Range
    public var p99OverMedian: Range
    public var errors: Range
    public var ttlMinutes: Range
    public var timeoutSeconds: Range
    public var rateLimitProbability: Double
    public var rateLimitLoads: Count
    public var rateLimitWindowSeconds: Range
    public var rateLimitPauseMinutes: Range
    /// Prices: every network's and bidder's eCPM and spread (`[prices]`).
    public var ecpm: Range
    public var priceSpread: Range
    /// Bidders (`[bidders]`): how many, and what they are like; the rest as networks.
    public var bidderCount: Count
    public var bidderFill: Range
    public var bidderMedianSeconds: Range
    public var bidderTTLMinutes: Range
    public var bidderTimeoutSeconds: Range

    public static func load(path: String) throws -> DayFamily {
        let root = try TOMLTable(string: try String(contentsOfFile: path, encoding: .utf8))
        func fail(_ what: String) -> Workload.Failure { Workload.Failure(description: "\(path): \(what)") }
        func table(_ t: TOMLTable, _ key: String) throws -> TOMLTable {
            guard let sub = t[key]?.table else { throw fail("needs [\(key)]") }
            return sub
        }
        func number(_ t: TOMLTable, _ key: String) throws -> Double {
            if let d = t[key]?.double { return d }
            if let i = t[key]?.int { return Double(i) }
            throw fail("\(key) must be a number")
        }
        func range(_ t: TOMLTable, _ key: String) throws -> Range {
            let r = try table(t, key)
            let scale = r["scale"]?.string ?? "uniform"
            let range = Range(min: try number(r, "min"), max: try number(r, "max"), logScale: scale == "log")
            guard ["uniform", "log"].contains(scale), range.min <= range.max, !range.logScale || range.min > 0 else {
                throw fail("\(key) must be { min, max } with min ≤ max (and min > 0 for scale = \"log\")")
            }
            return range
        }
        func count(_ t: TOMLTable, _ key: String) throws -> Count {
            let r = try table(t, key)
            guard let lo = r["min"]?.int, let hi = r["max"]?.int, lo <= hi else { throw fail("\(key) must be { min, max }, integers, min ≤ max") }
            return Count(min: lo, max: hi)
        }
        let slots = try table(root, "slots"), curve = try table(root, "curve"), bursts = try table(root, "bursts")
        let networks = try table(root, "networks"), limit = try table(networks, "rate_limit")
        let prices = try table(root, "prices"), bidders = try table(root, "bidders")
        let formats = try (slots["formats"]?.array ?? []).map { value in
            guard let name = value.string, let format = AdFormat(rawValue: name), format.isPreloaded else {
                throw fail("slots.formats: \(value) is not a preloaded format")
            }
            return format
        }
        guard let seed = root["seed"]?.int, seed >= 0, let size = root["count"]?.int, size >= 0 else {
            throw fail("seed and count must be integers ≥ 0")
        }
        let family = DayFamily(
            seed: UInt64(seed), count: size, hours: try number(root, "hours"),
            slots: try count(slots, "count"), formats: formats, basePerDay: try range(slots, "base_per_day"), buffer: try count(slots, "buffer"),
            amplitude: try range(curve, "amplitude"), peakHour: try range(curve, "peak_hour"),
            bursts: try count(bursts, "per_day"), burstFactor: try range(bursts, "factor"), burstMinutes: try range(bursts, "minutes"),
            networks: try count(networks, "count"), fill: try range(networks, "fill"), medianSeconds: try range(networks, "median_s"),
            p99OverMedian: try range(networks, "p99_over_median"), errors: try range(networks, "errors"),
            ttlMinutes: try range(networks, "ttl_minutes"), timeoutSeconds: try range(networks, "timeout_s"),
            rateLimitProbability: try number(limit, "probability"), rateLimitLoads: try count(limit, "loads"),
            rateLimitWindowSeconds: try range(limit, "window_s"), rateLimitPauseMinutes: try range(limit, "pause_minutes"),
            ecpm: try range(prices, "ecpm"), priceSpread: try range(prices, "spread"),
            bidderCount: try count(bidders, "count"), bidderFill: try range(bidders, "fill"),
            bidderMedianSeconds: try range(bidders, "median_s"), bidderTTLMinutes: try range(bidders, "ttl_minutes"),
            bidderTimeoutSeconds: try range(bidders, "timeout_s"))
        guard family.ecpm.min > 0, family.bidderCount.min >= 0, !formats.isEmpty, family.slots.min >= 1, family.networks.min >= 1, family.buffer.min >= 1, family.rateLimitLoads.min >= 1,
              (0...1).contains(family.rateLimitProbability), family.hours > 0 else {
            throw fail("needs formats, at least one slot, network, buffered ad and allowed load, and a probability in [0, 1]")
        }
        return family
    }

    /// Every day of the family.
    public func days() -> [Workload] {
        var streams = SplitMix64(seed: seed)
        return (0..<count).map { _ in day(SplitMix64(seed: streams.next())) }
    }

    private func day(_ random: SplitMix64) -> Workload {
        var draw = Draw(random: random)
        // Positive as a TOML integer, which is signed.
        let seed = draw.random.next() >> 2
        let amplitude = draw(self.amplitude), peak = draw(peakHour)
        let burstCount = draw(self.bursts), factor = draw(burstFactor), minutes = draw(burstMinutes)
        let slots = (0..<draw(self.slots)).map { i in
            let format = formats[draw(Count(min: 0, max: formats.count - 1))]
            let perHour = draw.rounded(draw.uniform(basePerDay) / 24, within: basePerDay.min / 24, basePerDay.max / 24)
            return Workload.Slot(id: "\(Self.prefix(format))_\(i + 1)", format: format, basePerHour: perHour, buffer: draw(buffer))
        }
        let networks = (0..<draw(self.networks)).map { i in
            let median = draw(medianSeconds)
            var network = Workload.Network(
                name: String(UnicodeScalar(UInt8(65 + i % 26))) + (i < 26 ? "" : "\(i / 26)"), fill: draw(fill), medianSeconds: median,
                p99Seconds: draw.rounded(median * draw.uniform(p99OverMedian), within: median * p99OverMedian.min, median * p99OverMedian.max),
                errors: draw(errors), ttlSeconds: draw(ttlMinutes) * 60, timeoutSeconds: draw(timeoutSeconds))
            if draw.random.nextUnit() < rateLimitProbability {
                network.rateLimit = Workload.RateLimit(loads: draw(rateLimitLoads), window: draw(rateLimitWindowSeconds),
                                                       pause: draw(rateLimitPauseMinutes) * 60)
            }
            return network
        }
        var day = Workload(seed: seed, hours: hours, dayAmplitude: amplitude, peakHour: peak, burstsPerDay: burstCount,
                           burstFactor: factor, burstSeconds: minutes * 60, slots: slots, networks: networks)
        addPrices(to: &day)
        return day
    }

    /// Prices and bidders, from a stream of the day's own seed: added after the rest, they
    /// move none of the day's other draws, nor any figure measured before prices were.
    private func addPrices(to day: inout Workload) {
        var draw = Draw(random: SplitMix64(seed: day.seed ^ Prices.salt))
        for i in day.networks.indices { (day.networks[i].ecpm, day.networks[i].priceSpread) = (draw(ecpm), draw(priceSpread)) }
        day.bidders = (0..<draw(bidderCount)).map { i in
            let median = draw(bidderMedianSeconds)
            var bidder = Workload.Network(
                name: "bidder\(i + 1)", fill: draw(bidderFill), medianSeconds: median,
                p99Seconds: draw.rounded(median * draw.uniform(p99OverMedian), within: median * p99OverMedian.min, median * p99OverMedian.max),
                errors: draw(errors), ttlSeconds: draw(bidderTTLMinutes) * 60, timeoutSeconds: draw(bidderTimeoutSeconds))
            if draw.random.nextUnit() < rateLimitProbability {
                bidder.rateLimit = Workload.RateLimit(loads: draw(rateLimitLoads), window: draw(rateLimitWindowSeconds),
                                                      pause: draw(rateLimitPauseMinutes) * 60)
            }
            (bidder.ecpm, bidder.priceSpread) = (draw(ecpm), draw(priceSpread))
            return bidder
        }
    }

    static func prefix(_ format: AdFormat) -> String {
        switch format {
        case .rewarded: "rw"
        case .fullscreen: "fs"
        case .interstitial: "it"
        default: format.rawValue
        }
    }

    /// One day's random stream and the rules for drawing from a range.
    private struct Draw {
        var random: SplitMix64

        mutating func uniform(_ r: Range) -> Double {
            let u = random.nextUnit()
            return r.logScale ? r.min * pow(r.max / r.min, u) : r.min + (r.max - r.min) * u
        }

        /// Rounded to 3 significant digits, and kept within [lo, hi].
        func rounded(_ x: Double, within lo: Double, _ hi: Double) -> Double {
            guard x != 0 else { return Swift.min(Swift.max(x, lo), hi) }
            let exponent = Int(floor(log10(abs(x)))) - 2
            let y = exponent >= 0 ? (x / pow(10, Double(exponent))).rounded() * pow(10, Double(exponent))
                : (x * pow(10, Double(-exponent))).rounded() / pow(10, Double(-exponent))
            return Swift.min(Swift.max(y, lo), hi)
        }

        mutating func callAsFunction(_ r: Range) -> Double { rounded(uniform(r), within: r.min, r.max) }

        mutating func callAsFunction(_ c: Count) -> Int { c.min + Swift.min(c.max - c.min, Int(random.nextUnit() * Double(c.max - c.min + 1))) }
    }
}
