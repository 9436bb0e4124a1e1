import AdorchEngine
import Foundation
import TOMLKit

/// Workload files: bench/workload.toml's format, one day a file; and family files, the same
/// keys for each of several days under `[[days]]` (`[days.bursts]`, `[[days.slots]]`,
/// `[[days.networks]]`), which `adorch-bench day --family-file` replays.
extension Workload {
    /// One day: a workload file, or day `day` (from 1) of a family file.
    public static func load(path: String, day: Int? = nil) throws -> Workload {
        let days = try loadDays(path: path)
        guard let day else {
            guard days.count == 1 else { throw Failure(description: "\(path): a family of \(days.count) days; pick one") }
            return days[0]
        }
        guard days.indices.contains(day - 1) else { throw Failure(description: "\(path): no day \(day) (it has \(days.count))") }
        return days[day - 1]
    }

    /// Every day of a family file, or the one day of a workload file.
    public static func loadDays(path: String) throws -> [Workload] {
        let table = try TOMLTable(string: try String(contentsOfFile: path, encoding: .utf8))
        guard let days = table["days"]?.array else { return [try Workload(table: table, path: path)] }
        return try days.enumerated().map { i, day in
            guard let t = day.table else { throw Failure(description: "\(path): days[\(i)] must be a table") }
            return try Workload(table: t, path: "\(path) day \(i + 1)")
        }
    }

    init(table: TOMLTable, path: String) throws {
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
        func sources(_ array: TOMLArray) throws -> [Network] {
            var networks: [Network] = []
            for case let n as TOMLTable in array.map({ $0.table as Any }) {
                var network = Network(name: try text(n, "name"), fill: try number(n, "fill"), medianSeconds: try number(n, "median_s"),
                                      p99Seconds: try number(n, "p99_s"), errors: try number(n, "errors"),
                                      ttlSeconds: try number(n, "ttl_minutes") * 60, timeoutSeconds: try number(n, "timeout_s"))
                if n["rate_limit_loads"] != nil {
                    network.rateLimit = RateLimit(loads: Int(try number(n, "rate_limit_loads")), window: try number(n, "rate_limit_window_s"),
                                                  pause: try number(n, "rate_limit_pause_minutes") * 60)
                }
                // Optional: a day without prices earns nothing, and says so.
                if n["ecpm"] != nil { network.ecpm = try number(n, "ecpm") }
                if n["price_spread"] != nil { network.priceSpread = try number(n, "price_spread") }
                guard network.ecpm >= 0, network.priceSpread >= 0 else { throw Failure(description: "\(path): ecpm and price_spread must be ≥ 0") }
                networks.append(network)
            }
            return networks
        }
        let networks = try sources(networkArray)
        var bidders: [Network] = []
        if let value = table["bidders"] {
            guard let array = value.array else { throw Failure(description: "\(path): bidders must be [[bidders]] tables") }
            bidders = try sources(array)
        }
        // The seed exactly, above 2^53 too: a TOML integer is read as one, not through a Double.
        let seed: UInt64
        if let i = table["seed"]?.int {
            guard i >= 0 else { throw Failure(description: "\(path): seed must not be negative") }
            seed = UInt64(i)
        } else {
            seed = UInt64(try number(table, "seed"))
        }
        self.init(seed: seed, hours: try number(table, "hours"), dayAmplitude: try number(table, "day_amplitude"),
                  peakHour: table["peak_hour"] == nil ? 12 : try number(table, "peak_hour"),
                  burstsPerDay: Int(try number(bursts, "per_day")), burstFactor: try number(bursts, "factor"),
                  burstSeconds: try number(bursts, "minutes") * 60, slots: slots, networks: networks, bidders: bidders)
    }

    /// The day as a workload file (`prefix` empty), or as one `[[days]]` entry of a family
    /// file (`prefix` "days"). Numbers are written so that they read back to the same bits.
    public func toml(prefix: String = "") -> String {
        func key(_ name: String) -> String { prefix.isEmpty ? name : "\(prefix).\(name)" }
        func n(_ x: Double) -> String { "\(x)" }  // Swift's shortest form that reads back exactly
        var lines: [String] = prefix.isEmpty ? [] : ["[[\(prefix)]]"]
        lines += ["seed = \(seed)", "hours = \(n(hours))", "day_amplitude = \(n(dayAmplitude))"]
        if peakHour != 12 { lines.append("peak_hour = \(n(peakHour))") }
        lines += ["", "[\(key("bursts"))]", "per_day = \(burstsPerDay)", "factor = \(n(burstFactor))", "minutes = \(n(burstSeconds / 60))"]
        for slot in slots {
            lines += ["", "[[\(key("slots"))]]", "id = \"\(slot.id)\"", "format = \"\(slot.format.rawValue)\"",
                      "base_per_hour = \(n(slot.basePerHour))", "buffer = \(slot.buffer)"]
        }
        for (network, list) in networks.map({ ($0, "networks") }) + bidders.map({ ($0, "bidders") }) {
            lines += ["", "[[\(key(list))]]", "name = \"\(network.name)\"", "fill = \(n(network.fill))", "median_s = \(n(network.medianSeconds))",
                      "p99_s = \(n(network.p99Seconds))", "errors = \(n(network.errors))", "ttl_minutes = \(n(network.ttlSeconds / 60))",
                      "timeout_s = \(n(network.timeoutSeconds))"]
            if let limit = network.rateLimit {
                lines += ["rate_limit_loads = \(limit.loads)", "rate_limit_window_s = \(n(limit.window))",
                          "rate_limit_pause_minutes = \(n(limit.pause / 60))"]
            }
            if network.ecpm > 0 { lines += ["ecpm = \(n(network.ecpm))", "price_spread = \(n(network.priceSpread))"] }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A family file: `comment` (each line made a TOML comment), then every day.
    public static func familyTOML(_ days: [Workload], comment: String) -> String {
        let header = comment.split(separator: "\n", omittingEmptySubsequences: false).map { "# \($0)".trimmingCharacters(in: .whitespaces) }
        return ([header.joined(separator: "\n")] + days.map { $0.toml(prefix: "days") }).joined(separator: "\n")
    }
}
