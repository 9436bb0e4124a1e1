import AdorchPrivacy
import XCTest

final class UserTagTests: XCTestCase {
    func testATagIsTheSameForTheSameIdDiffersBetweenIdsAndHoldsNoneOfIt() {
        let ids = (0..<2000).map { "u\($0)" } + ["", "u-journal", "\u{202E}evil\n"]
        let tags = ids.map(UserTag.of)
        XCTAssertEqual(tags, ids.map(UserTag.of), "the same id, the same tag")
        XCTAssertEqual(Set(tags).count, ids.count, "no two of these ids share a tag")
        for (id, tag) in zip(ids, tags) {
            XCTAssertEqual(tag.count, 16, tag)
            XCTAssertTrue(tag.allSatisfy(\.isHexDigit), tag)
            if id.count > 2 { XCTAssertFalse(tag.contains(id), "\(id) is in its tag \(tag)") }
        }
    }
}
