@testable import AdorchPrivacy
import XCTest

/// IDSet keeps a BitField as a bitmap and range entries as ranges: a set's memory stays within
/// its string's size whatever the bits, and two sets are equal when they hold the same ids,
/// however each is kept.
final class IDSetTests: XCTestCase {
    /// The set a BitField of `count` bits with `ids` set decodes to, read as the decoder reads it.
    private func bitField(_ ids: Set<Int>, count: Int) throws -> (set: IDSet, text: String) {
        var writer = BitWriter()
        writer.flags(ids, count)
        let text = writer.base64url()
        var reader = try Base64URLBitReader(text[...], segment: "test", offset: 0, wholeBytes: false)
        return (try reader.bitField(count, "bitField"), text)
    }

    func testAlternatingBitFieldOfEverySixteenBitIdTakesNoMoreThanItsString() throws {
        let count = VendorSection.vendorIDs.upperBound
        let odd = Set(stride(from: 1, through: count, by: 2))
        let (set, text) = try bitField(odd, count: count)

        for id in 1...count where set.contains(id) != (id % 2 == 1) {
            XCTFail("id \(id) reads as \(set.contains(id) ? "set" : "clear")")
            break
        }
        XCTAssertFalse(set.contains(0))
        XCTAssertFalse(set.contains(count + 1))
        XCTAssertFalse(set.contains(-1))
        XCTAssertEqual(set.ranges.count, odd.count)
        XCTAssertEqual(set.ids, odd.sorted())
        // One bit per id, as in the string (6 bits a character): 8 KiB for 10,923 characters.
        XCTAssertLessThanOrEqual(set.storageBytes, text.utf8.count)
    }

    /// The same through the whole decoder, for the largest alternating vendor BitField an
    /// 8 KiB TC string holds.
    func testAlternatingVendorBitFieldOfAnEightKiBTCStringTakesNoMoreThanTheString() throws {
        func text(maxVendorId: Int) -> String {
            let none = TCModel.Vendors(maxVendorId: 0, useRanges: false, entries: [])
            let alternating = TCModel.Vendors(maxVendorId: maxVendorId, useRanges: false,
                                              entries: stride(from: 1, through: maxVendorId, by: 2).map { $0...$0 })
            return TCModel(created: 1, lastUpdated: 1, cmpId: 1, cmpVersion: 1, consentScreen: 1, language: (4, 13),
                           vendorListVersion: 1, policyVersion: 4, serviceSpecific: true, nonStandardTexts: false,
                           specialFeatures: [], purposesConsent: [1], purposesLI: [], purposeOneTreatment: false,
                           country: (4, 4), vendorConsents: alternating, vendorLI: none, restrictions: [], disclosed: nil,
                           allowed: nil, publisherTC: nil, reservedSegmentTypes: [], segmentOrder: []).encoded()
        }
        // The largest maxVendorId whose string fits the bound, by bisection.
        var fits = 1, tooLong = VendorSection.vendorIDs.upperBound + 1
        while tooLong - fits > 1 {
            let middle = (fits + tooLong) / 2
            if text(maxVendorId: middle).utf8.count <= ConsentStringBound.maxBytes { fits = middle } else { tooLong = middle }
        }
        let string = text(maxVendorId: fits)

        let vendors = try TCString.decode(string).vendorConsents.vendors
        XCTAssertGreaterThan(fits, 48_000)
        XCTAssertEqual(vendors.ids.count, (fits + 1) / 2)
        XCTAssertTrue(vendors.contains(fits % 2 == 1 ? fits : fits - 1))
        XCTAssertFalse(vendors.contains(2))
        XCTAssertLessThanOrEqual(vendors.storageBytes, string.utf8.count)
    }

    /// Range entries stay ranges: the most one-id entries a string can write (4,095, in
    /// descending order so that merging sorts them) take 4 bytes each for their 17 bits:
    /// within twice the string.
    func testMostRangeEntriesOfOneIdTakeFourBytesEach() throws {
        let count = (1 << 12) - 1
        let entries = stride(from: 2 * count - 1, through: 1, by: -2).map { $0...$0 }
        var writer = BitWriter()
        writer.rangeEntries(entries)
        let text = writer.base64url()
        var reader = try Base64URLBitReader(text[...], segment: "test", offset: 0, wholeBytes: false)
        let set = try reader.rangeEntries("rangeEntries", maxVendorId: VendorSection.vendorIDs.upperBound)

        XCTAssertEqual(set.ids, Array(stride(from: 1, through: 2 * count - 1, by: 2)))
        XCTAssertTrue(set.contains(2 * count - 1))
        XCTAssertFalse(set.contains(2 * count))
        XCTAssertFalse(set.contains(2))
        XCTAssertLessThanOrEqual(set.storageBytes, 2 * text.utf8.count)
    }

    func testSetsHoldingTheSameIdsAreEqualHoweverKept() throws {
        let ids: Set<Int> = [1, 2, 3, 63, 64, 65, 128, 200]
        let merged = IDSet(merging: [200...200, 63...65, 1...2, 2...3, 128...128])
        let bitmap = try bitField(ids, count: 200).set
        // A longer field with the same ids set: more (clear) words, same ids.
        let longerBitmap = try bitField(ids, count: 1000).set

        XCTAssertEqual(bitmap, merged)
        XCTAssertEqual(merged, bitmap)
        XCTAssertEqual(bitmap, longerBitmap)
        XCTAssertEqual(bitmap.ranges, [1...3, 63...65, 128...128, 200...200])
        XCTAssertEqual(bitmap.description, merged.description)
        XCTAssertEqual(bitmap.description, "[1-3, 63-65, 128, 200]")

        XCTAssertNotEqual(try bitField(ids.subtracting([64]), count: 200).set, merged)
        XCTAssertNotEqual(try bitField(ids.union([201]), count: 1000).set, merged)
        XCTAssertNotEqual(bitmap, IDSet(merging: [1...3, 63...65, 128...128, 200...201]))
        XCTAssertNotEqual(bitmap, IDSet(merging: [1...3, 63...65, 128...128]))

        let emptyBitmap = try bitField([], count: 300).set
        XCTAssertTrue(emptyBitmap.isEmpty)
        XCTAssertEqual(emptyBitmap, IDSet(merging: []))
        XCTAssertEqual(emptyBitmap.ranges, [])
        XCTAssertFalse(bitmap.isEmpty)
    }

    /// A run ending on the last bit of a field whose length is a multiple of 64 ends there.
    func testRunReachingTheLastBitOfAWholeWordEndsAtTheField() throws {
        let set = try bitField(Set(60...128), count: 128).set
        XCTAssertEqual(set.ranges, [60...128])
        XCTAssertTrue(set.contains(128))
        XCTAssertFalse(set.contains(129))
    }
}
