import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// One VAST response (2.0, 3.0, 4.x), reduced to what a player of linear video ads needs.
public struct VASTResponse: Sendable, Equatable {
    public var version: String
    /// The ads in document order; an empty list is VAST's "no ad".
    public var ads: [VASTAd]
    /// <Error> at the root: what a no-ad response asks to be told.
    public var errorURLs: [String]
}

/// One <Ad>: an inline ad, or a wrapper pointing at the next VAST document.
public struct VASTAd: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case inline(InlineAd)
        case wrapper(Wrapper)
    }

    public var id: String
    public var kind: Kind
    /// What every ad in a chain carries: its own error, impression and event URLs.
    public var tracking: Tracking
}

/// The wrapper's pointer and its two rules (VAST 3.0 and later).
public struct Wrapper: Sendable, Equatable {
    public var tagURI: String
    /// false: the next document must be an inline ad, not one more wrapper.
    public var followAdditionalWrappers: Bool
    /// true: when the chain below gives no ad, another ad of this response may be used.
    public var fallbackOnNoAd: Bool
}

/// Error, impression, click and event URLs; merged over a whole wrapper chain.
public struct Tracking: Sendable, Equatable {
    public var errors: [String] = []
    public var impressions: [String] = []
    public var clickTracking: [String] = []
    /// By VAST event name: start, firstQuartile, midpoint, thirdQuartile, complete, skip,
    /// close (and closeLinear), creativeView, notUsed, ...
    public var events: [String: [String]] = [:]

    public init() {}

    public mutating func merge(_ other: Tracking) {
        errors += other.errors
        impressions += other.impressions
        clickTracking += other.clickTracking
        for (event, urls) in other.events { events[event, default: []] += urls }
    }
}

public struct InlineAd: Sendable, Equatable {
    public var adSystem: String
    public var title: String
    /// The linear creative's duration in seconds; nil if the ad has no linear creative.
    public var duration: Double?
    /// As written (HH:MM:SS[.mmm] or n%), and in seconds when it can be resolved.
    public var skipOffset: String?
    public var skipOffsetSeconds: Double?
    public var mediaFiles: [MediaFile]
    public var clickThrough: String?
    public var companions: [Companion]
    /// VAST 4.3 <Expires>: seconds a prefetched ad may still be played.
    public var expires: Int?
    public var creativeID: String?
    public var universalAdID: String?
}

public struct MediaFile: Sendable, Equatable {
    public var url: String
    public var type: String
    public var delivery: String
    public var width: Int
    public var height: Int
    /// kbit/s; for adaptive files the range's middle when only min and max are given.
    public var bitrate: Int?
    public var minBitrate: Int?
    public var maxBitrate: Int?
    public var apiFramework: String?
    public var codec: String?
}

public struct Companion: Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// "static", "iframe" or "html"
    public var resourceType: String
    public var resource: String
    public var creativeType: String?
    public var clickThrough: String?
}

/// Why a VAST document could not be used, with the VAST error code a player reports.
public struct VASTError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: Int
    public var message: String

    public init(_ code: Int, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "VAST error \(code): \(message)" }
}

