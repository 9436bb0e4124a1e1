import AdorchEngine
@testable import AdorchPluginHost
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
        let calls: [PluginWire.Call] = [
            .start(name: "sim", path: "/x/libadorch-plugin-sim.so", configJSON: #"{"k":"v"}"#, insecurePlugins: true, logLevel: "notice"),
            .load(order), .show(seq: 7, ad: 42, userID: "u1"), .show(seq: 8, ad: 43, userID: nil), .withdrawShow(42),
            .notify(42, .thirdQuartile), .control(42, .pause), .destroy(42), .stats(seq: 9), .ping(seq: 10), .shutdown,
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
        guard case .report(9, .loaded(let text, let expiresIn, let price, let tracks, _, _)) =
                try PluginWire.Reply(body: body(PluginWire.Reply.report(9, .loaded(payloadJSON: payload, expiresIn: nil, price: nil)).frame))
        else { return XCTFail("a loaded report decodes as loaded") }
        XCTAssertEqual(text, payload)
        XCTAssertEqual(expiresIn, .seconds(60))
        XCTAssertEqual(price, 2.5)
        XCTAssertTrue(tracks)
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
