import AdorchEngine
import AdorchPluginHost
import Foundation

/// What plugin.h asks of a loaded payload (host->loaded), as checks with reasons.
enum PayloadRules {
    /// Why `text` is not a payload the host can use, or nil if it is.
    static func problem(_ text: String, format: AdFormat, count: Int) -> String? {
        guard !text.isEmpty else { return "the payload is empty (it must be a JSON object)" }
        guard text.utf8.count <= CallbackBounds.payloadBytes else {
            return "the payload is \(text.utf8.count) bytes, over the \(CallbackBounds.payloadBytes) plugin.h allows (ADORCH_PAYLOAD_MAX_BYTES): the daemon fails such a load"
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
            return "the payload is not a JSON object: \(text.prefix(120))"
        }
        let hostKeys: [(String, (Any) -> Bool, String)] = [
            ("expires_in_s", { ($0 as? NSNumber).map { $0.doubleValue > 0 && !isBool($0) } ?? false }, "a positive number"),
            ("price", { ($0 as? NSNumber).map { !isBool($0) } ?? false }, "a number (the eCPM)"),
            ("tracks_impressions", { ($0 as? NSNumber).map(isBool) ?? false }, "true or false"),
            ("reward_by", { ["network", "host"].contains($0 as? String) }, "\"network\" or \"host\""),
        ]
        for (key, valid, expected) in hostKeys {
            if let value = object[key], !valid(value) { return "\"\(key)\" must be \(expected), is \(describe(value))" }
        }
        guard format == .native else { return nil }
        let items: [Any] = (object["ads"] as? [Any]) ?? [object]
        if items.isEmpty { return "\"ads\" is empty" }
        if items.count > count { return "\(items.count) native ads for a request of \(count)" }
        for (index, item) in items.enumerated() {
            let label = items.count > 1 || object["ads"] != nil ? "ads[\(index)]" : "the ad"
            guard let ad = item as? [String: Any] else { return "\(label) is not a JSON object" }
            if let problem = nativeProblem(ad) { return "\(label): \(problem)" }
        }
        return nil
    }

    /// The canonical native assets (plugin.h, host->loaded): headline required, the rest typed.
    private static func nativeProblem(_ ad: [String: Any]) -> String? {
        guard let headline = ad["headline"] as? String, !headline.isEmpty else { return "\"headline\" is required, a non-empty string" }
        let strings = ["body", "call_to_action", "store", "price", "advertiser"]
        for key in strings { if let v = ad[key], !(v is String) { return "\"\(key)\" must be a string, is \(describe(v))" } }
        if let v = ad["star_rating"], !((v as? NSNumber).map { !isBool($0) && (0...5).contains($0.doubleValue) } ?? false) {
            return "\"star_rating\" must be a number from 0 to 5, is \(describe(v))"
        }
        if let v = ad["has_video"], !((v as? NSNumber).map(isBool) ?? false) { return "\"has_video\" must be true or false" }
        if let v = ad["extra_assets"], !(v is [String: Any]) { return "\"extra_assets\" must be an object" }
        if let v = ad["images"] {
            guard let images = v as? [Any], images.allSatisfy(isImage) else { return "\"images\" must be an array of {\"url\": ...} objects" }
        }
        if let v = ad["icon"], !isImage(v) { return "\"icon\" must be an {\"url\": ...} object" }
        return nil
    }

    private static func isImage(_ value: Any) -> Bool { ((value as? [String: Any])?["url"] as? String).map { !$0.isEmpty } ?? false }

    /// JSONSerialization gives booleans as NSNumber too: tell them apart.
    private static func isBool(_ n: NSNumber) -> Bool { String(cString: n.objCType) == "c" }

    private static func describe(_ value: Any) -> String {
        let data = try? JSONSerialization.data(withJSONObject: [value], options: [.fragmentsAllowed])
        return data.map { String(decoding: $0, as: UTF8.self).dropFirst().dropLast().description } ?? "\(value)"
    }
}