extension VASTResponse {
    /// Parses a VAST document. Not XML, or not VAST, is error 100.
    public static func parse(_ data: Data) throws(VASTError) -> VASTResponse {
        // One XMLParser pass builds the tree. (FoundationXML's XMLDocument leaked about 28 KB
        // per document on Linux: 3,000 parses, +83 MB; and it recovers from some broken
        // documents, which a player must not.)
        let parser = XMLParser(data: data)
        let builder = TreeBuilder()
        parser.delegate = builder
        guard parser.parse(), builder.roots.count == 1, builder.open.isEmpty else {
            throw VASTError(100, "XML parsing error: \(parser.parserError.map { "\($0.localizedDescription)" } ?? "not well-formed (unclosed elements)") at line \(parser.lineNumber)")
        }
        let root = builder.roots[0]
        guard root.bareName == "VAST" else {
            throw VASTError(100, "XML parsing error: the root element is not <VAST>")
        }
        let version = root.attr("version") ?? ""
        guard version.isEmpty || ["2", "3", "4"].contains(String(version.prefix(1))) else {
            throw VASTError(102, "VAST version \(version) not supported")
        }
        var ads: [VASTAd] = []
        for ad in root.children(named: "Ad") {
            let id = ad.attr("id") ?? ""
            if let inline = ad.child("InLine") {
                ads.append(VASTAd(id: id, kind: .inline(try parseInline(inline)), tracking: tracking(of: inline)))
            } else if let wrapper = ad.child("Wrapper") {
                guard let uri = wrapper.child("VASTAdTagURI")?.text, !uri.isEmpty else {
                    throw VASTError(101, "VAST schema validation error: a Wrapper without VASTAdTagURI")
                }
                ads.append(VASTAd(id: id, kind: .wrapper(Wrapper(
                    tagURI: uri,
                    followAdditionalWrappers: wrapper.boolAttribute("followAdditionalWrappers") ?? true,
                    fallbackOnNoAd: wrapper.boolAttribute("fallbackOnNoAd") ?? true
                )), tracking: tracking(of: wrapper)))
            } else {
                throw VASTError(101, "VAST schema validation error: an Ad without InLine or Wrapper")
            }
        }
        return VASTResponse(version: version, ads: ads, errorURLs: root.children(named: "Error").compactMap(\.nonEmptyText))
    }

    private static func tracking(of ad: Element) -> Tracking {
        var t = Tracking()
        t.errors = ad.children(named: "Error").compactMap(\.nonEmptyText)
        t.impressions = ad.children(named: "Impression").compactMap(\.nonEmptyText)
        for creative in ad.child("Creatives")?.children(named: "Creative") ?? [] {
            for linear in creative.children(named: "Linear") {
                for tracking in linear.child("TrackingEvents")?.children(named: "Tracking") ?? [] {
                    guard let event = tracking.attr("event"), let url = tracking.nonEmptyText else { continue }
                    t.events[event == "closeLinear" ? "close" : event, default: []].append(url)
                }
                t.clickTracking += linear.child("VideoClicks")?.children(named: "ClickTracking").compactMap(\.nonEmptyText) ?? []
            }
        }
        // Some servers put notUsed and the like at the ad's level: read them there too.
        for tracking in ad.child("TrackingEvents")?.children(named: "Tracking") ?? [] {
            guard let event = tracking.attr("event"), let url = tracking.nonEmptyText else { continue }
            t.events[event, default: []].append(url)
        }
        return t
    }

