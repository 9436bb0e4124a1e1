import AdorchJSON
import Foundation
import OpenRTB
import XCTest

/// The BidRequest for each format: the objects OpenRTB 2.6 asks for, and nothing a Linux host does not know.
final class BidRequestBuilderTests: XCTestCase {
    static let uid = "0123456789abcdef0123456789abcdef"

    static func settings() -> BidderSettings {
        var s = BidderSettings(endpoint: URL(string: "http://127.0.0.1:9/bid")!)
        s.app.bundle = "org.example.game"
        s.app.name = "Example Game"
        s.app.storeURL = "https://store.example.org/game"
        s.app.publisherID = "pub-1"
        s.floor = 0.5
        s.blockedCategories = ["IAB25"]
        s.blockedAdvertisers = ["blocked.example"]
        return s
    }

    private func build(_ format: BidLoad.Format, _ change: (inout BidLoad) -> Void = { _ in }) -> (JSONValue, Offer) {
        var load = BidLoad(format: format, loadUID: Self.uid, slot: "s", adUnit: "unit-7", width: format == .banner ? 320 : 0, height: format == .banner ? 50 : 0)
        change(&load)
        let (json, offer) = BidRequestBuilder(settings: Self.settings()).build(load)
        return (json, offer)
    }

    func testEachFormatOffersTheObjectItsImpressionNeeds() {
        let expected: [BidLoad.Format: (video: Bool, banner: Bool, native: Bool, instl: Bool, rwdd: Bool)] = [
            .rewarded: (true, false, false, true, true),
            .fullscreen: (true, false, false, true, false),
            .interstitial: (true, true, false, true, false),
            .splash: (false, true, false, true, false),
            .banner: (false, true, false, false, false),
            .native: (false, false, true, false, false),
        ]
        XCTAssertEqual(Set(expected.keys), Set(BidLoad.Format.allCases))
        for (format, want) in expected {
            let (json, offer) = build(format)
            let imp = json["imp"]?.arrayValue?.first
            XCTAssertEqual(imp?["video"] != nil, want.video, "\(format) video")
            XCTAssertEqual(imp?["banner"] != nil, want.banner, "\(format) banner")
            XCTAssertEqual(imp?["native"] != nil, want.native, "\(format) native")
            XCTAssertEqual(imp?["instl"]?.intValue == 1, want.instl, "\(format) instl")
            XCTAssertEqual(imp?["rwdd"]?.intValue == 1, want.rwdd, "\(format) rwdd")
            XCTAssertEqual(imp?["tagid"]?.stringValue, "unit-7")
            XCTAssertEqual(imp?["bidfloor"]?.doubleValue, 0.5)
            XCTAssertEqual(imp?["bidfloorcur"]?.stringValue, "USD")
            XCTAssertEqual(offer.imps["1"], format.media)
        }
        let (rewarded, _) = build(.rewarded)
        let video = rewarded["imp"]?.arrayValue?.first?["video"]
        XCTAssertEqual(video?["mimes"], ["video/mp4", "video/webm"])
        XCTAssertEqual(video?["skip"]?.intValue, 0, "a rewarded video is watched to its end")
        XCTAssertEqual(build(.fullscreen).0["imp"]?.arrayValue?.first?["video"]?["skip"]?.intValue, 1)
        let banner = build(.banner).0["imp"]?.arrayValue?.first?["banner"]
        XCTAssertEqual(banner?["w"]?.intValue, 320)
        XCTAssertEqual(banner?["format"], [["w": 320, "h": 50]])
    }

