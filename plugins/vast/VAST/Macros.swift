import Foundation

/// VAST macros in tag, tracking and error URLs: [NAME] replaced by its value, each value
/// percent-encoded on its own (so a value can never add a parameter to the URL). Unknown
/// macros are left as they are, as VAST 4 asks.
public struct Macros: Sendable {
    public var values: [String: String]
    /// The macros whose value is a list (the macro list's Array types, such as [REGULATIONS]):
    /// each item is encoded on its own and the items joined by a bare comma, as the macro
    /// list's examples write them (`video%2Fmp4,application%2Fx-mpegURL`).
    public var lists: [String: [String]]

    public init(_ values: [String: String] = [:], lists: [String: [String]] = [:]) {
        self.values = values
        self.lists = lists
    }

    /// The per-request values plus the two that change on every use: [TIMESTAMP] (ISO 8601
    /// with milliseconds and offset) and [CACHEBUSTING] (8 random digits).
    public func expand(_ template: String, now: Date = Date(), extra: [String: String] = [:]) -> String {
        guard template.contains("[") else { return template }
        var all = values.merging(extra) { $1 }
        all["TIMESTAMP"] = all["TIMESTAMP"] ?? now.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .colon))
        all["CACHEBUSTING"] = all["CACHEBUSTING"] ?? String(format: "%08d", Int.random(in: 0...99_999_999))
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "[") {
            out += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "]") else { return out + rest[open...] }
            let name = String(rest[rest.index(after: open)..<close])
            if let value = all[name] {
                out += Self.percentEncode(value)
            } else if let list = lists[name] {
                out += list.map(Self.percentEncode).joined(separator: ",")
            } else {
                out += rest[open...close]
            }
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    /// RFC 3986: everything but the unreserved characters is escaped.
    public static func percentEncode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

/// What a load says of the viewer's privacy, as the VAST privacy macros need it.
public struct PrivacyFacts: Sendable, Equatable {
    /// Whether the GDPR applies; nil: the app did not say.
    public var gdpr: Bool?
    /// The TCF v2 TC string; "" none.
    public var tcString: String
    /// The load must not be personalised: its class, or the viewer's limit on ad tracking.
    public var limitAdTracking: Bool
    /// The load is child-directed (COPPA).
    public var childDirected: Bool
    /// The GPP string and the ids of its sections that apply; "" and [] none.
    public var gpp: String
    public var gppSectionIDs: [UInt32]

    public init(gdpr: Bool?, tcString: String, limitAdTracking: Bool, childDirected: Bool, gpp: String, gppSectionIDs: [UInt32]) {
        self.gdpr = gdpr
        self.tcString = tcString
        self.limitAdTracking = limitAdTracking
        self.childDirected = childDirected
        self.gpp = gpp
        self.gppSectionIDs = gppSectionIDs
    }
}

extension Macros {
    /// The VAST 4.x privacy macros for a load: [GDPRCONSENT] (the TC string), [GDPR] (1 or 0,
    /// empty when unknown), [LIMITADTRACKING] (1 or 0), [REGULATIONS] (the list's values that
    /// apply: `coppa`, `gdpr`), [GPPSTRING] and [GPPSECTIONID] (the ids, a list). `facts` nil:
    /// a host older than ABI 1.4 said nothing, and every one of them is empty rather than
    /// left in the URL as written.
    public mutating func setPrivacy(_ facts: PrivacyFacts?) {
        values["GDPR"] = facts?.gdpr.map { $0 ? "1" : "0" } ?? ""
        values["GDPRCONSENT"] = facts?.tcString ?? ""
        values["LIMITADTRACKING"] = facts.map { $0.limitAdTracking ? "1" : "0" } ?? ""
        values["GPPSTRING"] = facts?.gpp ?? ""
        var regulations: [String] = []
        if facts?.childDirected == true { regulations.append("coppa") }
        if facts?.gdpr == true { regulations.append("gdpr") }
        lists["REGULATIONS"] = regulations
        lists["GPPSECTIONID"] = facts?.gppSectionIDs.map(String.init) ?? []
    }
}
