/// Decides which refusals reach the journal: the first of each kind for each offender, then
/// at most one a minute with how many were refused meanwhile. A client refused a thousand
/// times a second then costs the journal one line a minute, and the operator still learns
/// who it is and how hard it tried. The caller keeps it on its own queue or behind a lock.
public struct RefusalLog: Sendable {
    /// One line per offender and kind per `interval`.
    public static let interval: Duration = .seconds(60)

    /// The refusal kinds: each names a budget or rule from `[limits]` or the access rules.
    public struct Key: Hashable, Sendable {
        public var uid: UInt32
        public var kind: String
        public init(uid: UInt32, kind: String) {
            self.uid = uid
            self.kind = kind
        }
    }

    private var last: [Key: (at: ContinuousClock.Instant, suppressed: Int)] = [:]
    private var notes = 0

    public init() {}

    /// Notes one refusal of `key` at `now`. nil: do not log it; otherwise log it, adding how
    /// many of the same refusals went unlogged since the last line (0 for the first).
    public mutating func note(_ key: Key, now: ContinuousClock.Instant = .now) -> Int? {
        notes += 1
        if notes % 4096 == 0 { last = last.filter { now - $0.value.at < Self.interval } }
        if let previous = last[key], now - previous.at < Self.interval {
            last[key]!.suppressed += 1
            return nil
        }
        let suppressed = last[key]?.suppressed ?? 0
        last[key] = (now, 0)
        return suppressed
    }

    /// The words to add to a logged refusal for what was left out before it.
    public static func suffix(_ suppressed: Int) -> String {
        suppressed == 0 ? "" : " (and \(suppressed) more refusal\(suppressed == 1 ? "" : "s") of this kind for this uid in the last minute, not logged)"
    }
}
