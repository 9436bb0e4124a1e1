import AdorchPrivacy
import XCTest

final class ConsentRedactionTests: XCTestCase {
    func testAStringShowsItsKindAndLengthNeverItsChoices() {
        let tc = "COtybn4PA_zT4KjACBENAPCIAEBAAECAAIAAAAAAAAAA"
        XCTAssertEqual(ConsentRedaction.redact(tc), "CO…(44 bytes)")
        XCTAssertEqual(ConsentRedaction.redact("1YNN"), "1Y…(4 bytes)")
        XCTAssertEqual(ConsentRedaction.redact("D"), "D…(1 bytes)")
        XCTAssertEqual(ConsentRedaction.redact(""), "…(0 bytes)")
    }

    func testCharactersThatCouldForgeALineAreNotShown() {
        XCTAssertEqual(ConsentRedaction.redact("\nX-rest"), "…(7 bytes)")
        XCTAssertEqual(ConsentRedaction.redact("é1"), "…(3 bytes)")
        XCTAssertEqual(ConsentRedaction.redact("-_x"), "-_…(3 bytes)")
    }
}
