import AdorchJSON
import CAdorchPlugin
import Foundation

/// One bidder: the plugin's config section (`[plugins.NAME] config = { ... }` in adorchd.toml),
/// read once at init. Every key but `endpoint` has a default; a bad value is refused with the
/// key's name, so the plugin refuses to start rather than bid with a setting it misread.
public struct BidderSettings: Sendable, Equatable {
    /// Where BidRequests are POSTed: http or https.
    public var endpoint: URL
    /// The auction's time limit, sent as `tmax` and enforced on the HTTP exchange (a load's own
    /// deadline wins when it is sooner).
    public var tmax: Duration = .milliseconds(500)
    /// The one currency bids are asked and accepted in (ISO 4217), sent as `cur`.
    public var currency = "USD"
    /// The lowest CPM taken, in `currency`: sent as `imp.bidfloor`, and a bid below it is refused.
    public var floor: Double = 0
    /// Blocked IAB content categories (`bcat`) and advertiser domains (`badv`).
    public var blockedCategories: [String] = []
    public var blockedAdvertisers: [String] = []
    /// The app the ads are for (OpenRTB `app`).
    public var app = AppIdentity()
    /// The host as OpenRTB's `device` describes it: only what a Linux host honestly knows.
    public var device = DeviceFacts()
    /// Video MIME types the player takes, best first (`video.mimes`).
    public var videoTypes = ["video/mp4", "video/webm"]
    /// A response larger than this is refused unread.
    public var maxResponseBytes = 1 << 20

    /// The bounds a setting is checked against: one place, quoted in the errors and the docs.
    public static let tmaxRange = 10...10_000
    /// A response, and so a markup, larger than the host takes as a payload could not be handed over.
    public static let responseBytesRange = 1024...Int(ADORCH_PAYLOAD_MAX_BYTES)
    public static let maxBlocked = 1000

    public init(endpoint: URL) { self.endpoint = endpoint }

    /// Reads the plugin's config object; throws naming the key that is wrong and why.
    public init(config: JSONValue) throws(SettingsError) {
        guard let object = config.objectValue else { throw SettingsError(key: "config", problem: "is not a table") }
        let known: Set<String> = ["endpoint", "tmax_ms", "currency", "floor", "bcat", "badv", "app", "device", "video_mimes", "max_response_bytes"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw SettingsError(key: unknown, problem: "is not a setting of this plugin (known: \(known.sorted().joined(separator: ", ")))")
        }
        guard let endpoint = object["endpoint"] else { throw SettingsError(key: "endpoint", problem: "is required: the exchange's bid URL") }
        guard let text = endpoint.stringValue else { throw SettingsError(key: "endpoint", problem: "must be a string: the exchange's bid URL") }
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
            // Not the text itself: an endpoint may carry a user and password.
            throw SettingsError(key: "endpoint", problem: "is not an http or https URL with a host")
        }
        self.init(endpoint: url)
        if let value = object["tmax_ms"] {
            guard let ms = value.intValue, Self.tmaxRange.contains(Int(ms)) else {
                throw SettingsError(key: "tmax_ms", problem: "must be an integer from \(Self.tmaxRange.lowerBound) to \(Self.tmaxRange.upperBound)")
            }
            tmax = .milliseconds(ms)
        }
        if let value = object["currency"] {
            guard let code = value.stringValue, code.count == 3, code.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
                throw SettingsError(key: "currency", problem: "must be an ISO 4217 code such as \"USD\"")
            }
            currency = code
        }
        if let value = object["floor"] {
            guard let cpm = value.doubleValue, cpm.isFinite, cpm >= 0 else { throw SettingsError(key: "floor", problem: "must be a CPM of 0 or more") }
            floor = cpm
        }
        blockedCategories = try Self.strings(object["bcat"], key: "bcat").map(Self.category)
        blockedAdvertisers = try Self.strings(object["badv"], key: "badv").map(Self.domain)
        if let value = object["app"] { app = try AppIdentity(config: value) }
        if let value = object["device"] { device = try DeviceFacts(config: value) }
        if let value = object["video_mimes"] {
            videoTypes = try Self.strings(value, key: "video_mimes")
            guard !videoTypes.isEmpty else { throw SettingsError(key: "video_mimes", problem: "must name at least one type") }
        }
        if let value = object["max_response_bytes"] {
            guard let bytes = value.intValue, Self.responseBytesRange.contains(Int(bytes)) else {
                throw SettingsError(key: "max_response_bytes", problem: "must be from \(Self.responseBytesRange.lowerBound) to \(Self.responseBytesRange.upperBound) (the largest payload the daemon takes)")
            }
            maxResponseBytes = Int(bytes)
        }
    }

    /// A domain as `badv` and `adomain` are compared: the host alone (an exchange may send a
    /// URL), compatibility-normalised (full-width letters, other full stops), without
    /// invisible characters, percent escapes, a port, a wildcard or surrounding dots, lower case.
    public static func domain(_ text: String) -> String {
        var host = (text.removingPercentEncoding ?? text).precomposedStringWithCompatibilityMapping.lowercased()
        host = String(host.unicodeScalars.filter { !$0.properties.isWhitespace && !$0.properties.isDefaultIgnorableCodePoint && $0.properties.generalCategory != .control }
            .map { ["\u{3002}", "\u{FF61}"].contains($0) ? "." : Character($0) })
        if let scheme = host.range(of: "://") { host = String(host[scheme.upperBound...]) }
        host = String(host.prefix { $0 != "/" && $0 != "?" && $0 != "#" })
        if let at = host.lastIndex(of: "@") { host = String(host[host.index(after: at)...]) }
        if let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        if host.hasPrefix("*.") { host.removeFirst(2) }
        return host.trimmingCharacters(in: CharacterSet(charactersIn: "."))
    }

    /// An IAB category as `bcat` and `cat` are compared: upper case, compatibility-normalised,
    /// letters, digits and dashes only (an underscore is a dash), "IAB-25" as "IAB25".
    public static func category(_ text: String) -> String {
        let folded = text.precomposedStringWithCompatibilityMapping.uppercased().replacingOccurrences(of: "_", with: "-")
        var canonical = String(folded.unicodeScalars.filter { ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }.map(Character.init))
        if canonical.hasPrefix("IAB-") { canonical.remove(at: canonical.index(canonical.startIndex, offsetBy: 3)) }
        return canonical.trimmingCharacters(in: CharacterSet(charactersIn: "-"))
    }

    private static func strings(_ value: JSONValue?, key: String) throws(SettingsError) -> [String] {
        guard let value else { return [] }
        guard let items = value.arrayValue, items.count <= maxBlocked else {
            throw SettingsError(key: key, problem: "must be a list of at most \(maxBlocked) strings")
        }
        var strings: [String] = []
        for item in items {
            guard let s = item.stringValue, !s.isEmpty else { throw SettingsError(key: key, problem: "must hold only non-empty strings") }
            strings.append(s)
        }
        return strings
    }
}

