import AdorchEngine
import AdorchPluginHost
import XCTest

/// A loaded payload goes to apps as its plugin wrote it, unless a key came twice: then readers
/// would disagree on which value counts, and it goes as the daemon read it (the first of each).
final class PayloadDecodeTests: XCTestCase {
    private func payload(_ text: String) -> String? {
        guard case .loaded(let json, _, _, _, _, _) = decodePayload(text) else { return nil }
        return json
    }

    func testAPayloadIsForwardedAsWritten() {
        let text = #"{"title": "Hi",  "n": [1, 2.5], "nested": {"a": 1}}"#
        XCTAssertEqual(payload(text), text)
    }

    func testAPayloadWithAKeyTwiceGoesAsTheDaemonReadIt() {
        XCTAssertEqual(payload(#"{"expires_in_s":600,"expires_in_s":1,"price":1,"price":9}"#), #"{"expires_in_s":600,"price":1}"#)
        guard case .loaded(_, let expiresIn, let price, _, _, _) = decodePayload(#"{"expires_in_s":600,"expires_in_s":1,"price":1,"price":9}"#) else {
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
            guard case .loaded(_, let expiresIn, _, _, _, _) = decodePayload(#"{"expires_in_s":\#(text)}"#) else { return XCTFail(text) }
            XCTAssertEqual(expiresIn, expected, text)
        }
    }
}