    func testTheRequestCarriesItsIdentityTimeLimitCurrencyAndBlocks() {
        let (json, offer) = build(.interstitial) { $0.timeLeft = .milliseconds(120); $0.testMode = true }
        XCTAssertEqual(json["id"]?.stringValue, Self.uid)
        XCTAssertEqual(json["source"]?["tid"]?.stringValue, Self.uid)
        XCTAssertEqual(json["tmax"]?.intValue, 120, "the load's deadline is sooner than the bidder's tmax")
        XCTAssertEqual(build(.interstitial).0["tmax"]?.intValue, 500)
        XCTAssertEqual(json["cur"], ["USD"])
        XCTAssertEqual(json["test"]?.intValue, 1)
        XCTAssertNil(build(.interstitial).0["test"])
        XCTAssertEqual(json["bcat"], ["IAB25"])
        XCTAssertEqual(json["badv"], ["blocked.example"])
        XCTAssertEqual(json["app"]?["bundle"]?.stringValue, "org.example.game")
        XCTAssertEqual(json["app"]?["storeurl"]?.stringValue, "https://store.example.org/game")
        XCTAssertEqual(json["app"]?["publisher"]?["id"]?.stringValue, "pub-1")
        XCTAssertEqual(json["device"]?["os"]?.stringValue, "Linux")
        XCTAssertNil(json["device"]?["ifa"], "a Linux host has no advertising id")
        XCTAssertNil(json["user"], "no consent string, no user object")
        XCTAssertEqual(offer.requestID, Self.uid)
        XCTAssertEqual(build(.banner) { $0.floor = 2 }.1.floor, 2, "an entry's floor over the bidder's")
    }

    func testPrivacySignalsGoInTheTwoSixFields() {
        let (json, _) = build(.rewarded) {
            $0.privacy.gdpr = 1
            $0.privacy.tcString = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA"
            $0.privacy.gpp = "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA"
            $0.privacy.gppSectionIDs = [2]
            $0.privacy.usPrivacy = "1YNN"
            $0.privacy.privacyClass = .nonPersonalized
        }
        XCTAssertEqual(json["regs"]?["gdpr"]?.intValue, 1)
        XCTAssertEqual(json["regs"]?["gpp"]?.stringValue?.hasPrefix("DBABMA~"), true)
        XCTAssertEqual(json["regs"]?["gpp_sid"], [2])
        XCTAssertEqual(json["regs"]?["us_privacy"]?.stringValue, "1YNN")
        XCTAssertNil(json["regs"]?["coppa"])
        XCTAssertEqual(json["user"]?["consent"]?.stringValue, "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA")
        XCTAssertEqual(json["device"]?["lmt"]?.intValue, 1, "a non-personalised load limits tracking")

        let child = build(.banner) { $0.privacy.privacyClass = .childDirected }.0
        XCTAssertEqual(child["regs"]?["coppa"]?.intValue, 1)
        XCTAssertEqual(child["device"]?["lmt"]?.intValue, 1)
        let open = build(.banner).0
        XCTAssertNil(open["regs"], "no signal, no regs object")
        XCTAssertEqual(open["device"]?["lmt"]?.intValue, 0)
    }

    func testALoadsConsentStringsAreCutFromTextAboutIt() {
        var privacy = LoadPrivacy()
        (privacy.tcString, privacy.usPrivacy) = ("CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA", "1YNN")
        XCTAssertEqual(privacy.redacting("bid CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA refused; us 1YNN"), "bid [redacted] refused; us [redacted]")
        XCTAssertEqual(LoadPrivacy().redacting("nothing to cut"), "nothing to cut")
    }

    func testANativeLoadAsksOneImpressionPerAdWithANativeOneTwoRequest() throws {
        let (json, offer) = build(.native) { $0.count = 3 }
        let imps = try XCTUnwrap(json["imp"]?.arrayValue)
        XCTAssertEqual(imps.compactMap { $0["id"]?.stringValue }, ["1", "2", "3"])
        XCTAssertEqual(Set(offer.imps.keys), ["1", "2", "3"])
        let native = try XCTUnwrap(imps[0]["native"])
        XCTAssertEqual(native["ver"]?.stringValue, "1.2")
        let request = try XCTUnwrap(JSONValue.parse(Data(try XCTUnwrap(native["request"]?.stringValue).utf8)))
        XCTAssertEqual(request["ver"]?.stringValue, "1.2")
        let assets = try XCTUnwrap(request["assets"]?.arrayValue)
        XCTAssertEqual(assets.count, 8)
        XCTAssertEqual(assets.filter { $0["required"]?.intValue == 1 }.count, 1, "only the headline is required")
        XCTAssertEqual(Set(assets.compactMap { $0["id"]?.intValue }).count, assets.count, "asset ids are unique")
    }
}
