import AdorchEngine
import AdorchPrivacy
import AdorchVarlink
import XCTest

@testable import AdorchDaemon

/// The `privacy` parameter of SetPrivacy, Show and Load, as their calls read it: the bound on
/// GPP sections applies on each, and SetPrivacy's journal line stays short whatever it holds.
final class PrivacyParameterTests: XCTestCase {
    /// The attack's GPP string, which decoded before the bound: its header lists 24...4114 in
    /// one range (ids without a decoder, kept as sent), then 4,091 one-character sections, 8 KiB in all.
    static let packedGPP = "DBABkcqlYA" + String(repeating: "~A", count: 4091)
    /// 32 such sections, 24...55: at the bound.
    static let fullGPP = "DBABkaWA" + String(repeating: "~A", count: ConsentStringBound.maxGPPSections)

    private func privacy(gpp: String, sid: ClosedRange<Int>) -> [String: JSONValue] {
        ["slot": "s", "privacy": ["gpp": .string(gpp), "gpp_sid": .array(sid.map { .int(Int64($0)) })]]
    }

    /// How each method reads its call, the privacy parameter among the rest.
    private let methods: [(name: String, read: (VarlinkCall) throws(VarlinkError) -> ViewerPrivacy?)] = [
        ("io.adorch.Ads.SetPrivacy", { call throws(VarlinkError) in try SetPrivacyCall(call).privacy }),
        ("io.adorch.Ads.Show", { call throws(VarlinkError) in try ShowCall(call).privacy }),
        ("io.adorch.Ads.Load", { call throws(VarlinkError) in try LoadCall(call).privacy }),
    ]

    private func refusal(_ method: (name: String, read: (VarlinkCall) throws(VarlinkError) -> ViewerPrivacy?),
                         _ parameters: [String: JSONValue]) -> VarlinkError? {
        do throws(VarlinkError) {
            _ = try method.read(VarlinkCall(method: method.name, parameters: parameters))
            return nil
        } catch {
            return error
        }
    }

    func testEachMethodRefusesMoreGPPSectionsOrGppSidIdsThanTheBoundNamingFieldAndBound() throws {
        let limit = ConsentStringBound.maxGPPSections
        XCTAssertLessThanOrEqual(Self.packedGPP.utf8.count, ConsentStringBound.maxBytes, "the attack's string is within the byte bound")
        for method in methods {
            let atTheBound = try method.read(VarlinkCall(method: method.name, parameters: privacy(gpp: Self.fullGPP, sid: 24...(23 + limit))))
            XCTAssertEqual(atTheBound?.signals.gppSid.count, limit, method.name)

            let packed = refusal(method, privacy(gpp: Self.packedGPP, sid: 24...4114))
            XCTAssertEqual(packed?.name, "io.adorch.Ads.InvalidParameter", method.name)
            XCTAssertEqual(packed?.parameters["parameter"], "privacy.gpp", method.name)
            XCTAssertEqual(packed?.parameters["message"], .string("does not decode: sections: 4091 sections, more than the \(limit) a GPP string may carry"), method.name)

            let sid = refusal(method, privacy(gpp: Self.fullGPP, sid: 24...(24 + limit)))
            XCTAssertEqual(sid?.parameters["parameter"], "privacy.gpp_sid", method.name)
            XCTAssertEqual(sid?.parameters["message"], .string("does not decode: gpp_sid: \(limit + 1) ids, more than the \(limit) sections a GPP string may carry"), method.name)
        }
    }

    /// The outside attack's strings, whose headers list section 2^32 + 6 and 2^62: accepted
    /// once, they made the plugin host refuse each load they came in and exit, until the
    /// plugin was disabled for every app. Each method now refuses them by name.
    func testEachMethodRefusesASectionIdNoPluginCouldBeGiven() throws {
        for (gpp, id) in [("DBABIUQEUVCL~1YNN", 4_294_967_302), ("DBABUIoSqBVSCAkRFJVg~1YNN", 1 << 62)] {
            for method in methods {
                let refused = refusal(method, privacy(gpp: gpp, sid: id...id))
                XCTAssertEqual(refused?.name, "io.adorch.Ads.InvalidParameter", method.name)
                XCTAssertEqual(refused?.parameters["parameter"], "privacy.gpp", method.name)
                XCTAssertTrue(refused?.parameters["message"]?.stringValue?.contains("\(id)") == true, "\(method.name): \(refused.map { "\($0)" } ?? "accepted")")
            }
        }
    }

    func testTheSetPrivacyLineCountsGppSidAndEveryPartOfItIsBounded() {
        let longest = String(repeating: "C", count: ConsentStringBound.maxBytes)
        let signals = PrivacySignals(gdprApplies: .yes, tcString: longest, gpp: longest, gppSid: Array(24...4114), usPrivacy: longest,
                                     childDirected: true, underAgeOfConsent: true, nonPersonalized: true, maxContentRating: .ma)
        let line = signals.logDescription
        XCTAssertTrue(line.contains("gpp_sid=4091 sections"), line)
        XCTAssertFalse(line.contains("24, 25"), "the ids are not listed: \(line)")
        XCTAssertFalse(line.contains("CCC"), "the strings are redacted: \(line)")
        XCTAssertLessThan(line.utf8.count, 200, line)
        XCTAssertTrue(PrivacySignals(gpp: "DBABTA~1YNN", gppSid: [6]).logDescription.contains("gpp=DB…(11 bytes) gpp_sid=1 sections"))
    }
}
