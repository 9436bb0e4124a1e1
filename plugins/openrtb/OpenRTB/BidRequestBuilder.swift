import AdorchJSON

/// Builds the OpenRTB 2.6 BidRequest for one load: one `imp` per ad, each with the object its
/// format calls for, and what the request must say about the app, the host and the viewer's privacy.
public struct BidRequestBuilder: Sendable {
    public var settings: BidderSettings

    /// VAST versions the VAST code reads (OpenRTB `protocols`: 2.0, 3.0 and 4.x, each with wrappers).
    static let videoProtocols: [JSONValue] = [2, 3, 5, 6, 7, 8, 11, 12, 13, 14]
    /// The Native 1.2 assets asked for, by the canonical asset adorch hands an app (plugin.h, `loaded`).
    static let nativeAssets: [(id: Int64, asset: String, object: JSONValue)] = [
        (1, "headline", ["title": ["len": 90]]),
        (2, "body", ["data": ["type": 2, "len": 200]]),
        (3, "call_to_action", ["data": ["type": 12, "len": 25]]),
        (4, "icon", ["img": ["type": 1, "wmin": 50, "hmin": 50]]),
        (5, "images", ["img": ["type": 3, "wmin": 300, "hmin": 150]]),
        (6, "star_rating", ["data": ["type": 3]]),
        (7, "advertiser", ["data": ["type": 1]]),
        (8, "price", ["data": ["type": 6]]),
    ]

    public init(settings: BidderSettings) { self.settings = settings }

    /// The request, and the impressions it offered (what a bid may answer).
    public func build(_ load: BidLoad) -> (json: JSONValue, offer: Offer) {
        let floor = max(settings.floor, load.floor)
        let tmax = max(.milliseconds(1), min(settings.tmax, load.timeLeft))
        var imps: [JSONValue] = []
        var offered: [String: Set<MediaType>] = [:]
        let count = load.format == .native ? max(1, min(load.count, 10)) : 1
        for index in 1...count {
            let id = String(index)
            imps.append(imp(id: id, load: load, floor: floor))
            offered[id] = load.format.media
        }
        var request: [String: JSONValue] = [
            "id": .string(load.loadUID),
            "imp": .array(imps),
            "app": app(),
            "device": device(load.privacy),
            "source": ["tid": .string(load.loadUID)],
            "tmax": .int(Int64(tmax / .milliseconds(1))),
            "cur": [.string(settings.currency)],
            "at": 1,
        ]
        if load.testMode { request["test"] = 1 }
        if !settings.blockedCategories.isEmpty { request["bcat"] = .array(settings.blockedCategories.map { .string($0) }) }
        if !settings.blockedAdvertisers.isEmpty { request["badv"] = .array(settings.blockedAdvertisers.map { .string($0) }) }
        if let regs = regs(load.privacy) { request["regs"] = regs }
        if !load.privacy.tcString.isEmpty { request["user"] = ["consent": .string(load.privacy.tcString)] }
        return (.object(request), Offer(requestID: load.loadUID, currency: settings.currency, floor: floor, imps: offered, format: load.format, tmax: tmax))
    }

    private func imp(id: String, load: BidLoad, floor: Double) -> JSONValue {
        var imp: [String: JSONValue] = ["id": .string(id)]
        if !load.adUnit.isEmpty { imp["tagid"] = .string(load.adUnit) }
        if floor > 0 { (imp["bidfloor"], imp["bidfloorcur"]) = (.double(floor), .string(settings.currency)) }
        if load.format != .banner && load.format != .native { imp["instl"] = 1 }
        if load.format == .rewarded { imp["rwdd"] = 1 }
        let (w, h) = size(load)
        if load.format.media.contains(.video) { imp["video"] = video(load, w: w, h: h) }
        if load.format.media.contains(.banner) {
            var banner: [String: JSONValue] = [:]
            if w > 0 && h > 0 { (banner["w"], banner["h"], banner["format"]) = (.int(Int64(w)), .int(Int64(h)), [["w": .int(Int64(w)), "h": .int(Int64(h))]]) }
            imp["banner"] = .object(banner)
        }
        if load.format == .native { imp["native"] = ["request": .string(Self.nativeRequest.jsonString), "ver": "1.2"] }
        return .object(imp)
    }

