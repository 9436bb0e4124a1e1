import AdorchEngine
import Foundation

/// The two text formats a Prometheus scraper reads. Neither swift-prometheus 2.4.1 nor
/// swift-metrics renders what adorch needs (checked in their source): swift-prometheus emits
/// only the 0.0.4 text format (no `# UNIT`, no `# EOF`), takes a lock on every histogram
/// record, and keeps its own registry of live counters, while adorch's counters already
/// live in the engine and are read from it at each scrape. So the renderer is this file.
public enum MetricsFormat: String, Sendable, CaseIterable {
    /// The classic text format (0.0.4): what `promtool check metrics` (Prometheus 2.42)
    /// parses. Its parser takes a counter's family name with `_total`; OpenMetrics' family
    /// without it fails the lint ("no help text"), so this is adorchctl's default.
    case text
    /// OpenMetrics 1.0: `# UNIT`, counter families without `_total`, `info`, `# EOF`.
    case openmetrics

    public var contentType: String {
        switch self {
        case .text: "text/plain; version=0.0.4; charset=utf-8"
        case .openmetrics: "application/openmetrics-text; version=1.0.0; charset=utf-8"
        }
    }

    /// What an HTTP scraper's Accept header asks for: OpenMetrics if it names that media
    /// type exactly with a q above 0 and at least that of text/plain (RFC 9110 12.5.1), else text.
    public static func negotiated(accept: String?) -> MetricsFormat {
        var weights: [String: Double] = [:]
        for range in (accept ?? "").split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let type = parts.first, !type.isEmpty else { continue }
            let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            weights[type] = max(weights[type] ?? 0, q)
        }
        guard let open = weights["application/openmetrics-text"], open > 0 else { return .text }
        return open >= (weights["text/plain"] ?? 0) ? .openmetrics : .text
    }
}

/// One metric family: a name, what it means, and its samples. Labels come only from bounded
/// sets (slot ids and plugin names from the config, fixed outcome words), never from callers.
public struct MetricFamily: Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram, info }
    public typealias Labels = [(String, String)]

    /// Without the `_total` of a counter or the `_info` of an info: the renderer adds them.
    public var name: String
    public var kind: Kind
    public var help: String
    /// The base unit the name ends with (`seconds`), for OpenMetrics' `# UNIT`.
    public var unit: String?
    public var samples: [(labels: Labels, value: Double)] = []
    public var histograms: [(labels: Labels, histogram: LatencyHistogram)] = []

    public init(_ name: String, _ kind: Kind, unit: String? = nil, help: String) {
        (self.name, self.kind, self.unit, self.help) = (name, kind, unit, help)
    }

    public mutating func add(_ value: Double, _ labels: Labels = []) { samples.append((labels, value)) }
    public mutating func add(_ value: Int, _ labels: Labels = []) { samples.append((labels, Double(value))) }
}

/// Renders families in either format.
public enum MetricsText {
    public static func render(_ families: [MetricFamily], as format: MetricsFormat) -> String {
        var out = ""
        // About 40 bytes a line: one allocation up front instead of a doubling per few KB.
        out.reserveCapacity(families.reduce(0) { $0 + ($1.samples.count + $1.histograms.count * (LatencyHistogram.bounds.count + 3)) * 48 })
        for family in families where !(family.samples.isEmpty && family.histograms.isEmpty) {
            let sampleName = switch family.kind {
            case .counter: family.name + "_total"
            case .info: family.name + "_info"
            case .gauge, .histogram: family.name
            }
            // The classic format has no info type and names a counter family as its samples.
            let (familyName, type) = switch (format, family.kind) {
            case (.text, .info): (sampleName, "gauge")
            case (.text, _): (sampleName, family.kind.rawValue)
            case (.openmetrics, _): (family.name, family.kind.rawValue)
            }
            out += "# HELP \(familyName) \(escapeHelp(family.help))\n# TYPE \(familyName) \(type)\n"
            if format == .openmetrics, let unit = family.unit { out += "# UNIT \(familyName) \(unit)\n" }
            for sample in family.samples {
                out += sampleName
                out += labels(sample.labels)
                out += " "
                out += number(sample.value)
                out += "\n"
            }
            for (base, histogram) in family.histograms {
                // The bucket lines differ only in le and count: their prefix is built once.
                let bucket = sampleName + "_bucket{" + base.map { "\($0.0)=\"\(escapeLabel($0.1))\"," }.joined() + "le=\""
                for (bound, count) in zip(leValues, histogram.cumulative) {
                    out += bucket
                    out += bound
                    out += "\"} "
                    out += String(count)
                    out += "\n"
                }
                let baseLabels = labels(base)
                out += "\(sampleName)_sum\(baseLabels) \(number(histogram.sum))\n"
                out += "\(sampleName)_count\(baseLabels) \(histogram.count)\n"
            }
        }
        return format == .openmetrics ? out + "# EOF\n" : out
    }

    /// Bounds as floats ("1.0", not "1"): the canonical form both formats expect of le.
    static let leValues = LatencyHistogram.bounds.map { "\($0)" } + ["+Inf"]

    static func labels(_ labels: MetricFamily.Labels) -> String {
        labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
    }

    /// Whole numbers without a fraction (counts read as counts); others as Swift prints a
    /// Double, which both formats parse.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }

    static func escapeLabel(_ s: String) -> String {
        // Slot ids and plugin names rarely need it: skip three Foundation passes per label.
        guard s.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) else { return s }
        return s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func escapeHelp(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
