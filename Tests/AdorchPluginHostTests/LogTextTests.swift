import AdorchPluginHost
import XCTest

/// A plugin's text as one log line (CallbackBounds.logText): what a reader sees is what the
/// plugin wrote, on one line, with nothing hidden or reordered.
final class LogTextTests: XCTestCase {
    func testLineBreaksTabsAndInvisibleCharactersAreEscaped() {
        XCTAssertEqual(CallbackBounds.logText("a\nadorchd[1]: forged"), "a\\nadorchd[1]: forged")
        XCTAssertEqual(CallbackBounds.logText("a\r\tb"), "a\\r\\tb")
        XCTAssertEqual(CallbackBounds.logText("ok \u{202E}dedrawer"), "ok \\u{202e}dedrawer", "a right-to-left override")
        XCTAssertEqual(CallbackBounds.logText("\u{2066}x\u{2069}\u{200B}\u{FEFF}"), "\\u{2066}x\\u{2069}\\u{200b}\\u{feff}")
        XCTAssertEqual(CallbackBounds.logText("\u{2028}\u{2029}\u{85}\u{7F}\u{1B}[31m"), "\\u{2028}\\u{2029}\\u{85}\\u{7f}\\u{1b}[31m")
    }

    func testPrintableTextIsKeptAsWritten() {
        let text = "loaded ad 42 — prix 1,50 € (広告) 🎬"
        XCTAssertEqual(CallbackBounds.logText(text), text)
    }

    func testALongTextIsCutAtTheBound() {
        let cut = CallbackBounds.logText(String(repeating: "x", count: CallbackBounds.textBytes * 2))
        XCTAssertEqual(cut, String(repeating: "x", count: CallbackBounds.textBytes) + "…")
    }
}
