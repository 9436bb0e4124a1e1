/// A frequency rule (docs/caps.md): at most `impressions` ads shown per `window`, counted
/// per user or over the whole slot. Pacing is the rule of one ad per interval, so one
/// arithmetic serves both, and "the stricter wins" is the rule that frees the latest.
public struct FrequencyRule: Sendable, Equatable, Hashable {
    /// Whose impressions a rule counts.
    public enum Scope: String, Sendable, CaseIterable {
        /// The Show's user_id; Shows without one count together, as one anonymous user.
        case user
        /// Every user of the slot together.
        case slot
    }

    public var impressions: Int
    public var window: Duration
    public var scope: Scope
    /// Written as `pacing = "…"`: named so, and checked against the caps it may make unreachable.
    public var isPacing: Bool

    public static func cap(_ impressions: Int, per window: Duration, scope: Scope = .user) -> FrequencyRule {
        FrequencyRule(impressions: impressions, window: window, scope: scope, isPacing: false)
    }

    public static func pacing(_ interval: Duration, scope: Scope = .user) -> FrequencyRule {
        FrequencyRule(impressions: 1, window: interval, scope: scope, isPacing: true)
    }

    /// How Capped, ListSlots, adorchctl and the metrics name the rule: as the config would
    /// write it, its window in the largest whole unit ("60s" is "1m").
    public var name: String {
        let per = "per \(scope.rawValue)"
        return isPacing ? "pacing \(Self.text(window)) \(per)" : "\(impressions) per \(Self.text(window)) \(per)"
    }

    /// When the rule lets the next impression in, given the `times` (nanoseconds on the
    /// engine's clock, oldest first) of the impressions it counts: nil if it does now. An
    /// impression at t counts while now < t + window, so the one that must leave is the
    /// `impressions`-th newest. Public for the day benchmark, whose app-side cap must refuse
    /// exactly what the engine's would.
    public func freesAt(_ times: ArraySlice<Int64>, now: Int64) -> Int64? {
        let windowNS = window.nanosecondsClamped
        let counted = times.count - Self.firstIndex(in: times, after: now &- windowNS)
        guard counted >= impressions else { return nil }
        return times[times.endIndex - impressions] &+ windowNS
    }

    /// The first index whose time is after `t` (times oldest first).
    static func firstIndex(in times: ArraySlice<Int64>, after t: Int64) -> Int {
        var low = times.startIndex, high = times.endIndex
        while low < high {
            let mid = (low + high) / 2
            if times[mid] > t { high = mid } else { low = mid + 1 }
        }
        return low
    }
}

extension FrequencyRule {
    /// The shortest and longest window a rule may have: history is kept for the longest.
    public static let windows: ClosedRange<Duration> = .milliseconds(1) ... .seconds(31 * 86_400)
    /// The most impressions a rule may allow in its window.
    public static let impressionsAtMost = 1_000_000

    private static let units: [(suffix: String, duration: Duration)] = [
        ("d", .seconds(86_400)), ("h", .seconds(3600)), ("m", .seconds(60)), ("s", .seconds(1)), ("ms", .milliseconds(1)),
    ]

    /// "30s", "1h", "1d", "500ms", "90m": a whole number and one unit (ms, s, m, h, d).
    public static func window(_ text: String) -> Duration? {
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count <= 12, let count = Int64(digits),
              let unit = units.first(where: { $0.suffix == text.dropFirst(digits.count) })
        else { return nil }
        return unit.duration * count
    }

    /// A window in the largest unit that writes it whole: what `window(_:)` reads back.
    public static func text(_ window: Duration) -> String {
        let ns = window.nanosecondsClamped
        for unit in units {
            let unitNS = unit.duration.nanosecondsClamped
            if ns % unitNS == 0 { return "\(ns / unitNS)\(unit.suffix)" }
        }
        return "\(Double(ns) / 1e6)ms"
    }
}

/// When a slot's impressions count against its rules (docs/caps.md, "Counting").
public enum CapCounting: String, Sendable, CaseIterable {
    /// When the impression is reported, by the app or by a plugin that tracks its own.
    case impression
    /// When a Show hands the ad to the app.
    case show
}

/// The network instance a waterfall entry's rules count for: its plugin and ad unit.
public struct CapNetwork: Sendable, Hashable {
    public var plugin: String
    public var adUnitID: String

    public init(plugin: String, adUnitID: String) {
        self.plugin = plugin
        self.adUnitID = adUnitID
    }

    /// "sim" or "sim/unit-7", for rule names and logs.
    public var name: String { adUnitID.isEmpty ? plugin : "\(plugin)/\(adUnitID)" }

    /// How Capped names one of this network's rules: "sim: 3 per 1h per user".
    public func name(of rule: FrequencyRule) -> String { "\(name): \(rule.name)" }
}

/// Whose impressions a per-user rule counts: a user id of one app. Apps name their users
/// themselves, so the id is the calling app's (its uid): one app's Shows never cap another's
/// users, nor tell it when they saw an ad. Ids are compared as bytes, as apps send them.
public struct CapUser: Sendable, Hashable {
    /// The uid of the app that made the Show; nil for a caller without credentials (tests).
    public var uid: UInt32?
    /// "" for a Show without a user id.
    public var id: String

    public init(uid: UInt32?, id: String?) {
        self.uid = uid
        self.id = id ?? ""
    }

    public static func == (a: CapUser, b: CapUser) -> Bool { a.uid == b.uid && a.id.utf8.elementsEqual(b.id.utf8) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(uid)
        for byte in id.utf8 { hasher.combine(byte) }
    }
}

/// One counted impression, as the history keeps it and the state directory stores it.
public struct CountedImpression: Sendable, Equatable {
    public var slot: String
    public var network: CapNetwork
    public var user: CapUser
    /// Nanoseconds on the engine's clock; negative for an impression from before its origin
    /// (read back from the state directory after a reboot).
    public var at: Int64

    public init(slot: String, network: CapNetwork, user: CapUser, at: Int64) {
        self.slot = slot
        self.network = network
        self.user = user
        self.at = at
    }
}

/// A rule that holds a slot (or, for entry rules, one of its networks) for a user now.
public struct CapHold: Sendable, Equatable {
    public var rule: FrequencyRule
    /// Set for a waterfall entry's rule: the network it holds.
    public var network: CapNetwork?
    /// Until when, on the engine's clock.
    public var until: Moment
    /// From the moment asked, rounded up to whole milliseconds: a retry then is let in.
    public var retryAfter: Duration

    /// The rule's name, with the network for an entry's rule: "sim: 3 per 1h per user".
    public var ruleName: String { network?.name(of: rule) ?? rule.name }
}

/// One rule's use for one user, for `adorchctl caps`.
public struct CapUse: Sendable, Equatable {
    public var rule: FrequencyRule
    public var network: CapNetwork?
    /// Impressions in the rule's window now.
    public var counted: Int
    /// Set when the rule holds now.
    public var hold: CapHold?
}
