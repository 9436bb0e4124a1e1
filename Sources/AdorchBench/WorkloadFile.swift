import AdorchEngine
import Foundation
import TOMLKit

/// Workload files: bench/workload.toml's format.
extension Workload {
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
