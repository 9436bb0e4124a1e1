import Foundation
import OpenRTB
import XCTest

/// §4.4's macros: each substituted, unknown values removed, other text untouched.
final class NoticeMacrosTests: XCTestCase {
    private func accepted() throws -> (AcceptedBid, Offer) {
        let offer = Offer(requestID: "auction-1", currency: "USD", floor: 0, imps: ["1": [.banner]], format: .banner)
        let body = #"{"id": "auction-1", "bidid": "resp 7", "seatbid": [{"seat": "seat/9", "bid": [{"id": "b1", "impid": "1", "price": 2.5, "adid": "ad-3", "adm": "x", "nurl": "n"}]}]}"#
        let bid = try XCTUnwrap(try BidResponseReader(settings: BidderSettings(endpoint: URL(string: "http://127.0.0.1/")!))
            .read(status: 200, body: Array(body.utf8), offer: offer).get().bids.first)
        return (bid, offer)
    }

    func testAWinNoticeGetsEveryMacroItKnows() throws {
        let (bid, offer) = try accepted()
        let url = "http://x/win?a=${AUCTION_ID}&b=${AUCTION_BID_ID}&i=${AUCTION_IMP_ID}&s=${AUCTION_SEAT_ID}&ad=${AUCTION_AD_ID}"
            + "&p=${AUCTION_PRICE}&c=${AUCTION_CURRENCY}&m=${AUCTION_MBR}&l=${AUCTION_LOSS}&w=${AUCTION_MIN_TO_WIN}&ts=${AUCTION_IMP_TS}"
        XCTAssertEqual(NoticeMacros(bid: bid, offer: offer).substitute(url),
                       "http://x/win?a=auction-1&b=resp%207&i=1&s=seat%2F9&ad=ad-3&p=2.5&c=USD&m=1&l=&w=&ts=")
        let billed = NoticeMacros(bid: bid, offer: offer, impressionTime: Date(timeIntervalSince1970: 1_700_000_000.123))
        XCTAssertEqual(billed.substitute("ts=${AUCTION_IMP_TS}"), "ts=1700000000123")
    }

    func testALossNoticeSaysWhyAndNotThePrice() throws {
        let (bid, offer) = try accepted()
        let macros = NoticeMacros(bid: bid, offer: offer, loss: .lostToHigherBid)
        XCTAssertEqual(macros.substitute("http://x/loss?r=${AUCTION_LOSS}&p=${AUCTION_PRICE}"), "http://x/loss?r=102&p=")
        XCTAssertEqual(NoticeMacros(bid: bid, offer: offer, loss: .expired).substitute("${AUCTION_LOSS}"), "2")
    }

    func testTextThatIsNotAMacroIsLeftAsWritten() throws {
        let (bid, offer) = try accepted()
        let macros = NoticeMacros(bid: bid, offer: offer)
        XCTAssertEqual(macros.substitute("http://x/?q=${UNKNOWN}&r=${AUCTION_ID"), "http://x/?q=${UNKNOWN}&r=${AUCTION_ID")
        XCTAssertEqual(macros.substitute("$${AUCTION_PRICE}}"), "$2.5}")
        XCTAssertEqual(macros.substitute("plain"), "plain")
    }

    func testANoticeURLIsHTTPWithItsOwnEscapesKept() {
        XCTAssertEqual(NoticeMacros.url("http://x/n?x=${FOO}&u=a%2Fb&p=a|b")?.absoluteString, "http://x/n?x=$%7BFOO%7D&u=a%2Fb&p=a%7Cb",
                       "what a URL may not hold is encoded once, escapes already there are kept")
        XCTAssertEqual(NoticeMacros.url("https://x/n?b=x%20y")?.absoluteString, "https://x/n?b=x%20y")
        XCTAssertEqual(NoticeMacros.url("HTTP://x/n")?.absoluteString, "http://x/n", "a scheme is case-insensitive")
        XCTAssertNil(NoticeMacros.url("http://x/n?a=%41&b=%zz"), "a malformed escape refuses the URL rather than have its escapes encoded again")
        for refused in ["ftp://127.0.0.1/m", "file:///etc/passwd", "data:text/html,<b>x</b>", "gopher://x/", "http:///nohost", "not a url at all"] {
            XCTAssertNil(NoticeMacros.url(refused), refused)
        }
    }

    func testPricesArePlainDecimals() throws {
        var (bid, offer) = try accepted()
        for (price, text) in [(3.0, "3"), (0.000001, "0.000001"), (1234567.5, "1234567.5"), (1.10, "1.1")] {
            bid.price = price
            XCTAssertEqual(NoticeMacros(bid: bid, offer: offer).substitute("${AUCTION_PRICE}"), text)
        }
    }
}
