import Foundation
import AdorchJSON

/// A Native 1.2 response (a native bid's `adm`) turned into the canonical assets adorch hands
/// an app (plugin.h, `loaded`): the assets are matched by the ids the request gave them.
public struct NativeMarkup: Sendable, Equatable {
    /// The canonical asset name → its value (a string, a number, or an image object).
    public var assets: [String: JSONValue]
    public var clickURL: String
    public var clickTrackers: [String]
    /// Impression trackers: `imptrackers` and the image-pixel `eventtrackers` of event 1.
    public var impressionTrackers: [String]

    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var detail: String
        public var description: String { "native markup: \(detail)" }
    }

    public init(adm: String) throws(Problem) {
        guard let parsed = JSONValue.parse(Data(adm.utf8)) else { throw Problem(detail: "not JSON") }
        // Native 1.0 wraps the response in "native"; 1.1 and later do not.
        guard let response = (parsed["native"] ?? parsed).objectValue else { throw Problem(detail: "not a JSON object") }
        let byID = Dictionary(BidRequestBuilder.nativeAssets.map { ($0.id, $0.asset) }, uniquingKeysWith: { a, _ in a })
        var assets: [String: JSONValue] = [:]
        for asset in response["assets"]?.arrayValue ?? [] {
            guard let id = asset["id"]?.intValue, let name = byID[id] else { continue }
            if let text = asset["title"]?["text"]?.stringValue {
                assets[name] = .string(text)
            } else if let image = asset["img"], let url = image["url"]?.stringValue {
                var object: [String: JSONValue] = ["url": .string(url)]
                if let w = image["w"]?.intValue { object["width"] = .int(w) }
                if let h = image["h"]?.intValue { object["height"] = .int(h) }
                // The app's "images" is a list; "icon" is one image.
                assets[name] = name == "images" ? .array([.object(object)]) : .object(object)
            } else if let value = asset["data"]?["value"]?.stringValue {
                assets[name] = name == "star_rating" ? (Double(value).map { .double($0) } ?? .string(value)) : .string(value)
            }
        }
        guard assets["headline"]?.stringValue?.isEmpty == false else { throw Problem(detail: "no headline (asset 1's title), the one asset required") }
        guard let link = response["link"]?["url"]?.stringValue, !link.isEmpty else { throw Problem(detail: "no link.url") }
        self.assets = assets
        self.clickURL = link
        self.clickTrackers = (response["link"]?["clicktrackers"]?.arrayValue ?? []).compactMap(\.stringValue)
        let pixels = (response["eventtrackers"]?.arrayValue ?? []).filter { $0["event"]?.intValue == 1 && $0["method"]?.intValue == 1 }
        self.impressionTrackers = (response["imptrackers"]?.arrayValue ?? []).compactMap(\.stringValue) + pixels.compactMap { $0["url"]?.stringValue }
    }
}
