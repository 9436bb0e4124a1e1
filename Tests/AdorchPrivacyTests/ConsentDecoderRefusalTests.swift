import AdorchPrivacy
import XCTest

/// What the vector pages do not reach: the size bound, padding, segment and section rules,
/// the `gpp_sid` check, refusals inside GPP sections, and the bound on GPP sections.
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

    func testAGppSidOfMoreIdsThanTheBoundIsRefusedBeforeAnyIsLookedUp() throws {
        let limit = ConsentStringBound.maxGPPSections
        let full = try GPPString.decode(opaqueSections(limit))
        XCTAssertEqual(try full.applicableSections(gppSid: Array((24...(23 + limit)).reversed())).count, limit)
        XCTAssertEqual(refusal { try full.applicableSections(gppSid: Array(24...(24 + limit))) }, .tooManySids(count: limit + 1, limit: limit))
        // The attack's 4,091 ids, which the header does not list either: refused by their number.
        XCTAssertEqual(refusal { try full.applicableSections(gppSid: Array(24...4114)) }, .tooManySids(count: 4091, limit: limit))
        XCTAssertEqual(refusal { try full.applicableSections(gppSid: Array(24...4114)) }?.description,
                       "gpp_sid: 4091 ids, more than the \(limit) sections a GPP string may carry")
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

    /// GPP sections the decoder keeps as sent (ids it has no decoder for), `count` of them
    /// from id 24: the cheapest sections an app can pack into a string.
    func opaqueSections(_ count: Int, header: [ClosedRange<Int>]? = nil) -> String {
        BitWriter.gppHeader(header ?? [24...(23 + count)]) + String(repeating: "~A", count: count)
    }

    func testAStringOfMoreSectionsThanTheBoundIsRefusedByTheirNumber() throws {
        let limit = ConsentStringBound.maxGPPSections
        let atTheBound = try GPPString.decode(opaqueSections(limit))
        XCTAssertEqual(atTheBound.sectionIds, Array(24...(23 + limit)))
        XCTAssertEqual(refusal { try GPPString.decode(opaqueSections(limit + 1)) }, .tooManySections(field: "sections", count: limit + 1, limit: limit))
        // The attack: 4,091 sections in 8 KiB, refused by their number, the header not read.
        let packed = "DBAB" + String(repeating: "~A", count: 4091)
        XCTAssertLessThanOrEqual(packed.utf8.count, ConsentStringBound.maxBytes)
        XCTAssertEqual(refusal { try GPPString.decode(packed) }, .tooManySections(field: "sections", count: 4091, limit: limit))
        XCTAssertEqual(refusal { try GPPString.decode(packed) }?.description, "sections: 4091 sections, more than the \(limit) a GPP string may carry")
    }

    func testAHeaderListingMoreIdsThanTheBoundIsRefusedAtTheEntryThatPassesIt() {
        let limit = ConsentStringBound.maxGPPSections
        // One entry per id: the entry naming the 33rd is refused, though the string carries 32 sections.
        let singles = (24...(24 + limit)).map { $0...$0 }
        XCTAssertEqual(refusal { try GPPString.decode(opaqueSections(limit, header: singles)) },
                       .tooManySections(field: "header.sectionIds[\(limit)]", count: limit + 1, limit: limit))
        XCTAssertEqual(refusal { try GPPString.decode(opaqueSections(limit, header: [24...(24 + limit)])) },
                       .tooManySections(field: "header.sectionIds[0]", count: limit + 1, limit: limit))
        // Within the bound, a header and the sections present that disagree are refused as before.
        XCTAssertEqual(refusal { try GPPString.decode(opaqueSections(1, header: [24...26])) }, .sectionCountMismatch(declared: 3, present: 1))
    }

    func testAHeaderRangeOfMillionsOfIdsIsRefusedByItsSizeNotExpanded() {
        let limit = ConsentStringBound.maxGPPSections
        // Had the range been listed id by id, it would have been refused at its second id as a
        // mismatch with the one section present; its size is what the refusal says.
        XCTAssertEqual(refusal { try GPPString.decode(BitWriter.gppHeader([1...1_000_000]) + "~1YNN") },
                       .tooManySections(field: "header.sectionIds[0]", count: 1_000_000, limit: limit))
        // A range of 4.6e18 ids (F(91), an offset near the largest an Int holds): counted as well.
        XCTAssertEqual(refusal { try GPPString.decode(BitWriter.gppHeader([6...6, 7...(7 + 4_660_046_610_375_530_309)]) + "~1YNN~A") },
                       .tooManySections(field: "header.sectionIds[1]", count: 4_660_046_610_375_530_311, limit: limit))
        // Ones without end: truncated, not an overflow of the sum.
        var endless = BitWriter()
        endless.write(3, 6)
        endless.write(1, 6)
        endless.write(1, 12)
        endless.write(0, 1)
        for _ in 0..<5 { endless.write(0b10, 2) }
        XCTAssertEqual(refusal { try GPPString.decode(endless.base64url() + "~1YNN") }?.description.contains("header.sectionIds[0].start: truncated"), true)
    }

    /// An id past `maxGPPSectionID`, alone or ending a range (2^32 + 6 was accepted once and
    /// made every plugin host it reached refuse its load and exit), is refused by its value;
    /// the highest allowed is read.
    func testASectionIdPastTheHighestIsRefusedByItsValue() throws {
        let highest = ConsentStringBound.maxGPPSectionID
        for header in [[4_294_967_302...4_294_967_302], [6...6, (highest + 1)...(highest + 1)], [(highest - 1)...(highest + 1)]] {
            let string = BitWriter.gppHeader(header) + String(repeating: "~A", count: header.reduce(0) { $0 + $1.count })
            XCTAssertEqual(refusal { try GPPString.decode(string) },
                           .valueOutOfRange(field: "header.sectionIds[\(header.count - 1)]", found: header.last!.upperBound, allowed: 1...highest), "\(header)")
        }
        XCTAssertEqual(try GPPString.decode(BitWriter.gppHeader([highest...highest]) + "~A").sectionIds, [highest])
    }

    /// More publisher restrictions than there are (purpose, type) pairs, each naming no
    /// vendor (20 bits apiece: 2,444 fit an 8 KiB string), are refused by their number; as
    /// many as there are pairs decode.
    func testMorePublisherRestrictionsThanPairsAreRefusedByTheirNumber() throws {
        let most = ConsentStringBound.maxPublisherRestrictions
        func text(_ count: Int) -> String {
            let none = TCModel.Vendors(maxVendorId: 0, useRanges: false, entries: [])
            let restrictions = (0..<count).map { TCModel.Restriction(purposeId: $0 % 64, type: ($0 / 64) % 4, entries: []) }
            return TCModel(created: 1, lastUpdated: 1, cmpId: 1, cmpVersion: 1, consentScreen: 1, language: (4, 13),
                           vendorListVersion: 1, policyVersion: 4, serviceSpecific: true, nonStandardTexts: false,
                           specialFeatures: [], purposesConsent: [1], purposesLI: [], purposeOneTreatment: false,
                           country: (4, 4), vendorConsents: none, vendorLI: none, restrictions: restrictions, disclosed: nil,
                           allowed: nil, publisherTC: nil, reservedSegmentTypes: [], segmentOrder: []).encoded()
        }
        XCTAssertEqual(try TCString.decode(text(most)).publisherRestrictions.count, most)
        XCTAssertEqual(refusal { try TCString.decode(text(most + 1)) },
                       .valueOutOfRange(field: "core.publisherRestrictions.numPubRestrictions", found: most + 1, allowed: 0...most))
        XCTAssertEqual(refusal { try TCString.decode(text(2_444)) },
                       .valueOutOfRange(field: "core.publisherRestrictions.numPubRestrictions", found: 2_444, allowed: 0...most))
    }

    var generator = SeededGenerator(seed: 32)
}
