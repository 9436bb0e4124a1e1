import AdorchEngine
@testable import AdorchPluginHost
import AdorchPrivacy
import XCTest

/// The daemon and an isolated plugin's host agree on every message (PluginWire), and a
/// frame that does not decode is refused by name, never taken for another.
final class PluginWireTests: XCTestCase {
    private func body(_ frame: [UInt8]) -> ArraySlice<UInt8> {
        let length = Int(frame[0]) | Int(frame[1]) << 8 | Int(frame[2]) << 16 | Int(frame[3]) << 24
        XCTAssertEqual(length, frame.count - 4, "the length prefix counts the body")
        return frame[4...]
    }

    func testEveryCallAndReplyRoundTrips() throws {
        var order = LoadOrder(adID: 42, plugin: "sim", slotID: "rw", format: .rewarded,
                              entry: WaterfallEntry(plugin: "sim", adUnitID: "unit ü", serverParameter: "fill=1", timeout: .milliseconds(1500)),
                              deadline: Moment(nanoseconds: 123_456_789_000), reward: RewardModel(name: "coins", amount: 10, extra: "x"),
                              testMode: true, targetingJSON: #"{"age":30}"#)
        order.count = 3; order.width = 320; order.height = 50; order.variant = "feed"; order.imageOptionsJSON = #"{"multiple":true}"#
        order.interactive = InteractiveRequest(creativeURL: "https://c.invalid/a", adParametersJSON: "{}", slotType: .midroll)
        order.floor = 0.75
        var unsaid = order
        unsaid.privacy = LoadPrivacy(privacyClass: .personalized, signals: PrivacySignals())
        order.privacy = Self.everySignal
        let calls: [PluginWire.Call] = [
            .start(name: "sim", path: "/x/libadorch-plugin-sim.so", configJSON: #"{"k":"v"}"#, insecurePlugins: true, logLevel: "notice"),
            .load(order), .load(unsaid), .show(seq: 7, ad: 42, userID: "u1"), .show(seq: 8, ad: 43, userID: nil), .withdrawShow(42),
            .notify(42, .thirdQuartile), .control(42, .pause), .lose(42, .lostToHigherBid), .lose(43, .belowFloor), .lose(44, .expired), .destroy(42), .stats(seq: 9), .ping(seq: 10), .shutdown,
        ]
        for call in calls { XCTAssertEqual(try PluginWire.Call(body: body(call.frame)), call) }

        let info = PluginInfo(name: "sim", path: "/x.so", declaredName: "sim", version: "1.1.0", description: "d", abiMajor: 1, abiMinor: 2,
                              formats: [.rewarded, .native])
        let replies: [PluginWire.Reply] = [
            .hello(magic: PluginWire.magic, pid: 99), .started(info), .refused("plugin /x.so refused: init returned 3"),
            .report(1, .loadedInvalid(reason: "r")), .report(2, .failed(.noFill, networkCode: -2, message: "m")), .report(3, .mediaCached),
            .report(4, .other(name: "presented", detailJSON: nil)), .report(5, .other(name: "dislike", detailJSON: #"{"reasons":[]}"#)),
            .report(6, .reward(transID: "t")), .report(7, .reward(transID: nil)), .report(8, .destroyed),
            .shown(seq: 1, true), .stats(seq: 2, nil), .stats(seq: 3, "{}"), .pong(seq: 4), .log(level: "warning", message: "w"),
            .confined("landlock"), .shutDown,
        ]
        for reply in replies { XCTAssertEqual(try PluginWire.Reply(body: body(reply.frame)), reply) }
        // A payload crosses as the plugin's text and is read on the daemon's side as an in-process one is.
        let payload = #"{"price":2.5,"expires_in_s":60,"tracks_impressions":true}"#
        guard case .report(9, .loaded(let text, let expiresIn, let price, let tracks, _, _, _)) =
                try PluginWire.Reply(body: body(PluginWire.Reply.report(9, .loaded(payloadJSON: payload, expiresIn: nil, price: nil)).frame))
        else { return XCTFail("a loaded report decodes as loaded") }
        XCTAssertEqual(text, payload)
        XCTAssertEqual(expiresIn, .seconds(60))
        XCTAssertEqual(price, 2.5)
        XCTAssertTrue(tracks)
    }

    /// Every privacy signal set, each to something its field alone has.
    private static let everySignal = LoadPrivacy(privacyClass: .nonPersonalized, signals: PrivacySignals(
        gdprApplies: .yes, tcString: "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA", gpp: "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA",
        gppSid: [2, 7], usPrivacy: "1YNN", childDirected: true, underAgeOfConsent: true, nonPersonalized: true, maxContentRating: .pg))

    /// A load's frame with everySignal and one change, made on the frame's bytes: what a host
    /// would read if the daemon's end were garbled or forged.
    private func loadFrame(_ change: (inout LoadPrivacy) -> Void = { _ in }, patch: (inout [UInt8]) -> Void = { _ in }) -> ArraySlice<UInt8> {
        var order = LoadOrder(adID: 1, plugin: "sim", slotID: "s", format: .interstitial, entry: WaterfallEntry(plugin: "sim"),
                              deadline: Moment(nanoseconds: 1), reward: nil, testMode: false, targetingJSON: "{}")
        order.privacy = Self.everySignal
        change(&order.privacy)
        var bytes = Array(body(PluginWire.Call.load(order).frame))
        patch(&bytes)
        return bytes[...]
    }

    /// The index of `needle` in `bytes`, which must hold it once.
    private func index(of needle: [UInt8], in bytes: [UInt8]) -> Int {
        let found = (0...(bytes.count - needle.count)).filter { Array(bytes[$0..<($0 + needle.count)]) == needle }
        XCTAssertEqual(found.count, 1, "the frame holds \(needle) once")
        return found.first ?? 0
    }

    func testAPrivacyFieldOverItsBoundOrWithNoSignalsValueIsRefusedByName() {
        let over = String(repeating: "A", count: ConsentStringBound.maxBytes + 1)
        let classBytes = [UInt8(16), 0, 0, 0] + Array("non_personalized".utf8)
        let cases: [(ArraySlice<UInt8>, String)] = [
            (loadFrame { $0.signals.tcString = over }, "privacy.tc_string: \(ConsentStringBound.maxBytes + 1) bytes, over the \(ConsentStringBound.maxBytes)"),
            (loadFrame { $0.signals.gpp = over }, "privacy.gpp: \(ConsentStringBound.maxBytes + 1) bytes"),
            (loadFrame { $0.signals.usPrivacy = over }, "privacy.us_privacy: \(ConsentStringBound.maxBytes + 1) bytes"),
            (loadFrame { $0.signals.gppSid = [2, 0] }, "privacy.gpp_sid[1]: 0 is not a GPP section id"),
            (loadFrame { $0.signals.gppSid = Array(1...(ConsentStringBound.maxGPPSections + 1)) }, "privacy.gpp_sid: \(ConsentStringBound.maxGPPSections + 1) ids, over"),
            (loadFrame(patch: { bytes in bytes[index(of: classBytes, in: bytes) + classBytes.count] = 7 }), "privacy.gdpr: 7 is not 1, 0 or -1"),
            (loadFrame(patch: { bytes in
                let at = index(of: classBytes, in: bytes) + 4
                bytes.replaceSubrange(at..<(at + 16), with: Array("nonpersonalized_".utf8))
            }), "unknown privacy class \"nonpersonalized_\""),
            (loadFrame(patch: { bytes in
                let rating = [UInt8(2), 0, 0, 0] + Array("PG".utf8)
                let at = index(of: rating, in: bytes) + 4
                bytes.replaceSubrange(at..<(at + 2), with: Array("XX".utf8))
            }), "unknown privacy.max_content_rating \"XX\""),
        ]
        for (frame, expected) in cases {
            XCTAssertThrowsError(try PluginWire.Call(body: frame), expected) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(error) should say \(expected)")
            }
        }
        // At the bound itself, a string crosses whole.
        let atBound = String(repeating: "B", count: ConsentStringBound.maxBytes)
        guard case .load(let order)? = try? PluginWire.Call(body: loadFrame { $0.signals.tcString = atBound }) else { return XCTFail("a string at the bound decodes") }
        XCTAssertEqual(order.privacy.signals.tcString, atBound)
    }

    func testMalformedFramesAreRefusedByName() {
        let cases: [([UInt8], String)] = [
            ([], "ends early"), ([99], "unknown call tag 99"), ([7, 1, 2], "ends early"),
            ([10, 0], "1 bytes too many"), ([5] + [UInt8](repeating: 0, count: 8) + [3, 0, 0, 0] + Array("bad".utf8), "unknown event \"bad\""),
        ]
        for (bytes, expected) in cases {
            XCTAssertThrowsError(try PluginWire.Call(body: bytes[...]), "\(bytes)") { error in
                XCTAssertTrue("\(error)".contains(expected), "\(error) should say \(expected)")
            }
        }
        XCTAssertThrowsError(try PluginWire.Reply(body: [4, 1, 0, 0, 0, 0, 0, 0, 0, 42][...])) { error in
            XCTAssertTrue("\(error)".contains("unknown report kind 42"), "\(error)")
        }
    }
}
