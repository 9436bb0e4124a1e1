import AdorchJSON

/// A bid the reader took: everything the plugin needs to show it, bill it and notify its exchange.
public struct AcceptedBid: Sendable, Equatable {
    public var id: String
    /// The response's `bidid` ("" none): what `${AUCTION_BID_ID}` stands for.
    public var responseBidID: String
    public var impID: String
    public var seat: String
    /// CPM in the offer's currency.
    public var price: Double
    public var markup: Markup
    public var media: MediaType
    public var advertiserDomains: [String]
    public var creativeID: String
    public var dealID: String
    public var adID: String
    /// How long the bid may be shown after it was received: its `exp`, or the default for its media.
    public var expiry: Duration
    /// Win, billing and loss notice URLs, their macros not yet substituted ("" none).
    public var winURL: String
    public var billingURL: String
    public var lossURL: String
}

/// A bid's markup: in the response, or to be fetched from its win notice (OpenRTB 2.6 §4.3).
public enum Markup: Sendable, Equatable {
    case inline(String)
    case onWin
}

/// A bid refused, with the reason's name (counted under it) and a human line.
public struct RefusedBid: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable, CaseIterable {
        case unknownImp = "unknown_imp"
        case invalidPrice = "invalid_price"
        case belowFloor = "below_floor"
        case noMarkup = "no_markup"
        case blockedAdvertiser = "blocked_advertiser"
        case blockedCategory = "blocked_category"
        case duplicateID = "duplicate_bid_id"
        case wrongMedia = "wrong_media_type"
        case invalidBid = "invalid_bid"
    }
    public var bidID: String
    /// The bid's `impid` and seat, as far as the response said them ("" not).
    public var impID: String
    public var seat: String
    public var reason: Reason
    public var detail: String
    /// The bid's loss notice, when it had one and the refusal has an OpenRTB loss reason.
    public var lossURL: String
    public var price: Double?
    public var description: String { "bid \(bidID.isEmpty ? "?" : bidID) refused (\(reason.rawValue)): \(detail)" }

    /// The loss reason the bid's `lurl` is told.
    public var lossReason: LossReason {
        switch reason {
        case .belowFloor: .belowFloor
        case .invalidPrice: .missingPrice
        case .noMarkup: .missingMarkup
        case .blockedAdvertiser: .advertiserExclusions
        case .blockedCategory: .categoryExclusions
        case .wrongMedia: .incorrectCreativeFormat
        case .unknownImp, .duplicateID, .invalidBid: .invalidBidResponse
        }
    }
}

/// The whole response could not be used: the exchange erred, or said something unreadable.
public struct ResponseFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case httpStatus = "http_status"
        case tooLarge = "response_too_large"
        case malformed = "malformed_response"
        case wrongID = "wrong_response_id"
        case wrongCurrency = "wrong_currency"
    }
    public var kind: Kind
    public var detail: String
    public var description: String { "\(kind.rawValue): \(detail)" }
}

/// What one response came to: its usable bids, best first, and the ones refused. No bids and
/// no refusals is a no-bid (`noBidReason` is the exchange's `nbr`, if it gave one).
public struct ReadResponse: Sendable, Equatable {
    public var bids: [AcceptedBid] = []
    public var refused: [RefusedBid] = []
    public var noBidReason: Int?

    public init(bids: [AcceptedBid] = [], refused: [RefusedBid] = [], noBidReason: Int? = nil) {
        (self.bids, self.refused, self.noBidReason) = (bids, refused, noBidReason)
    }
}

/// Reads a BidResponse strictly against the Offer it answers (OpenRTB 2.6 §4.2, §3.2.22).
public struct BidResponseReader: Sendable {
    /// How long a bid without `exp` may wait to be shown, by media: Prebid's cache defaults.
    public static let defaultExpiry: [MediaType: Duration] = [.banner: .seconds(300), .video: .seconds(900), .audio: .seconds(900), .native: .seconds(300)]
    /// A bid's `exp` is capped here: a day, well past any slot's ttl.
    public static let maxExpiry: Duration = .seconds(86_400)

    public var maxBytes: Int
    public var blockedAdvertisers: [String]
    public var blockedCategories: Set<String>

    public init(settings: BidderSettings) {
        (maxBytes, blockedAdvertisers, blockedCategories) = (settings.maxResponseBytes, settings.blockedAdvertisers, Set(settings.blockedCategories))
    }

