import Foundation

/// VAST macros in tag, tracking and error URLs: [NAME] replaced by its value, each value
/// percent-encoded on its own (so a value can never add a parameter to the URL). Unknown
/// macros are left as they are, as VAST 4 asks.
public struct Macros: Sendable {
    public var values: [String: String]

    public init(_ values: [String: String] = [:]) { self.values = values }

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
