import AdorchEngine

/// One line of the validator's report.
public struct CheckResult: Sendable, Codable, Equatable {
    public enum Outcome: String, Sendable, Codable { case pass, fail, skip }
    public var name: String
    public var outcome: Outcome
    public var detail: String

    public var line: String { "\(outcome.rawValue.uppercased().padding(toLength: 5, withPad: " ", startingAt: 0)) \(name): \(detail)" }
}

/// What to run the plugin with.
public struct ValidatorOptions: Sendable {
    public var configJSON = "{}"
    /// Only these formats (all the plugin claims when empty).
    public var formats: [AdFormat] = []
    public var serverParameter = ""
    /// Load → show → destroy cycles of the resource check.
    public var iterations = 10_000
    /// No call into the plugin may take longer (plugin.h: [plugin queue] calls return quickly).
    public var callBound: Duration = .milliseconds(50)
    /// Each request's deadline.
    public var timeout: Duration = .seconds(2)
    /// The deadline of the check that holds a plugin to answering before it (plugin.h, rule 3),
    /// when shorter than `timeout`: short enough that a slow network's plugin must give up.
    public var shortTimeout: Duration = .milliseconds(500)
    /// How long to keep listening after a destroy or deinit for a report that must not come.
    public var grace: Duration = .milliseconds(200)
    public var threads = 4
    /// Memory (RSS, or the heap in use under a sanitizer) may grow this much over the
    /// measured cycles, after a warm-up.
    public var memorySlack = 4 << 20

    public init() {}
}