    public func read(status: Int, body: [UInt8], offer: Offer) -> Result<ReadResponse, ResponseFailure> {
        if status == 204 { return .success(ReadResponse()) }
        guard status == 200 else { return .failure(ResponseFailure(kind: .httpStatus, detail: "the exchange answered HTTP \(status)")) }
        guard body.count <= maxBytes else {
            return .failure(ResponseFailure(kind: .tooLarge, detail: "\(body.count) bytes, more than the \(maxBytes) taken"))
        }
        // An empty 200 is how some exchanges say no-bid.
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return .success(ReadResponse()) }
        let parsed: JSONValue
        do { parsed = try body.withUnsafeBytes { bytes throws(JSONParseError) in try JSONValue.parse(bytes: bytes) } } catch {
            return .failure(ResponseFailure(kind: .malformed, detail: "not JSON: \(error)"))
        }
        guard let response = parsed.objectValue else { return .failure(ResponseFailure(kind: .malformed, detail: "not a JSON object")) }
        guard let id = response["id"]?.stringValue else { return .failure(ResponseFailure(kind: .malformed, detail: "no string id")) }
        guard id == offer.requestID else {
            return .failure(ResponseFailure(kind: .wrongID, detail: "id \"\(Self.clip(id))\" answers another request than \"\(offer.requestID)\""))
        }
        if let cur = response["cur"] {
            guard let code = cur.stringValue else { return .failure(ResponseFailure(kind: .malformed, detail: "cur is not a string")) }
            guard code == offer.currency else {
                return .failure(ResponseFailure(kind: .wrongCurrency, detail: "bids in \(Self.clip(code)), asked in \(offer.currency)"))
            }
        } else if offer.currency != "USD" {
            return .failure(ResponseFailure(kind: .wrongCurrency, detail: "no cur, so USD, asked in \(offer.currency)"))
        }
        var result = ReadResponse(noBidReason: response["nbr"]?.intValue.map(Int.init))
        guard let seatbids = response["seatbid"] else { return .success(result) }
        guard let seats = seatbids.arrayValue else { return .failure(ResponseFailure(kind: .malformed, detail: "seatbid is not an array")) }
        if let bidid = response["bidid"], bidid.stringValue == nil { return .failure(ResponseFailure(kind: .malformed, detail: "bidid is not a string")) }
        let responseBidID = response["bidid"]?.stringValue ?? ""
        var candidates: [(bid: [String: JSONValue], seat: String)] = []
        for seat in seats {
            guard let object = seat.objectValue, let bids = object["bid"]?.arrayValue else {
                return .failure(ResponseFailure(kind: .malformed, detail: "a seatbid without a bid array"))
            }
            let name = object["seat"]?.stringValue ?? ""
            for bid in bids {
                guard let bid = bid.objectValue else { return .failure(ResponseFailure(kind: .malformed, detail: "a bid that is not an object")) }
                candidates.append((bid, name))
            }
        }
        // A bid id twice makes its notices ambiguous: every bid sharing it is refused.
        var seen: [String: Int] = [:]
        for (bid, _) in candidates { if let id = bid["id"]?.stringValue { seen[id, default: 0] += 1 } }
        for (bid, seat) in candidates {
            switch accept(bid, seat: seat, offer: offer, duplicated: (bid["id"]?.stringValue).map { seen[$0, default: 0] > 1 } ?? false) {
            case .success(var accepted):
                accepted.responseBidID = responseBidID
                result.bids.append(accepted)
            case .failure(let refused): result.refused.append(refused)
            }
        }
        result.bids.sort { $0.price > $1.price }
        return .success(result)
    }

    private func accept(_ bid: [String: JSONValue], seat: String, offer: Offer, duplicated: Bool) -> Result<AcceptedBid, RefusedBid> {
        let id = bid["id"]?.stringValue ?? ""
        let lossURL = bid["lurl"]?.stringValue ?? ""
        let price = bid["price"]?.doubleValue
        func refuse(_ reason: RefusedBid.Reason, _ detail: String) -> Result<AcceptedBid, RefusedBid> {
            .failure(RefusedBid(bidID: id, impID: bid["impid"]?.stringValue ?? "", seat: seat, reason: reason, detail: detail, lossURL: lossURL, price: price))
        }
        guard !id.isEmpty else { return refuse(.invalidBid, "no bid id") }
        guard !duplicated else { return refuse(.duplicateID, "another bid in the response has the id \"\(Self.clip(id))\"") }
        guard let impID = bid["impid"]?.stringValue, let media = offer.imps[impID] else {
            return refuse(.unknownImp, "impid \(Self.clip(bid["impid"]?.description ?? "missing")) was not offered")
        }
        guard let price, price.isFinite, price > 0 else { return refuse(.invalidPrice, "price \(Self.clip(bid["price"]?.description ?? "missing")) is not a positive number") }
        guard price >= offer.floor else { return refuse(.belowFloor, "price \(price) is below the floor \(offer.floor)") }
        for key in ["nurl", "burl", "lurl", "adm", "crid", "dealid", "adid", "cid"] where bid[key] != nil && bid[key]?.stringValue == nil {
            return refuse(.invalidBid, "\(key) is not a string")
        }
        // A block list is only as good as the fields it reads: a wrong type is refused, not skipped.
        guard let domainList = Self.strings(bid["adomain"]) else { return refuse(.invalidBid, "adomain is not a list of strings") }
        guard let categoryList = Self.strings(bid["cat"]) else { return refuse(.invalidBid, "cat is not a list of strings") }
        let domains = domainList.map(BidderSettings.domain)
        if let blocked = domains.first(where: isBlocked) { return refuse(.blockedAdvertiser, "advertiser \(Self.clip(blocked)) is blocked (badv)") }
        let categories = categoryList.map(BidderSettings.category)
        if let blocked = categories.first(where: { category in blockedCategories.contains { category == $0 || category.hasPrefix($0 + "-") } }) {
            return refuse(.blockedCategory, "category \(Self.clip(blocked)) is blocked (bcat)")
        }
        let winURL = bid["nurl"]?.stringValue ?? ""
        let markup: Markup
        if let adm = bid["adm"]?.stringValue, !adm.allSatisfy(\.isWhitespace) {
            markup = .inline(adm)
        } else if !winURL.isEmpty {
            markup = .onWin
        } else {
            return refuse(.noMarkup, "neither adm nor a nurl to fetch it from")
        }
        // Without mtype the markup says what it is; markup fetched on win is taken as the
        // impression's only medium, and refused where it offered several.
        let kind: MediaType
        if let mtype = bid["mtype"] {
            guard let n = mtype.intValue, let declared = MediaType(rawValue: Int(n)) else { return refuse(.invalidBid, "mtype is not 1 to 4") }
            kind = declared
        } else if case .inline(let adm) = markup {
            kind = Self.sniff(adm)
        } else if media.count == 1, let only = media.first {
            kind = only
        } else {
            return refuse(.wrongMedia, "no mtype, and the impression offered \(media.count) media")
        }
        guard media.contains(kind) else { return refuse(.wrongMedia, "mtype \(kind.rawValue) was not offered for imp \(impID)") }
        var expiry = Self.defaultExpiry[kind] ?? .seconds(300)
        if let exp = bid["exp"] {
            guard let seconds = exp.intValue, seconds > 0 else { return refuse(.invalidBid, "exp is not a positive number of seconds") }
            expiry = min(.seconds(seconds), Self.maxExpiry)
        }
        return .success(AcceptedBid(
            id: id, responseBidID: "", impID: impID, seat: seat, price: price, markup: markup, media: kind, advertiserDomains: domains,
            creativeID: bid["crid"]?.stringValue ?? "", dealID: bid["dealid"]?.stringValue ?? "", adID: bid["adid"]?.stringValue ?? "",
            expiry: expiry, winURL: winURL, billingURL: bid["burl"]?.stringValue ?? "", lossURL: lossURL))
    }

    /// An absent list is empty; anything but a list of strings is nil.
    static func strings(_ value: JSONValue?) -> [String]? {
        guard let value else { return [] }
        guard let items = value.arrayValue else { return nil }
        let strings = items.compactMap(\.stringValue)
        return strings.count == items.count ? strings : nil
    }

    /// A blocked domain blocks its subdomains too (`badv` "example.com" blocks "ads.example.com").
    private func isBlocked(_ domain: String) -> Bool {
        blockedAdvertisers.contains { domain == $0 || domain.hasSuffix("." + $0) }
    }

    /// Markup without `mtype` on an impression offering several media: VAST is video, a JSON object native.
    static func sniff(_ adm: String) -> MediaType {
        let head = adm.drop(while: { $0.isWhitespace || $0 == "\u{FEFF}" }).prefix(512)
        if head.hasPrefix("{") { return .native }
        if head.hasPrefix("<VAST") || ((head.hasPrefix("<?xml") || head.hasPrefix("<!--")) && head.contains("<VAST")) { return .video }
        return .banner
    }

    /// An exchange's text in an error, cut short: a log line stays a line.
    static func clip(_ text: String) -> String { text.count <= 64 ? text : String(text.prefix(64)) + "…" }
}
