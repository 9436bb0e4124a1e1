import AdorchJSON
import Foundation

// The io.adorch.Ads types (Sources/AdorchDaemon/API/AdsInterface.swift), field for field, with
// Swift names; the comments there say what each field means.

/// A place in an app where ads are shown.
public struct Slot: Sendable, Equatable, Codable {
    public var id: String
    /// rewarded, fullscreen, interstitial (preloaded); banner, splash, native (Load); interactive
    public var format: String
    public var buffer: Int
    public var bufferMin: Int
    public var bufferMax: Int
    /// Valid ads ready now.
    public var ready: Int
    public var loading: Int
    public var demand: Demand?
    /// Why the slot cannot fill, when it cannot.
    public var unservable: String?
    /// The frequency rule that would answer a Show for the user `listSlots(userID:)` was
    /// given `.capped`, and until when; nil when a Show is let in (docs/caps.md).
    public var capped: CapHold?

    enum CodingKeys: String, CodingKey {
        case id, format, buffer, bufferMin = "buffer_min", bufferMax = "buffer_max", ready, loading, demand, unservable, capped
    }
}

/// A frequency rule that holds a slot for a user (ListSlots' `capped`).
public struct CapHold: Sendable, Equatable, Codable {
    /// Its name, e.g. "3 per 1h per user", "pacing 30s per user", "sim: 1 per 1d per user".
    public var rule: String
    /// cap or pacing
    public var kind: String
    /// For a network's rule: its plugin.
    public var network: String?
    /// A Show after this many milliseconds is let in, if no other ad is shown before.
    public var retryAfterMs: Int
    /// RFC 3339: the same moment.
    public var until: String

    enum CodingKeys: String, CodingKey { case rule, kind, network, retryAfterMs = "retry_after_ms", until }
}

/// io.adorch.Manager.GetCaps: one frequency rule of a slot or of one of its networks, and
/// what it counts now for the user asked about.
public struct CapRule: Sendable, Equatable, Codable {
    /// As Capped names it, e.g. "3 per 1h per user", "sim: pacing 30s per slot".
    public var rule: String
    /// cap or pacing
    public var kind: String
    /// user or slot
    public var scope: String
    /// For a network's rule: its plugin and ad unit.
    public var network: String?
    public var adUnitID: String?
    /// At most `impressions` ads in any window of `windowMs`.
    public var impressions: Int
    public var windowMs: Int
    /// Impressions the rule counts for the user (or the slot) now.
    public var counted: Int
    /// Set when the rule holds a Show now: one after this many milliseconds is let in.
    public var retryAfterMs: Int?
    /// RFC 3339: the same moment.
    public var until: String?

    enum CodingKeys: String, CodingKey {
        case rule, kind, scope, network, adUnitID = "ad_unit_id", impressions, windowMs = "window_ms", counted
        case retryAfterMs = "retry_after_ms", until
    }
}

/// How the scheduler sizes a preloaded slot's buffer.
public struct Demand: Sendable, Equatable, Codable {
    public var perMinute: Double
    public var longPerMinute: Double
    public var shortPerMinute: Double
    public var refillSeconds: Double
    public var adLifetimeSeconds: Double
    public var reason: String

    enum CodingKeys: String, CodingKey {
        case perMinute = "per_minute", longPerMinute = "long_per_minute", shortPerMinute = "short_per_minute"
        case refillSeconds = "refill_s", adLifetimeSeconds = "ad_lifetime_s", reason
    }
}

/// An ad handed to the app: no longer valid for anyone else.
public struct Ad: Sendable, Equatable, Codable {
    /// What Report takes.
    public var id: String
    public var slot: String
    /// The plugin (ad network) that filled it.
    public var network: String
    public var format: String
    /// What the app needs to render it, from the network.
    public var payload: [String: JSONValue]
    /// RFC 3339: display it before then.
    public var expiresAt: String
    /// The network's eCPM, 0 when unknown.
    public var price: Double

    enum CodingKeys: String, CodingKey { case id, slot, network, format, payload, expiresAt = "expires_at", price }
}

