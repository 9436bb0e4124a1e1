import AdorchJSON
import Foundation
import OpenRTB
import XCTest

/// Responses read strictly: IAB's examples taken, every refusal named, bad answers failed whole.
final class BidResponseReaderTests: XCTestCase {
    private let settings = BidRequestBuilderTests.settings()
    private var reader: BidResponseReader { BidResponseReader(settings: settings) }

    private func offer(_ format: BidLoad.Format = .interstitial, id: String = "req-1", imps: [String] = ["1"], floor: Double = 0.5) -> Offer {
        Offer(requestID: id, currency: "USD", floor: floor, imps: Dictionary(uniqueKeysWithValues: imps.map { ($0, format.media) }), format: format)
    }

    private func response(_ bids: [JSONValue], id: String = "req-1", extra: [String: JSONValue] = [:]) -> [UInt8] {
        var object: [String: JSONValue] = ["id": .string(id), "seatbid": [["seat": "seat-9", "bid": .array(bids)]]]
        for (key, value) in extra { object[key] = value }
        return Array(JSONValue.object(object).jsonData)
    }

    private func bid(_ id: String = "b1", price: JSONValue = 1.25, _ fields: [String: JSONValue] = [:]) -> JSONValue {
        var bid: [String: JSONValue] = ["id": .string(id), "impid": "1", "price": price, "adm": "<div>ad</div>", "mtype": 1]
        for (key, value) in fields { bid[key] = value == .null ? nil : value }  // null: leave the field out
        return .object(bid)
    }

    private func read(_ body: [UInt8], status: Int = 200, offer: Offer? = nil) throws -> ReadResponse {
        try reader.read(status: status, body: body, offer: offer ?? self.offer()).get()
    }

    func testIABsExampleResponsesAreTaken() throws {
        let inline = try SharedOpenRTB.data("schema/examples/bid-responses/vast-inline.json")
        let video = try read(Array(inline), offer: offer(.rewarded, id: "123", imps: ["2"], floor: 0))
        XCTAssertEqual(video.bids.count, 1)
        let taken = try XCTUnwrap(video.bids.first)
        XCTAssertEqual(taken.price, 3.0)
        XCTAssertEqual(taken.media, .video)
        XCTAssertEqual(taken.expiry, .seconds(900), "a video bid without exp keeps 900 s")
        guard case .inline(let adm) = taken.markup else { return XCTFail("inline VAST") }
        XCTAssertTrue(adm.contains("<VAST version=\"2.0\">"))

        let onWin = try SharedOpenRTB.data("schema/examples/bid-responses/ad-served-on-win.json")
        let served = try read(Array(onWin), offer: offer(.banner, id: "1234567890", imps: ["102"], floor: 0))
        let bid = try XCTUnwrap(served.bids.first)
        XCTAssertEqual(bid.markup, .onWin, "no adm: the markup comes with the win notice")
        XCTAssertEqual(bid.winURL, "http://adserver.com/winnotice?impid=102")
        XCTAssertEqual(bid.responseBidID, "abc1123")
        XCTAssertEqual(bid.seat, "512")
        XCTAssertEqual(bid.advertiserDomains, ["advertiserdomain.com"])
        XCTAssertEqual(bid.creativeID, "creative112")
        XCTAssertEqual(bid.expiry, .seconds(300), "a banner bid without exp keeps 300 s")
    }

