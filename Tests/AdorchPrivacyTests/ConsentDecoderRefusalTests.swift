import AdorchPrivacy
import XCTest

/// What the vector pages do not reach: the size bound, padding, segment and section rules,
/// the `gpp_sid` check, and refusals inside GPP sections.
final class ConsentDecoderRefusalTests: XCTestCase {
    /// A valid core (tcf-vectors.md T2-01), the base of the segment cases.
    let core = "COtybn4PA_zT4KjACBENAPCIAEBAAECAAIAAAAAAAAAA"

    func refusal<T>(_ decode: () throws -> T) -> ConsentStringError? {
        do { _ = try decode(); return nil } catch { return error as? ConsentStringError }
    }

    func testTextBeyondTheBoundIsRefusedBeforeDecoding() {
        let long = String(repeating: "A", count: ConsentStringBound.maxBytes + 1)
        XCTAssertEqual(refusal { try TCString.decode(long) }, .tooLong(field: "TC string", bytes: long.utf8.count, limit: ConsentStringBound.maxBytes))
        XCTAssertEqual(refusal { try GPPString.decode(long) }, .tooLong(field: "GPP string", bytes: long.utf8.count, limit: ConsentStringBound.maxBytes))
        XCTAssertEqual(refusal { try USNational.decode(long) }, .tooLong(field: "usnat", bytes: long.utf8.count, limit: ConsentStringBound.maxBytes))
    }

    func testPaddingOnlyAtTheEndAndAtMostTwo() throws {
        XCTAssertNoThrow(try TCString.decode(core + "=="))
        XCTAssertEqual(refusal { try TCString.decode(core + "===") }, .badBase64Character(field: "core", character: "=", offset: core.utf8.count))
        XCTAssertEqual(refusal { try TCString.decode("CO=" + core.dropFirst(2)) }, .badBase64Character(field: "core", character: "=", offset: 2))
        // Standard base64's '+' is not base64url's; the offset counts from the whole string.
        XCTAssertEqual(refusal { try TCString.decode(core + ".IB+A") }, .badBase64Character(field: "segment[1]", character: "+", offset: core.utf8.count + 3))
    }

    func testSegmentRules() throws {
        XCTAssertEqual(refusal { try TCString.decode("") }, .empty(field: "TC string"))
        XCTAssertEqual(refusal { try TCString.decode(core + ".") }, .empty(field: "segment[1]"))
        // "IAAA": type 1 (disclosed vendors), MaxVendorId 0.
        XCTAssertEqual(refusal { try TCString.decode(core + ".IAAA.IAAA") }, .duplicateSegment(field: "segment[2]", segmentType: 1))
        XCTAssertEqual(refusal { try TCString.decode(core + ".AAAA") },
                       .unexpectedValue(field: "segment[1].segmentType", found: 0, expected: "1, 2 or 3 (only the first segment is the core)"))
        // "gAAA": type 4, reserved: passed over.
        XCTAssertEqual(try TCString.decode(core + ".gAAA.IAAA").skippedSegmentTypes, [4])
        XCTAssertEqual(refusal { try TCString.decode("DO" + core.dropFirst(2)) }, .unsupportedVersion(field: "core.version", found: 3, supported: [2]))
    }

    func testAVendorAboveMaxVendorIdIsRefused() {
        var model = TCModel.random(using: &generator)
        model.vendorConsents = TCModel.Vendors(maxVendorId: 10, useRanges: true, entries: [3...11])
        XCTAssertEqual(refusal { try TCString.decode(model.encoded()) },
                       .vendorIdAboveMax(field: "core.vendorConsents.rangeEntries[0]", id: 11, maxVendorId: 10, atBit: 242))
    }

    func testGppSidMustNameHeaderSectionsOnce() throws {
        let gpp = try GPPString.decode("DBACNYA~CPSG_8APSG_8ANwAAAENAwCAAAAAAAAAAAAAAAAAAAAA.QAAA.IAAA~1YNN")
        XCTAssertEqual(try gpp.applicableSections(gppSid: [6]), [.usPrivacy(USPrivacy(notice: .yes, optOutSale: .no, lspaCovered: .no))])
        XCTAssertEqual(try gpp.applicableSections(gppSid: [6, 2]).count, 2)
        XCTAssertEqual(refusal { try gpp.applicableSections(gppSid: [7]) }, .sidNotInHeader(id: 7, header: [2, 6]))
        XCTAssertEqual(refusal { try gpp.applicableSections(gppSid: [2, 2]) }, .sidDuplicate(id: 2))
    }

    func testASectionsRefusalNamesTheSection() {
        // Section 2 holding a TCF v1.1 string; section 6 a lower-case flag.
        XCTAssertEqual(refusal { try GPPString.decode("DBABMA~BONV8oqONXwgmADACHENAO7pqzAAppY") }, .inSection(id: 2, name: "tcfeuv2", .tcfVersion1))
        XCTAssertEqual(refusal { try GPPString.decode("DBABTA~1yNN") },
                       .inSection(id: 6, name: "uspv1", .usPrivacy(.badFlag(field: .notice, found: "y"))))
        // usnat: version 3, then a field holding 3.
        XCTAssertEqual(refusal { try GPPString.decode("DBABLA~DAAAVVVVVVRA") },
                       .inSection(id: 7, name: "usnat", .unsupportedVersion(field: "usnat.version", found: 3, supported: [1, 2])))
        XCTAssertEqual(refusal { try USNational.decode("C8AAVVVVVVRA") }, .valueOutOfRange(field: "usnat.sharingNotice", found: 3, allowed: 0...2))
    }

    func testAHeaderRangeOfMillionsOfIdsStopsAtTheSectionsPresent() {
        // One range entry from 1 to 1 + F(28), about 830,000 ids: refused at the second, as one section is present.
        var header = BitWriter()
        header.write(3, 6)
        header.write(1, 6)
        header.write(1, 12)
        header.write(1, 1)
        for bit in [1, 1] { header.write(bit, 1) }
        for _ in 0..<28 { header.write(0, 1) }
        for bit in [1, 1] { header.write(bit, 1) }
        XCTAssertEqual(refusal { try GPPString.decode(header.base64url() + "~1YNN") }, .sectionCountMismatch(declared: 2, present: 1))
        // Ones without end: truncated, not an overflow of the sum.
        var endless = BitWriter()
        endless.write(3, 6)
        endless.write(1, 6)
        endless.write(1, 12)
        endless.write(0, 1)
        for _ in 0..<5 { endless.write(0b10, 2) }
        XCTAssertEqual(refusal { try GPPString.decode(endless.base64url() + "~1YNN") }?.description.contains("header.sectionIds[0].start: truncated"), true)
    }

    var generator = SeededGenerator(seed: 32)
}