/// Something that happened in the daemon (Subscribe, ListEvents).
public struct Event: Sendable, Equatable, Codable {
    /// subscribed, ad_loaded, ad_failed, ad_shown, ad_event, reward_granted, session_event, ...
    public var kind: String
    public var time: String
    public var slot: String?
    public var adID: String?
    public var network: String?
    /// The host error code: internal, network, no_fill, invalid_request, timeout, ...
    public var error: String?
    public var networkCode: Int?
    public var message: String?
    /// For ad_event: what the app reported.
    public var viewerEvent: String?
    public var userID: String?
    /// The ad event vocabulary (impression, click, closed, reward, failed_to_display, ...) or
    /// a session event's (fetch_complete, started, completed, ...).
    public var name: String?
    public var detail: [String: JSONValue]?
    public var sessionID: String?
    /// For session_event: its last event.
    public var terminal: Bool?
    public var adFreePod: Bool?
    /// For subscribed: unacknowledged rewards beyond those redelivered (ListRewards pages them).
    public var rewardsWaiting: Int?

    enum CodingKeys: String, CodingKey {
        case kind, time, slot, adID = "ad_id", network, error, networkCode = "network_code", message
        case viewerEvent = "viewer_event", userID = "user_id", name, detail, sessionID = "session_id", terminal
        case adFreePod = "ad_free_pod", rewardsWaiting = "rewards_waiting"
    }

    /// The reward of a reward_granted event (its detail is the ledger's row).
    public var reward: Reward? {
        guard kind == EventKind.rewardGranted, let detail else { return nil }
        return try? decode(Reward.self, from: .object(detail))
    }
}

/// The event kinds the library itself looks for.
public enum EventKind {
    public static let subscribed = "subscribed"
    public static let adLoaded = "ad_loaded"
    public static let rewardGranted = "reward_granted"
    public static let sessionEvent = "session_event"
}

/// What the viewer earns; nil fields take the slot's model.
public struct RewardModel: Sendable, Equatable {
    public var name: String?
    public var amount: Int?
    public var extra: String?

    public init(name: String? = nil, amount: Int? = nil, extra: String? = nil) {
        self.name = name
        self.amount = amount
        self.extra = extra
    }

    var json: JSONValue {
        var object: [String: JSONValue] = [:]
        if let name { object["name"] = .string(name) }
        if let amount { object["amount"] = .int(Int64(amount)) }
        if let extra { object["extra"] = .string(extra) }
        return .object(object)
    }
}

/// A viewer's privacy signals, as the app says them (docs/privacy.md, "Setting a viewer's
/// state"); nil leaves a field out. The daemon decodes each string and refuses one that does
/// not decode.
public struct Privacy: Sendable, Equatable, Codable {
    /// Whether the GDPR applies to the viewer; nil: unknown.
    public var gdprApplies: Bool?
    /// A TCF v2 TC string.
    public var tcString: String?
    /// A GPP string, and the ids of its sections that apply (OpenRTB's `gpp_sid`; only with `gpp`).
    public var gpp: String?
    public var gppSid: [Int]?
    /// A US Privacy string, e.g. "1YNN".
    public var usPrivacy: String?
    /// The app is directed to children (COPPA), or says this viewer is a child.
    public var childDirected: Bool?
    public var underAgeOfConsent: Bool?
    /// Limited ad tracking, or the app's own choice of non-personalised ads.
    public var nonPersonalized: Bool?
    /// G, PG, T or MA: the highest content rating of ads for the viewer.
    public var maxContentRating: String?

    enum CodingKeys: String, CodingKey {
        case gdprApplies = "gdpr_applies", tcString = "tc_string", gpp, gppSid = "gpp_sid", usPrivacy = "us_privacy"
        case childDirected = "child_directed", underAgeOfConsent = "under_age_of_consent", nonPersonalized = "non_personalized"
        case maxContentRating = "max_content_rating"
    }