    private func video(_ load: BidLoad, w: Int, h: Int) -> JSONValue {
        var video: [String: JSONValue] = [
            "mimes": .array(settings.videoTypes.map { .string($0) }),
            "protocols": .array(Self.videoProtocols),
            "linearity": 1,
            "plcmt": 3,  // interstitial: full-screen video between content
            "skip": load.format == .rewarded ? 0 : 1,
        ]
        if w > 0 && h > 0 { (video["w"], video["h"]) = (.int(Int64(w)), .int(Int64(h))) }
        return .object(video)
    }

    /// The slot's size, or for a full-screen format the screen's when the config gives one.
    private func size(_ load: BidLoad) -> (Int, Int) {
        if load.width > 0 && load.height > 0 { return (load.width, load.height) }
        guard load.format != .banner && load.format != .native else { return (0, 0) }
        return (settings.device.width, settings.device.height)
    }

    /// Native 1.2: one ad with adorch's canonical assets, only the headline required.
    static let nativeRequest: JSONValue = [
        "ver": "1.2",
        "context": 1,
        "plcmttype": 1,
        "plcmtcnt": 1,
        "assets": .array(nativeAssets.map { entry in
            var asset = entry.object.objectValue ?? [:]
            (asset["id"], asset["required"]) = (.int(entry.id), entry.asset == "headline" ? 1 : 0)
            return .object(asset)
        }),
        "eventtrackers": [["event": 1, "methods": [1]]],
    ]

    private func app() -> JSONValue {
        let a = settings.app
        var app: [String: JSONValue] = [:]
        for (key, value) in [("id", a.id), ("name", a.name), ("bundle", a.bundle), ("storeurl", a.storeURL), ("ver", a.version)] where !value.isEmpty {
            app[key] = .string(value)
        }
        var publisher: [String: JSONValue] = [:]
        if !a.publisherID.isEmpty { publisher["id"] = .string(a.publisherID) }
        if !a.publisherName.isEmpty { publisher["name"] = .string(a.publisherName) }
        if !publisher.isEmpty { app["publisher"] = .object(publisher) }
        return .object(app)
    }

    private func device(_ privacy: LoadPrivacy) -> JSONValue {
        let d = settings.device
        var device: [String: JSONValue] = ["os": "Linux", "devicetype": .int(Int64(d.type)), "lmt": privacy.limitsTracking ? 1 : 0]
        if !d.osVersion.isEmpty { device["osv"] = .string(d.osVersion) }
        if d.width > 0 && d.height > 0 { (device["w"], device["h"]) = (.int(Int64(d.width)), .int(Int64(d.height))) }
        if !d.language.isEmpty { device["language"] = .string(d.language) }
        return .object(device)
    }

    private func regs(_ privacy: LoadPrivacy) -> JSONValue? {
        var regs: [String: JSONValue] = [:]
        if let gdpr = privacy.gdpr { regs["gdpr"] = .int(Int64(gdpr)) }
        if privacy.coppa || privacy.privacyClass == .childDirected { regs["coppa"] = 1 }
        if !privacy.gpp.isEmpty { regs["gpp"] = .string(privacy.gpp) }
        if !privacy.gppSectionIDs.isEmpty { regs["gpp_sid"] = .array(privacy.gppSectionIDs.map { .int(Int64($0)) }) }
        if !privacy.usPrivacy.isEmpty { regs["us_privacy"] = .string(privacy.usPrivacy) }
        return regs.isEmpty ? nil : .object(regs)
    }
}

/// What one BidRequest offered: the bids a response may make, and the terms they must meet.
public struct Offer: Sendable, Equatable {
    public var requestID: String
    public var currency: String
    public var floor: Double
    /// Each `imp.id`, with the media its bids may carry.
    public var imps: [String: Set<MediaType>]
    public var format: BidLoad.Format
    /// The auction's time limit, as sent in `tmax`.
    public var tmax: Duration

    public init(requestID: String, currency: String, floor: Double, imps: [String: Set<MediaType>], format: BidLoad.Format, tmax: Duration = .milliseconds(500)) {
        (self.requestID, self.currency, self.floor, self.imps, self.format, self.tmax) = (requestID, currency, floor, imps, format, tmax)
    }
}
