import XCTest

@testable import AdorchSystemd

final class JournalFieldTests: XCTestCase {
    func testMetadataKeysBecomeValidJournalFieldNames() {
        XCTAssertEqual(JournalLogHandler.fieldName("slot"), "SLOT")
        XCTAssertEqual(JournalLogHandler.fieldName("ad_id"), "AD_ID")
        XCTAssertEqual(JournalLogHandler.fieldName("peer-uid"), "PEER_UID")
        XCTAssertEqual(JournalLogHandler.fieldName("message_id"), "MESSAGE_ID")
        XCTAssertEqual(JournalLogHandler.fieldName(String(repeating: "a", count: 64)), String(repeating: "A", count: 64))
    }

    func testNamesJournaldWouldRejectOrThatForgeTheHandlersOwnAreDropped() {
        XCTAssertNil(JournalLogHandler.fieldName("_PID"), "leading _ is for trusted fields")
        XCTAssertNil(JournalLogHandler.fieldName("9lives"))
        XCTAssertNil(JournalLogHandler.fieldName(""))
        XCTAssertNil(JournalLogHandler.fieldName("späť"))
        XCTAssertNil(JournalLogHandler.fieldName("a b"))
        XCTAssertNil(JournalLogHandler.fieldName(String(repeating: "a", count: 65)))
        for own in ["message", "priority", "syslog_identifier", "code_file", "code_line", "code_func"] {
            XCTAssertNil(JournalLogHandler.fieldName(own), own)
        }
    }

    func testLevelsMapToSyslogPriorities() {
        XCTAssertEqual(JournalLogHandler.priority(.critical), 2)
        XCTAssertEqual(JournalLogHandler.priority(.error), 3)
        XCTAssertEqual(JournalLogHandler.priority(.warning), 4)
        XCTAssertEqual(JournalLogHandler.priority(.notice), 5)
        XCTAssertEqual(JournalLogHandler.priority(.info), 6)
        XCTAssertEqual(JournalLogHandler.priority(.debug), 7)
        XCTAssertEqual(JournalLogHandler.priority(.trace), 7)
    }
}
