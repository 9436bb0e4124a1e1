import AdorchPrivacy
import AdorchPrivacyStore
import Foundation
import XCTest

@testable import AdorchDaemon

/// The privacy records read back at start: those a bound now refuses, stored by a daemon
/// before it, are dropped in one line and one write, and the start goes on.
final class PrivacyBookTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-privacy-book-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: folder) }

    private var path: String { folder.appendingPathComponent(PrivacyBook.fileName).path }

    func testRecordsOverTheGPPBoundAreDroppedInOneLineAndTheOthersKept() throws {
        let limit = ConsentStringBound.maxGPPSections
        let store = try PrivacyStore(path: path)
        let heavy = 100
        // As an older daemon kept them: the attack's string and gpp_sid, for 100 users of uid 1000.
        for user in 0..<heavy {
            try store.set(StoredPrivacy(uid: 1000, userID: "u\(user)", gpp: PrivacyParameterTests.packedGPP, gppSid: Array(24...4114)), limit: 1000)
        }
        try store.set(StoredPrivacy(uid: 1000, userID: "", usPrivacy: "1YNN"), limit: 1000)
        try store.set(StoredPrivacy(uid: 1001, userID: "", gpp: PrivacyParameterTests.fullGPP, gppSid: Array(24...(24 + limit))), limit: 1000)
        try store.set(StoredPrivacy(uid: 1002, userID: "", maxContentRating: "R"), limit: 1000)
        try store.checkpoint()

        let log = LoggedLines()
        let started = ContinuousClock.now
        let book = try PrivacyBook(stateDir: folder.path, logger: log.logger)
        // Each record is refused by its number of sections, not checked id by id: 0.25 s each before the bound.
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "the start read the records back")

        XCTAssertEqual(book.resolve(call: nil, uid: 1000, userID: "u7").source, .app, "the dropped user's record does not apply; the app's does")
        XCTAssertEqual(book.resolve(call: nil, uid: 1001, userID: nil).source, .none)
        XCTAssertEqual(book.resolve(call: nil, uid: 1002, userID: nil).source, .none)
        let warnings = log.at(.warning)
        XCTAssertEqual(warnings.count, 1, "\(warnings)")
        let line = warnings.first ?? ""
        XCTAssertTrue(line.hasPrefix("privacy: 1 records of 1 uids read back from \(path); \(heavy + 2) dropped from the file too, as they no longer decode"
            + " (\(heavy) by privacy.gpp, 1 by privacy.gpp_sid, 1 by privacy.max_content_rating); the first, uid 1000's record for one of its users:"
            + " privacy.gpp: sections: 4091 sections, more than the \(limit) a GPP string may carry"), line)
        XCTAssertFalse(line.contains("~A~A") || line.contains("24, 25"), "no string nor gpp_sid in the line")
        XCTAssertLessThan(line.utf8.count, 600, line)

        // Gone from the file: the next start reads the one left and says nothing of the others.
        XCTAssertEqual(try PrivacyStore(path: path).all().records.map(\.uid), [1000])
        let again = LoggedLines()
        _ = try PrivacyBook(stateDir: folder.path, logger: again.logger)
        XCTAssertEqual(again.at(.warning), [])
        XCTAssertEqual(again.all, ["privacy: 1 records of 1 uids read back from \(path)"])
    }
}