    func testNoBidsAreNoFillsNotErrors() throws {
        XCTAssertEqual(try read([], status: 204), ReadResponse())
        XCTAssertEqual(try read(Array("  \n".utf8)), ReadResponse())
        XCTAssertEqual(try read(Array(#"{"id": "req-1", "nbr": 2}"#.utf8)), ReadResponse(noBidReason: 2))
        XCTAssertEqual(try read(response([])).bids, [])
    }

    func testEachBadBidIsRefusedByNameAndTheRestAreKept() throws {
        let bids: [JSONValue] = [
            bid("ok", price: 2),
            bid("cheap", price: 0.2, ["lurl": "http://x/loss?r=${AUCTION_LOSS}"]),
            bid("negative", price: -1),
            bid("zero", price: 0),
            bid("text", price: "1.0"),
            bid("elsewhere", ["impid": "9"]),
            bid("bare", ["adm": .null]),
            bid("blocked", ["adomain": ["ads.Blocked.example"]]),
            bid("category", ["cat": ["IAB25-3"]]),
            bid("audio", ["mtype": 3]),
            bid("domainstring", ["adomain": "blocked.example"]),
            bid("catstring", ["cat": "IAB25"]),
            bid("dotted", ["adomain": ["blocked.example."]]),
            bid("lowercat", ["cat": ["iab25"]]),
            bid("exp", ["exp": -5]),
            bid("twin"), bid("twin"),
            .object(["impid": "1", "price": 1, "adm": "x"]),
        ]
        let read = try read(response(bids))
        XCTAssertEqual(read.bids.map(\.id), ["ok"])
        let reasons = Dictionary(read.refused.map { ($0.bidID, $0.reason) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(reasons["cheap"], .belowFloor)
        XCTAssertEqual(reasons["negative"], .invalidPrice)
        XCTAssertEqual(reasons["zero"], .invalidPrice)
        XCTAssertEqual(reasons["text"], .invalidPrice)
        XCTAssertEqual(reasons["elsewhere"], .unknownImp)
        XCTAssertEqual(reasons["bare"], .noMarkup)
        XCTAssertEqual(reasons["blocked"], .blockedAdvertiser, "badv blocks the domain's subdomains, whatever their case")
        XCTAssertEqual(reasons["category"], .blockedCategory, "bcat IAB25 blocks IAB25-3")
        XCTAssertEqual(reasons["audio"], .wrongMedia)
        XCTAssertEqual(reasons["exp"], .invalidBid)
        XCTAssertEqual(reasons["domainstring"], .invalidBid, "a block list's field of the wrong type is refused, not skipped")
        XCTAssertEqual(reasons["catstring"], .invalidBid)
        XCTAssertEqual(reasons["dotted"], .blockedAdvertiser, "a trailing dot names the same domain")
        XCTAssertEqual(reasons["lowercat"], .blockedCategory, "categories compare without case")
        XCTAssertEqual(reasons[""], .invalidBid)
        XCTAssertEqual(read.refused.filter { $0.bidID == "twin" }.map(\.reason), [.duplicateID, .duplicateID], "both twins: their notices would be ambiguous")
        XCTAssertEqual(read.refused.count, bids.count - 1)
        let cheap = try XCTUnwrap(read.refused.first { $0.bidID == "cheap" })
        XCTAssertEqual(cheap.lossReason, .belowFloor)
        XCTAssertEqual(cheap.lossReason.rawValue, 100)
        XCTAssertEqual(cheap.lossURL, "http://x/loss?r=${AUCTION_LOSS}")
        XCTAssertTrue(cheap.description.contains("below_floor"), cheap.description)
    }

    func testLookalikesOfABlockedDomainOrCategoryAreBlockedToo() throws {
        let domains = ["http://blocked.example/", "blocked.example/", "blocked.example:443", " blocked.example\t", "blocked.example..",
                       "blocked%2Eexample", "\u{FF42}locked.example", "blocked\u{3002}example", "blocked\u{FF0E}example", "blocked.example\u{200B}",
                       "blocked.example\u{AD}", "https://user@ads.blocked.example:8443/x?y", "*.blocked.example", ".blocked.example"]
        let categories = ["IAB25 ", " IAB25", "IAB 25", "IAB-25", "IAB25.", "\u{FF29}AB25", "IAB25\u{200B}", "IAB25_3", "iab25-3"]
        let bids = domains.enumerated().map { bid("d\($0.offset)", ["adomain": [.string($0.element)]]) }
            + categories.enumerated().map { bid("c\($0.offset)", ["cat": [.string($0.element)]]) }
            + [bid("fine", ["adomain": ["notblocked.example"], "cat": ["IAB2"]]), bid("blank", ["adm": "  \n "])]
        let read = try read(response(bids))
        XCTAssertEqual(read.bids.map(\.id), ["fine"])
        let reasons = Dictionary(read.refused.map { ($0.bidID, $0.reason) }, uniquingKeysWith: { a, _ in a })
        for (n, domain) in domains.enumerated() { XCTAssertEqual(reasons["d\(n)"], .blockedAdvertiser, domain) }
        for (n, category) in categories.enumerated() { XCTAssertEqual(reasons["c\(n)"], .blockedCategory, category) }
        XCTAssertEqual(reasons["blank"], .noMarkup, "markup of whitespace alone is none")
    }

    func testBidsComeBestFirstWithTheirExpiry() throws {
        let read = try read(response([bid("low", price: 1), bid("high", price: 4.5, ["exp": 30]), bid("mid", price: 2, ["exp": 999_999_999])]))
        XCTAssertEqual(read.bids.map(\.id), ["high", "mid", "low"])
        XCTAssertEqual(read.bids[0].expiry, .seconds(30))
        XCTAssertEqual(read.bids[1].expiry, BidResponseReader.maxExpiry)
    }

    func testWithoutMtypeMarkupOfAMediumNotOfferedIsRefused() throws {
        let video = try read(response([bid("html", ["mtype": .null, "adm": "<div>ad</div>"]), bid("vast", ["mtype": .null, "adm": "\u{FEFF}<VAST version=\"3.0\"></VAST>"])]),
                             offer: offer(.rewarded))
        XCTAssertEqual(video.bids.map(\.id), ["vast"], "a rewarded impression offered video only")
        XCTAssertEqual(video.refused.map(\.reason), [.wrongMedia])
        let banner = try read(response([bid("vast", ["mtype": .null, "adm": "<VAST version=\"3.0\"></VAST>"]), bid("native", ["mtype": .null, "adm": "{\"native\": {}}"])]),
                              offer: offer(.banner))
        XCTAssertEqual(banner.refused.map(\.reason), [.wrongMedia, .wrongMedia])
    }

    func testWithoutMtypeTheMarkupSaysWhatItIs() throws {
        let vast = #"<?xml version="1.0"?><VAST version="4.0"></VAST>"#
        let read = try read(response([bid("v", ["mtype": .null, "adm": .string(vast)]), bid("b", ["mtype": .null, "adm": "<img src=x>"])]))
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: read.bids.map { ($0.id, $0.media) }), ["v": .video, "b": .banner])
        let native = try self.read(response([bid("n", ["mtype": .null, "adm": #"{"native": {}}"#])]), offer: offer(.native))
        XCTAssertEqual(native.bids.first?.media, .native, "one medium offered: no sniffing needed")
    }

    func testAResponseThatCannotBeUsedFailsWhole() {
        func failure(_ body: [UInt8], status: Int = 200) -> ResponseFailure.Kind? {
            if case .failure(let f) = reader.read(status: status, body: body, offer: offer()) { return f.kind }
            return nil
        }
        XCTAssertEqual(failure([], status: 500), .httpStatus)
        XCTAssertEqual(failure(Array("{\"id\": \"req-1\", \"seatbid\": [".utf8)), .malformed)
        XCTAssertEqual(failure(Array("[1, 2]".utf8)), .malformed)
        XCTAssertEqual(failure(Array(#"{"id": "req-1", "seatbid": {}}"#.utf8)), .malformed)
        XCTAssertEqual(failure(Array(#"{"id": "req-1", "seatbid": [{"seat": "s"}]}"#.utf8)), .malformed)
        XCTAssertEqual(failure(response([bid()], id: "another")), .wrongID)
        XCTAssertEqual(failure(response([bid()], extra: ["cur": "EUR"])), .wrongCurrency)
        XCTAssertNil(failure(response([bid()], extra: ["cur": "USD"])))
        var big = response([bid("b", ["adm": .string(String(repeating: "a", count: 10 << 20))])])
        XCTAssertEqual(failure(big), .tooLarge, "a 10 MB response is refused unread")
        big.removeAll()
        if case .failure(let f) = reader.read(status: 200, body: response([bid()], id: "x"), offer: offer()) {
            XCTAssertTrue(f.description.hasPrefix("wrong_response_id: "), f.description)
        }
    }

    func testABidderInAnotherCurrencyMustSayIt() throws {
        var euro = offer()
        euro.currency = "EUR"
        XCTAssertEqual(try reader.read(status: 200, body: response([bid()], extra: ["cur": "EUR"]), offer: euro).get().bids.count, 1)
        guard case .failure(let f) = reader.read(status: 200, body: response([bid()]), offer: euro) else { return XCTFail("no cur is USD") }
        XCTAssertEqual(f.kind, .wrongCurrency)
    }
}