/// The app the bidder sells: OpenRTB's `app` object, from the plugin's `app` table.
public struct AppIdentity: Sendable, Equatable {
    public var id = ""
    public var name = ""
    public var bundle = ""
    public var storeURL = ""
    public var version = ""
    public var publisherID = ""
    public var publisherName = ""

    public init() {}

    init(config: JSONValue) throws(SettingsError) {
        guard let object = config.objectValue else { throw SettingsError(key: "app", problem: "is not a table") }
        let fields: [(String, WritableKeyPath<AppIdentity, String>)] = [
            ("id", \.id), ("name", \.name), ("bundle", \.bundle), ("store_url", \.storeURL), ("version", \.version),
            ("publisher_id", \.publisherID), ("publisher_name", \.publisherName),
        ]
        for key in object.keys where !fields.contains(where: { $0.0 == key }) {
            throw SettingsError(key: "app.\(key)", problem: "is not a setting (known: \(fields.map(\.0).joined(separator: ", ")))")
        }
        for (key, path) in fields {
            guard let value = object[key] else { continue }
            guard let s = value.stringValue, s.utf8.count <= 512 else { throw SettingsError(key: "app.\(key)", problem: "must be a string of at most 512 bytes") }
            self[keyPath: path] = s
        }
    }
}

/// What the host tells bidders about itself (OpenRTB `device`). A Linux host has no advertising
/// id and no browser: only the OS, its version, the device type and a screen size if set.
public struct DeviceFacts: Sendable, Equatable {
    /// OpenRTB device type (AdCOM list): 2 personal computer, 3 connected TV, 7 set-top box.
    public var type = 2
    public var osVersion = DeviceFacts.kernelRelease()
    public var width = 0
    public var height = 0
    public var language = ""

    public init() {}

    init(config: JSONValue) throws(SettingsError) {
        guard let object = config.objectValue else { throw SettingsError(key: "device", problem: "is not a table") }
        for key in object.keys where !["type", "width", "height", "language"].contains(key) {
            throw SettingsError(key: "device.\(key)", problem: "is not a setting (known: type, width, height, language)")
        }
        if let value = object["type"] {
            guard let t = value.intValue, (1...8).contains(t) else { throw SettingsError(key: "device.type", problem: "must be an OpenRTB device type, 1 to 8") }
            type = Int(t)
        }
        for (key, path) in [("width", \DeviceFacts.width), ("height", \DeviceFacts.height)] {
            guard let value = object[key] else { continue }
            guard let n = value.intValue, (1...16384).contains(n) else { throw SettingsError(key: "device.\(key)", problem: "must be from 1 to 16384 pixels") }
            self[keyPath: path] = Int(n)
        }
        if let value = object["language"] {
            guard let code = value.stringValue, code.count == 2, code.allSatisfy({ $0.isASCII && $0.isLowercase }) else {
                throw SettingsError(key: "device.language", problem: "must be an ISO 639-1 code such as \"en\"")
            }
            language = code
        }
    }

    static func kernelRelease() -> String {
        var names = utsname()
        guard uname(&names) == 0 else { return "" }
        return withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    }
}

/// A setting the plugin cannot use: which, and why.
public struct SettingsError: Error, Sendable, Equatable, CustomStringConvertible {
    public var key: String
    public var problem: String
    public var description: String { "config \(key) \(problem)" }

    public init(key: String, problem: String) { (self.key, self.problem) = (key, problem) }
}
