import Foundation

/// The OpenRTB 2.6 §4.4 substitution macros in a notice URL or in markup. A macro whose value
/// is not known is removed, as §4.4 says; text that is not one of its macros is left as written.
public struct NoticeMacros: Sendable, Equatable {
    public var auctionID: String
    public var bidID: String
    public var impID: String
    public var seatID: String
    public var adID: String
    /// The clearing price: the bid's own in a first-price auction.
    public var price: Double?
    public var currency: String
    public var loss: LossReason?
    /// When the impression happened (`${AUCTION_IMP_TS}`, ms since the epoch), for a billing notice.
    public var impressionTime: Date?
    /// Macros left as written, by name: the daemon fills them when the notice becomes due
    /// (`AUCTION_LOSS`, `AUCTION_IMP_TS`; plugin.h, "notices").
    public var kept: Set<String> = []

    public init(bid: AcceptedBid, offer: Offer, loss: LossReason? = nil, impressionTime: Date? = nil) {
        (auctionID, bidID, impID, seatID, adID) = (offer.requestID, bid.responseBidID, bid.impID, bid.seat, bid.adID)
        (price, currency, self.loss, self.impressionTime) = (loss == nil ? bid.price : nil, offer.currency, loss, impressionTime)
    }

    /// A refused bid's loss notice: the reason it was refused, no price.
    public init(refused: RefusedBid, offer: Offer) {
        (auctionID, bidID, impID, seatID, adID) = (offer.requestID, "", refused.impID, refused.seat, "")
        (price, currency, loss, impressionTime) = (nil, offer.currency, refused.lossReason, nil)
    }

    /// The value of each macro, by its name inside `${...}`. A loss notice gets no price: a
    /// loser is not told the clearing price.
    var values: [String: String] {
        [
            "AUCTION_ID": auctionID,
            "AUCTION_BID_ID": bidID,
            "AUCTION_IMP_ID": impID,
            "AUCTION_SEAT_ID": seatID,
            "AUCTION_AD_ID": adID,
            "AUCTION_PRICE": price.map(Self.decimal) ?? "",
            "AUCTION_CURRENCY": currency,
            "AUCTION_MBR": price == nil ? "" : "1",
            "AUCTION_LOSS": loss.map { String($0.rawValue) } ?? "",
            "AUCTION_MIN_TO_WIN": "",
            "AUCTION_MULTIPLIER": "",
            "AUCTION_IMP_TS": impressionTime.map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? "",
            "AUCTION_DISCOUNT_PCT": "",
            "AUCTION_DISCOUNT_CPM": "",
        ]
    }

    /// Each value percent-encoded for a URL query: ids come from the exchange and may hold anything.
    public func substitute(_ text: String) -> String {
        guard text.contains("${") else { return text }
        let values = self.values
        var out = ""
        var rest = Substring(text)
        while let open = rest.range(of: "${") {
            out += rest[..<open.lowerBound]
            guard let close = rest[open.upperBound...].firstIndex(of: "}"), !kept.contains(String(rest[open.upperBound..<close])),
                  let value = values[String(rest[open.upperBound..<close])] else {
                out += "${"
                rest = rest[open.upperBound...]
                continue
            }
            out += value.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    /// The URL a substituted notice or markup URL names: http or https only (an exchange picks
    /// these URLs; no other scheme is fetched), the characters a URL may not hold
    /// percent-encoded and its own escapes left as they are; nil when it is no such URL.
    public static func url(_ text: String) -> URL? {
        // The scheme in lower case (it is case-insensitive); a malformed escape refuses the URL
        // rather than have it encoded again.
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let scheme = text[..<colon].lowercased()
        guard ["http", "https"].contains(scheme),
              let encoded = (scheme + text[colon...]).addingPercentEncoding(withAllowedCharacters: urlCharacters),
              !Self.hasBadEscape(encoded),
              let url = URL(string: encoded), url.host?.isEmpty == false
        else { return nil }
        return url
    }

    /// A `%` not followed by two hex digits.
    static func hasBadEscape(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.indices.contains { i in
            bytes[i] == UInt8(ascii: "%") && !(i + 2 < bytes.count && bytes[i + 1].isHexDigit && bytes[i + 2].isHexDigit)
        }
    }

    /// RFC 3986's unreserved and reserved characters, and `%` for escapes already there.
    static let urlCharacters = unreserved.union(CharacterSet(charactersIn: ":/?#[]@!$&'()*+,;=%"))

    /// RFC 3986's unreserved characters: everything else in a value is percent-encoded.
    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// A price as a plain decimal: no exponent, no trailing zeros past what the bid said.
    static func decimal(_ price: Double) -> String {
        let text = String(format: "%.6f", price)
        let trimmed = text.reversed().drop(while: { $0 == "0" })
        let kept = String(trimmed.reversed())
        return kept.hasSuffix(".") ? String(kept.dropLast()) : kept
    }
}

private extension UInt8 {
    var isHexDigit: Bool { (48...57).contains(self) || (65...70).contains(self) || (97...102).contains(self) }
}