    private static func parseInline(_ inline: Element) throws(VASTError) -> InlineAd {
        var ad = InlineAd(adSystem: inline.child("AdSystem")?.text ?? "", title: inline.child("AdTitle")?.text ?? "",
                          mediaFiles: [], companions: [])
        if let expires = inline.child("Expires")?.text {
            guard let seconds = Int(expires), seconds >= 0 else { throw VASTError(101, "VAST schema validation error: <Expires> is not a number of seconds: \(expires)") }
            ad.expires = seconds
        }
        for creative in inline.child("Creatives")?.children(named: "Creative") ?? [] {
            if let linear = creative.child("Linear"), ad.duration == nil {
                ad.creativeID = creative.attr("id")
                ad.universalAdID = creative.child("UniversalAdId")?.text
                if let text = linear.child("Duration")?.text {
                    guard let duration = parseTime(text) else { throw VASTError(101, "VAST schema validation error: bad <Duration> \(text)") }
                    ad.duration = duration
                } else {
                    throw VASTError(101, "VAST schema validation error: a Linear creative without <Duration>")
                }
                if let offset = linear.attr("skipoffset") {
                    ad.skipOffset = offset
                    if offset.hasSuffix("%"), let share = Double(offset.dropLast()) {
                        ad.skipOffsetSeconds = ad.duration! * share / 100
                    } else {
                        ad.skipOffsetSeconds = parseTime(offset)
                    }
                }
                for file in linear.child("MediaFiles")?.children(named: "MediaFile") ?? [] {
                    guard let url = file.nonEmptyText else { continue }
                    let min = file.intAttribute("minBitrate"), max = file.intAttribute("maxBitrate")
                    ad.mediaFiles.append(MediaFile(
                        url: url, type: file.attr("type") ?? "",
                        delivery: file.attr("delivery") ?? "progressive",
                        width: file.intAttribute("width") ?? 0, height: file.intAttribute("height") ?? 0,
                        bitrate: file.intAttribute("bitrate") ?? (min != nil && max != nil ? (min! + max!) / 2 : nil),
                        minBitrate: min, maxBitrate: max,
                        apiFramework: file.attr("apiFramework"), codec: file.attr("codec")
                    ))
                }
                ad.clickThrough = linear.child("VideoClicks")?.child("ClickThrough")?.nonEmptyText
            }
            for companion in creative.child("CompanionAds")?.children(named: "Companion") ?? [] {
                let resources: [(String, String)] = [("StaticResource", "static"), ("IFrameResource", "iframe"), ("HTMLResource", "html")]
                guard let (element, kind) = resources.lazy.compactMap({ name, kind in companion.child(name).map { ($0, kind) } }).first,
                      let resource = element.nonEmptyText else { continue }
                ad.companions.append(Companion(
                    width: companion.intAttribute("width") ?? 0, height: companion.intAttribute("height") ?? 0,
                    resourceType: kind, resource: resource, creativeType: element.attr("creativeType"),
                    clickThrough: companion.child("CompanionClickThrough")?.nonEmptyText
                ))
            }
        }
        return ad
    }

    /// HH:MM:SS or HH:MM:SS.mmm, in seconds.
    public static func parseTime(_ text: String) -> Double? {
        let parts = text.split(separator: ":")
        guard parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let s = Double(parts[2]),
              h >= 0, (0..<60).contains(m), s >= 0, s < 60 else { return nil }
        return h * 3600 + m * 60 + s
    }
}

/// Builds the element tree from XMLParser's events, and sees a document cut short: one
/// that leaves elements open, which the parser alone does not always report.
private final class TreeBuilder: NSObject, XMLParserDelegate {
    var roots: [Element] = []
    var open: [Element] = []

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        let element = Element(name: elementName, attributes: attributes)
        if let parent = open.last { parent.children.append(element) } else { roots.append(element) }
        open.append(element)
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        _ = open.popLast()
    }

    // An element's string value is all the text inside it, its descendants' included.
    func parser(_ parser: XMLParser, foundCharacters string: String) {
        for element in open { element.stringValue += string }
    }

    func parser(_ parser: XMLParser, foundCDATA block: Data) {
        let text = String(decoding: block, as: UTF8.self)
        for element in open { element.stringValue += text }
    }
}

/// One element of a VAST document.
fileprivate final class Element {
    let name: String
    let attributes: [String: String]
    var children: [Element] = []
    var stringValue = ""

    init(name: String, attributes: [String: String]) {
        self.name = name
        self.attributes = attributes
    }

    /// The name without a namespace prefix: VAST documents come with and without one.
    fileprivate var bareName: String { String(name.split(separator: ":").last ?? "") }

    fileprivate func children(named name: String) -> [Element] { children.filter { $0.bareName == name } }

    fileprivate func child(_ name: String) -> Element? { children.first { $0.bareName == name } }

    /// The text content, CDATA included, trimmed.
    fileprivate var text: String { stringValue.trimmingCharacters(in: .whitespacesAndNewlines) }

    fileprivate var nonEmptyText: String? { text.isEmpty ? nil : text }

    fileprivate func attr(_ name: String) -> String? { attributes[name] }

    fileprivate func intAttribute(_ name: String) -> Int? {
        attr(name).flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }

    fileprivate func boolAttribute(_ name: String) -> Bool? {
        switch attr(name)?.lowercased() {
        case "true", "1": true
        case "false", "0": false
        default: nil
        }
    }
}