    public init(gdprApplies: Bool? = nil, tcString: String? = nil, gpp: String? = nil, gppSid: [Int]? = nil, usPrivacy: String? = nil,
                childDirected: Bool? = nil, underAgeOfConsent: Bool? = nil, nonPersonalized: Bool? = nil, maxContentRating: String? = nil) {
        self.gdprApplies = gdprApplies
        self.tcString = tcString
        self.gpp = gpp
        self.gppSid = gppSid
        self.usPrivacy = usPrivacy
        self.childDirected = childDirected
        self.underAgeOfConsent = underAgeOfConsent
        self.nonPersonalized = nonPersonalized
        self.maxContentRating = maxContentRating
    }

    var json: JSONValue {
        var object: [String: JSONValue] = [:]
        for (key, value) in [(CodingKeys.gdprApplies, gdprApplies), (.childDirected, childDirected), (.underAgeOfConsent, underAgeOfConsent),
                             (.nonPersonalized, nonPersonalized)] {
            if let value { object[key.rawValue] = .bool(value) }
        }
        for (key, value) in [(CodingKeys.tcString, tcString), (.gpp, gpp), (.usPrivacy, usPrivacy), (.maxContentRating, maxContentRating)] {
            if let value { object[key.rawValue] = .string(value) }
        }
        if let gppSid { object[CodingKeys.gppSid.rawValue] = .array(gppSid.map { .int(Int64($0)) }) }
        return .object(object)
    }
}

/// Where the privacy GetPrivacy answered comes from.
public enum PrivacySource: String, Sendable {
    /// The record set for the user id asked about.
    case user
    /// The app's own record.
    case app
    /// Nothing was set: the daemon's default applies.
    case none
}

/// A reward in the daemon's ledger. Redelivered until acknowledged: an app may see one twice
/// (after a reconnect, or a new subscription), so it credits each `transID` once.
public struct Reward: Sendable, Equatable, Codable {
    public var transID: String
    public var adID: String
    public var userID: String
    public var slot: String
    public var network: String
    public var rewardName: String
    public var rewardAmount: Int
    public var extra: String
    public var grantedAt: String
    public var acknowledged: Bool

    enum CodingKeys: String, CodingKey {
        case transID = "trans_id", adID = "ad_id", userID = "user_id", slot, network, rewardName = "reward_name"
        case rewardAmount = "reward_amount", extra, grantedAt = "granted_at", acknowledged
    }
}

/// A page of ListRewards: `more` says others follow (ask again with `after` = the last trans_id).
public struct RewardPage: Sendable, Equatable {
    public var rewards: [Reward]
    public var more: Bool
}

/// What the viewer did with a shown ad (Report).
public enum ViewerEvent: String, Sendable, CaseIterable {
    case impression, click, close, complete, skip, start
    case firstQuartile = "first_quartile", midpoint, thirdQuartile = "third_quartile"
}

/// Where an interactive ad runs.
public enum SlotType: String, Sendable {
    case preroll, midroll
}

/// io.adorch.Manager.GetStatus: the top-level fields typed, the nested reports as JSON.
public struct Status: Sendable, Equatable, Codable {
    public var version: String
    public var pid: Int
    public var uptimeSeconds: Double
    public var socket: String
    public var config: String
    public var subscribers: Int
    public var connections: [String: JSONValue]
    public var limits: [String: JSONValue]
    public var plugins: [JSONValue]
    public var slots: [JSONValue]
    public var networks: [JSONValue]
    public var unattributedCallbacks: Int

    enum CodingKeys: String, CodingKey {
        case version, pid, uptimeSeconds = "uptime_s", socket, config, subscribers, connections, limits, plugins, slots, networks
        case unattributedCallbacks = "unattributed_callbacks"
    }
}

/// A reply's value as `T`, through Foundation's decoder; a reply that does not fit the IDL
/// is `.malformedReply`, saying what did not fit.
func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws(AdorchError) -> T {
    do {
        return try JSONDecoder().decode(T.self, from: value.jsonData)
    } catch {
        throw AdorchError(.malformedReply, message: "a reply's \(T.self) does not fit the IDL: \(error)")
    }
}
