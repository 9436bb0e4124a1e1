import AdorchEngine
import AdorchPluginHost
import XCTest

/// A loaded payload goes to apps as its plugin wrote it, unless a key came twice: then readers
/// would disagree on which value counts, and it goes as the daemon read it (the first of each).
final class PayloadDecodeTests: XCTestCase {
    private func payload(_ text: String) -> String? {
        guard case .loaded(let json, _, _, _, _, _, _) = decodePayload(text) else { return nil }
        return json
    }

    func testAPayloadIsForwardedAsWritten() {
        let text = #"{"title": "Hi",  "n": [1, 2.5], "nested": {"a": 1}}"#
        XCTAssertEqual(payload(text), text)
    }

    func testAPayloadWithAKeyTwiceGoesAsTheDaemonReadIt() {
        XCTAssertEqual(payload(#"{"expires_in_s":600,"expires_in_s":1,"price":1,"price":9}"#), #"{"expires_in_s":600,"price":1}"#)
        guard case .loaded(_, let expiresIn, let price, _, _, _, _) = decodePayload(#"{"expires_in_s":600,"expires_in_s":1,"price":1,"price":9}"#) else {
            return XCTFail("loaded")
        }
        XCTAssertEqual(expiresIn, .seconds(600))
        XCTAssertEqual(price, 1)
        // Twice in a nested object counts too.
        XCTAssertEqual(payload(#"{"a":{"b":1,"b":2}}"#), #"{"a":{"b":1}}"#)
    }

    /// plugin.h: under 1 s counts as 1 s, zero and less included (the engine's floor raises it);
    /// a lifetime past a century is not read at all.
    func testALifetimeOfZeroOrLessIsReadAsZeroNotIgnored() {
        for (text, expected) in [("0", Duration.zero), ("-5", .zero), ("1e-300", .zero), ("2.5", .milliseconds(2500)), ("1e10", nil)] {
            guard case .loaded(_, let expiresIn, _, _, _, _, _) = decodePayload(#"{"expires_in_s":\#(text)}"#) else { return XCTFail(text) }
            XCTAssertEqual(expiresIn, expected, text)
        }
    }

    /// plugin.h, "notices": read, taken out of what apps get, and refused by name when malformed.
    func testNoticesAreTakenOutOfThePayloadAndReadStrictly() {
        let text = #"{"html":"<b>x</b>","notices":{"win":["https://x.example/w?p=1"],"loss":["https://x.example/l?r=${AUCTION_LOSS}"],"billing":["http://x.example/b?t=${AUCTION_IMP_TS}"]}}"#
        guard case .loaded(let json, _, _, _, let items, _, let notices) = decodePayload(text) else { return XCTFail("loaded") }
        XCTAssertEqual(json, #"{"html":"<b>x</b>"}"#, "an app never sees the billing URLs")
        XCTAssertEqual(items.first?.json, json)
        XCTAssertEqual(notices, AdNotices(win: ["https://x.example/w?p=1"], billing: ["http://x.example/b?t=${AUCTION_IMP_TS}"],
                                          loss: ["https://x.example/l?r=${AUCTION_LOSS}"]))
        XCTAssertEqual(items.first?.notices, notices)
        let several = #"{"ads":[{"headline":"a","notices":{"win":["https://x.example/1"]}},{"headline":"b"}]}"#
        guard case .loaded(let forwarded, _, _, _, let natives, _, nil) = decodePayload(several) else { return XCTFail("several") }
        XCTAssertFalse(forwarded.contains("notices"), forwarded)
        XCTAssertEqual(natives.map(\.notices), [AdNotices(win: ["https://x.example/1"]), nil])
        let refusals = [
            (#"{"notices":[]}"#, "notices is not a JSON object"),
            (#"{"notices":{"nurl":[]}}"#, "unknown key \"nurl\""),
            (#"{"notices":{"win":"https://x.example/"}}"#, "notices.win is not an array"),
            (#"{"notices":{"win":["file:///etc/passwd"]}}"#, "notices.win[0] is not an http or https URL"),
            (#"{"notices":{"due":["https://x.example/ a"]}}"#, "notices.due[0] is not an http or https URL"),
            (#"{"notices":{"win":["http://127.0.0.1%0aFORGED%20LINE:18080/x"]}}"#, "notices.win[0] is not an http or https URL"),
            (#"{"notices":{"win":["http://x.example:99999/x"]}}"#, "notices.win[0] is not an http or https URL"),
            (#"{"notices":{"loss":[\#((0...16).map { _ in "\"https://x.example/\"" }.joined(separator: ","))]}}"#, "has 17 URLs, over the 16"),
            (#"{"ads":[{"headline":"a"}],"notices":{}}"#, "go in each of \"ads\""),
        ]
        for (payload, words) in refusals {
            guard case .loadedInvalid(let reason) = decodePayload(payload) else { XCTFail(payload); continue }
            XCTAssertTrue(reason.contains(words), "\(payload): \(reason)")
        }
    }
}
