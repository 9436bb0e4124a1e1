import Foundation
import XCTest

@testable import AdorchDaemon

/// The daemon writes times by hand (no ICU at idle): they must read as Foundation's did.
final class TimestampTests: XCTestCase {
    func testTimestampsMatchFoundationsISO8601WithMilliseconds() {
        let style = Date.ISO8601FormatStyle.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted)
        var random = SystemRandomNumberGenerator()
        let fixed: [TimeInterval] = [0, 0.0009, 0.9999, 951_782_400.5, 1_795_000_000.123, 4_102_444_799.999]
        for seconds in fixed + (0..<2000).map({ _ in Double.random(in: 0..<4_102_444_800, using: &random) }) {
            let date = Date(timeIntervalSince1970: seconds)
            XCTAssertEqual(timestamp(date), date.formatted(style), "at \(seconds)")
        }
    }

    func testAspectRatiosAreWholeNumbersOrDecimalsOnBothSides() {
        for good in ["16:9", "1.91:1", "4:3", "1:1.5"] { XCTAssertTrue(isAspectRatio(good), good) }
        for bad in ["", "16", "16:", ":9", "1.:1", ".5:1", "16:9:1", "a:b", "1,5:1", "١٦:٩", " 16:9"] { XCTAssertFalse(isAspectRatio(bad), bad) }
    }
}
