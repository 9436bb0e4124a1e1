import AdorchEngine
import AdorchPluginHost
import CAdorchPlugin
import XCTest

/// plugin.h 1.4: the request a plugin's ad_create gets carries the load's privacy, field by
/// field as the header documents it, to a plugin built for 1.4; one built for 1.3 gets NULL.
final class PluginRequestPrivacyTests: XCTestCase {
    private func order(_ privacy: LoadPrivacy) -> LoadOrder {
        var order = LoadOrder(adID: 1, plugin: "sim", slotID: "s", format: .interstitial, entry: WaterfallEntry(plugin: "sim"),
                              deadline: Moment.monotonicNow() + .seconds(5), reward: nil, testMode: false, targetingJSON: "{}")
        order.privacy = privacy
        return order
    }

    /// What a plugin reads of request.privacy, copied out during the call, as a plugin must.
    private struct Seen: Equatable {
        var structSize: UInt32, privacyClass: UInt32, gdpr: Int32, coppa: Int32, underAge: Int32, nonPersonalized: Int32
        var tcString: String, gpp: String, gppSid: [UInt32]?, usPrivacy: String, rating: String

        init(_ p: adorch_privacy) {
            (structSize, privacyClass, gdpr) = (p.struct_size, p.privacy_class, p.gdpr)
            (coppa, underAge, nonPersonalized) = (p.coppa, p.under_age_of_consent, p.non_personalized)
            (tcString, gpp, usPrivacy, rating) = (String(cString: p.tc_string), String(cString: p.gpp), String(cString: p.us_privacy),
                                                  String(cString: p.max_content_rating))
            gppSid = p.gpp_sid.map { Array(UnsafeBufferPointer(start: $0, count: Int(p.gpp_sid_count))) }
        }
    }

    private func seen(_ order: LoadOrder, minor: UInt32) -> Seen? {
        order.withCRequest(pluginMinor: minor) { request in
            XCTAssertTrue(Int(request.pointee.struct_size) >= MemoryLayout<adorch_request>.offset(of: \.privacy)! + MemoryLayout<UnsafeRawPointer>.size,
                          "the host's request covers privacy")
            return request.pointee.privacy.map { Seen($0.pointee) }
        }
    }

    func testAOneFourPluginGetsEverySignalAsTheHeaderSays() throws {
        let privacy = LoadPrivacy(privacyClass: .childDirected, signals: PrivacySignals(
            gdprApplies: .yes, tcString: "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA", gpp: "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA",
            gppSid: [2, 7], usPrivacy: "1YNN", childDirected: true, underAgeOfConsent: true, nonPersonalized: true, maxContentRating: .t))
        let got = try XCTUnwrap(seen(order(privacy), minor: 4))
        XCTAssertEqual(got.structSize, UInt32(MemoryLayout<adorch_privacy>.size))
        XCTAssertEqual(got.privacyClass, adorch_privacy_class.ADORCH_PRIVACY_CHILD_DIRECTED.rawValue)
        XCTAssertEqual([got.gdpr, got.coppa, got.underAge, got.nonPersonalized], [1, 1, 1, 1])
        XCTAssertEqual(got.tcString, "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA")
        XCTAssertEqual(got.gpp, "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA")
        XCTAssertEqual(got.gppSid, [2, 7])
        XCTAssertEqual(got.usPrivacy, "1YNN")
        XCTAssertEqual(got.rating, "T")
    }

    func testWhatTheAppDidNotSayIsEmptyMinusOneAndNull() throws {
        for (gdpr, expected) in [(GDPRApplies.unknown, Int32(-1)), (.no, 0)] {
            let got = try XCTUnwrap(seen(order(LoadPrivacy(privacyClass: .personalized, signals: PrivacySignals(gdprApplies: gdpr))), minor: 4))
            XCTAssertEqual(got.privacyClass, adorch_privacy_class.ADORCH_PRIVACY_PERSONALIZED.rawValue)
            XCTAssertEqual(got.gdpr, expected)
            XCTAssertEqual([got.coppa, got.underAge, got.nonPersonalized], [0, 0, 0])
            XCTAssertEqual([got.tcString, got.gpp, got.usPrivacy, got.rating], ["", "", "", ""])
            XCTAssertNil(got.gppSid, "no ids: NULL")
        }
    }

    func testAPluginBuiltForOneThreeOrOlderGetsNoPrivacy() {
        let privacy = LoadPrivacy(privacyClass: .nonPersonalized, signals: PrivacySignals(gdprApplies: .yes, tcString: "CP"))
        for minor: UInt32 in [0, 3] { XCTAssertNil(seen(order(privacy), minor: minor), "ABI 1.\(minor)") }
        XCTAssertNotNil(seen(order(privacy), minor: PluginABI.minor + 1), "a newer minor gets it")
    }

    func testEveryClassHasItsHeaderValue() {
        XCTAssertEqual(PrivacyClass.allCases.map(\.abi.rawValue), [1, 2, 3])
    }
}
