import AdorchVarlink
import XCTest

@testable import AdorchDaemon

final class FieldBoundsTests: XCTestCase {
    private func refusal(_ body: () throws(VarlinkError) -> String) -> VarlinkError? {
        do throws(VarlinkError) {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    func testAValueIsMeasuredInBytesAndTheRefusalNamesFieldAndLimit() {
        XCTAssertNil(refusal { () throws(VarlinkError) in try FieldBounds.check(String(repeating: "a", count: 256), "user_id", max: 256) })
        // 128 two-byte characters fit; 129 do not, though they are far fewer than 256 characters.
        XCTAssertNil(refusal { () throws(VarlinkError) in try FieldBounds.check(String(repeating: "é", count: 128), "user_id", max: 256) })
        let error = refusal { () throws(VarlinkError) in try FieldBounds.check(String(repeating: "é", count: 129), "user_id", max: 256) }
        XCTAssertEqual(error?.name, "io.adorch.Ads.InvalidParameter")
        XCTAssertEqual(error?.parameters["parameter"], "user_id")
        XCTAssertEqual(error?.parameters["message"], "at most 256 bytes, got 258")
    }

    /// A newline, carriage return or NUL would go raw into journal and console lines and forge
    /// some: every C0 control and DEL is refused; what follows them in Unicode is not.
    func testControlCharactersAreRefusedByNameAndOthersAreNot() {
        for control in (0..<0x20).map({ Character(Unicode.Scalar(UInt8($0))) }) + ["\u{7F}"] {
            for value in [String(control), "u\(control)1", "u1\(control)"] {
                let error = refusal { () throws(VarlinkError) in try FieldBounds.check(value, "reward.extra", max: 1024) }
                XCTAssertEqual(error?.name, "io.adorch.Ads.InvalidParameter", value.debugDescription)
                XCTAssertEqual(error?.parameters["parameter"], "reward.extra")
                XCTAssertEqual(error?.parameters["message"], "control characters are not allowed (U+0000 to U+001F and U+007F)")
            }
        }
        for value in ["", " ", "~", "é", "\u{80}", "\u{A0}", "用户", "🙂", "a b"] {
            XCTAssertNil(refusal { () throws(VarlinkError) in try FieldBounds.check(value, "user_id", max: 256) }, value.debugDescription)
        }
        XCTAssertEqual(refusal { () throws(VarlinkError) in try FieldBounds.creativeURL("https://cdn.example/\r\nx") }?.parameters["parameter"],
                       "creative_url")
        XCTAssertEqual(refusal { () throws(VarlinkError) in try FieldBounds.check(String(repeating: "\n", count: 300), "user_id", max: 256) }?
            .parameters["message"], "at most 256 bytes, got 300", "the length is told first")
    }

    func testAnObjectIsMeasuredAsItsCompactJSON() {
        let object: [String: JSONValue] = ["k": .string(String(repeating: "v", count: 10))]  // {"k":"vvvvvvvvvv"}: 18 bytes
        XCTAssertNil(refusal { () throws(VarlinkError) in try FieldBounds.check(object, "targeting", max: 18) })
        XCTAssertEqual(refusal { () throws(VarlinkError) in try FieldBounds.check(object, "targeting", max: 17) }?.parameters["message"],
                       "at most 17 bytes, got 18")
    }

    func testACreativeURLIsAnAbsoluteHTTPOrHTTPSURLWithinItsBound() {
        for good in ["https://cdn.example/unit.js", "http://127.0.0.1:8080/a?b=c", "HTTPS://Example.com"] {
            XCTAssertNil(refusal { () throws(VarlinkError) in try FieldBounds.creativeURL(good) }, good)
        }
        for bad in ["", "unit.js", "/abs/path.js", "file:///etc/passwd", "javascript:alert(1)", "https://", "ftp://host/x", "https:///x"] {
            let error = refusal { () throws(VarlinkError) in try FieldBounds.creativeURL(bad) }
            XCTAssertEqual(error?.parameters["parameter"], "creative_url", bad)
            XCTAssertEqual(error?.parameters["message"]?.stringValue?.hasPrefix("expected an absolute http or https URL"), true, bad)
        }
        let long = "https://cdn.example/" + String(repeating: "a", count: FieldBounds.creativeURL)
        XCTAssertEqual(refusal { () throws(VarlinkError) in try FieldBounds.creativeURL(long) }?.parameters["message"],
                       .string("at most \(FieldBounds.creativeURL) bytes, got \(long.utf8.count)"))
    }
}
