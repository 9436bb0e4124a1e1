import AdorchPrivacy
import Foundation
import XCTest

/// Every vector of shared/data/consent/tcf-vectors.md: the valid strings decode to what the
/// page says upstream asserted and to its full field dump; v1.1 and malformed strings are refused
/// with the reason named here per vector.
final class TCFVectorTests: XCTestCase {
    func testEveryVectorDecodesAsThePageSays() throws {
        let page = try VectorMarkdown.load("tcf-vectors.md")
        let entries = page.entries
        XCTAssertEqual(entries.filter { $0.id.hasPrefix("T2-") }.count, 14, "sections A")
        XCTAssertEqual(entries.filter { $0.id.hasPrefix("S-") }.count, 3, "section B")
        XCTAssertEqual(entries.filter { $0.id.hasPrefix("V1-") }.count, 4, "section C")

        var checked = 0
        for entry in entries {
            if entry.id.hasPrefix("V1-") {
                XCTAssertThrowsError(try TCString.decode(entry.string), entry.id) { error in
                    XCTAssertEqual(error as? ConsentStringError, .tcfVersion1, entry.id)
                }
                checked += 1
                continue
            }
            let decoded: TCString
            do {
                decoded = try TCString.decode(entry.string)
            } catch {
                XCTFail("\(entry.id): refused: \(error)")
                continue
            }
            let asserted = try XCTUnwrap(entry.bullets["Asserted upstream"], entry.id)
            let unparsed = Self.checkAsserted(asserted, decoded, entry.id)
            if !unparsed.isEmpty {
                guard let explicit = Self.explicitChecks[entry.id] else {
                    XCTFail("\(entry.id): no check for the assertion \(unparsed)")
                    continue
                }
                try explicit(decoded, entry)
            }
            Self.checkDump(try XCTUnwrap(entry.bullets["Decoded here"], entry.id), decoded, entry.id)
            checked += 1
        }

        let refusals = page.rows(matching: #"^X-\d+$"#)
        XCTAssertEqual(refusals.count, 13, "section D")
        for row in refusals {
            let (id, string) = (row[0], row[1])
            guard let expected = Self.refusals[id] else { XCTFail("\(id): no expected refusal for \(string)"); continue }
            XCTAssertThrowsError(try TCString.decode(string), id) { error in
                XCTAssertEqual(error as? ConsentStringError, expected, "\(id): \(string): \(error)")
            }
            checked += 1
        }
        print("TCFVectorTests: \(checked) of \(entries.count + refusals.count) vectors checked")
        XCTAssertEqual(checked, entries.count + refusals.count)
    }

    /// The `Key = Value` assertions, checked; returns the fragments that are not of that form.
    static func checkAsserted(_ text: String, _ decoded: TCString, _ id: String) -> [String] {
        var unparsed: [String] = []
        for fragment in text.components(separatedBy: "; ") {
            let pair = fragment.components(separatedBy: " = ")
            guard pair.count == 2 else { unparsed.append(fragment); continue }
            let (key, value) = (pair[0], pair[1].replacingOccurrences(of: " (none)", with: ""))
            let context = "\(id): \(key)"
            switch key {
            case "Version": XCTAssertEqual(decoded.version, Int(value), context)
            // Upstream asserts these to the second.
            case "Created": XCTAssertEqual(decoded.createdDeciseconds / 10, VectorNotation.deciseconds(value).map { $0 / 10 }, context)
            case "LastUpdated": XCTAssertEqual(decoded.lastUpdatedDeciseconds / 10, VectorNotation.deciseconds(value).map { $0 / 10 }, context)
            case "CmpId": XCTAssertEqual(decoded.cmpId, Int(value), context)
            case "CmpVersion": XCTAssertEqual(decoded.cmpVersion, Int(value), context)
            case "ConsentScreen": XCTAssertEqual(decoded.consentScreen, Int(value), context)
            case "ConsentLanguage": XCTAssertEqual(decoded.consentLanguage, value, context)
            case "VendorListVersion": XCTAssertEqual(decoded.vendorListVersion, Int(value), context)
            case "TcfPolicyVersion": XCTAssertEqual(decoded.tcfPolicyVersion, Int(value), context)
            case "PublisherCC": XCTAssertEqual(decoded.publisherCC, value, context)
            case "IsServiceSpecific": XCTAssertEqual(decoded.isServiceSpecific, Bool(value), context)
            case "UseNonStandardTexts/Stacks": XCTAssertEqual(decoded.useNonStandardTexts, Bool(value), context)
            case "PurposeOneTreatment": XCTAssertEqual(decoded.purposeOneTreatment, Bool(value), context)
            case "SpecialFeatureOptIns": XCTAssertEqual(decoded.specialFeatureOptIns.ids, VectorNotation.numbers(value), context)
            case "PurposesConsent": XCTAssertEqual(decoded.purposesConsent.ids, VectorNotation.numbers(value), context)
            case "PurposesLITransparency": XCTAssertEqual(decoded.purposesLITransparency.ids, VectorNotation.numbers(value), context)
            case "MaxVendorId (consent section)": XCTAssertEqual(decoded.vendorConsents.maxVendorId, Int(value), context)
            case "VendorConsent": XCTAssertEqual(decoded.vendorConsents.vendors.ids, VectorNotation.numbers(value), context)
            case "VendorLegitimateInterest": XCTAssertEqual(decoded.vendorLegitimateInterests.vendors.ids, VectorNotation.numbers(value), context)
            case "AllowedVendors": XCTAssertEqual(decoded.allowedVendors?.vendors.ids, VectorNotation.numbers(value), context)
            case "DisclosedVendors": XCTAssertEqual(decoded.disclosedVendors?.vendors.ids, VectorNotation.numbers(value), context)
            default: unparsed.append(fragment)
            }
        }
        return unparsed
    }

    /// The page's "Decoded here" dump: `v2 · created … · CmpId 675 · … · vendorConsent bitfield, max 0, [] · …`.
    static func checkDump(_ text: String, _ decoded: TCString, _ id: String) {
        func vendors(_ section: VendorSection?, _ value: String, _ context: String) {
            let parts = value.components(separatedBy: ", max ")
            let rest = parts.count == 2 ? parts[1].components(separatedBy: ", ") : []
            guard let section, rest.count >= 1, let max = Int(rest[0]) else { return XCTFail("\(context): \(value), decoded \(String(describing: section))") }
            XCTAssertEqual(section.encoding, parts[0] == "range" ? .range : .bitField, context)
            XCTAssertEqual(section.maxVendorId, max, context)
            XCTAssertEqual(section.vendors.ids, VectorNotation.numbers(rest.dropFirst().joined(separator: ", ")), context)
        }
        for item in text.components(separatedBy: " · ") {
            let space = item.firstIndex(of: " ") ?? item.endIndex
            let (key, value) = (String(item[..<space]), String(item[space...]).trimmingCharacters(in: .whitespaces))
            let context = "\(id): decoded here, \(key)"
            switch key {
            case "v2": XCTAssertEqual(decoded.version, 2, context)
            case "created": XCTAssertEqual(decoded.createdDeciseconds, VectorNotation.deciseconds(value), context)
            case "lastUpdated": XCTAssertEqual(decoded.lastUpdatedDeciseconds, VectorNotation.deciseconds(value), context)
            case "CmpId": XCTAssertEqual(decoded.cmpId, Int(value), context)
            case "CmpVersion": XCTAssertEqual(decoded.cmpVersion, Int(value), context)
            case "ConsentScreen": XCTAssertEqual(decoded.consentScreen, Int(value), context)
            case "VLV": XCTAssertEqual(decoded.vendorListVersion, Int(value), context)
            case "policy": XCTAssertEqual(decoded.tcfPolicyVersion, Int(value), context)
            case "serviceSpecific": XCTAssertEqual(decoded.isServiceSpecific, value == "1", context)
            case "P1T": XCTAssertEqual(decoded.purposeOneTreatment, value == "1", context)
            case "CC": XCTAssertEqual(decoded.publisherCC, value, context)
            case "SF": XCTAssertEqual(decoded.specialFeatureOptIns.ids, VectorNotation.numbers(value), context)
            case "purposes": XCTAssertEqual(decoded.purposesConsent.ids, VectorNotation.numbers(value), context)
            case "LI": XCTAssertEqual(decoded.purposesLITransparency.ids, VectorNotation.numbers(value), context)
            case "pubRestrictions": XCTAssertEqual(decoded.publisherRestrictions.count, Int(value), context)
            case "vendorConsent": vendors(decoded.vendorConsents, value, context)
            case "vendorLI": vendors(decoded.vendorLegitimateInterests, value, context)
            case "disclosedVendors": vendors(decoded.disclosedVendors, value, context)
            case "allowedVendors": vendors(decoded.allowedVendors, value, context)
            case "publisherTC": checkPublisherTC(value, decoded.publisherTC, context)
            // The consent language stands alone: two capitals.
            case _ where item.range(of: "^[A-Z]{2}$", options: .regularExpression) != nil:
                XCTAssertEqual(decoded.consentLanguage, item, "\(id): decoded here, consent language")
            default: XCTFail("\(context): no check for \(item)")
            }
        }
    }

    /// `{'pubPurposesConsent': [1], 'pubPurposesLITransparency': [24], 'numCustomPurposes': 2, …}`.
    static func checkPublisherTC(_ text: String, _ tc: PublisherTC?, _ context: String) {
        guard let tc else { return XCTFail("\(context): no Publisher TC segment decoded") }
        let expected: [String: [Int]] = [
            "pubPurposesConsent": tc.purposesConsent.ids, "pubPurposesLITransparency": tc.purposesLITransparency.ids,
            "numCustomPurposes": [tc.numCustomPurposes], "customPurposesConsent": tc.customPurposesConsent.ids,
            "customPurposesLITransparency": tc.customPurposesLITransparency.ids,
        ]
        let pattern = try! NSRegularExpression(pattern: #"'(\w+)': (\[[^\]]*\]|\d+)"#)
        let matches = pattern.matches(in: text, range: NSRange(text.startIndex..., in: text))
        XCTAssertEqual(matches.count, expected.count, "\(context): \(text)")
        for match in matches {
            let key = String(text[Range(match.range(at: 1), in: text)!])
            let value = String(text[Range(match.range(at: 2), in: text)!])
            XCTAssertEqual(VectorNotation.numbers(value) ?? Int(value).map { [$0] }, expected[key], "\(context).\(key)")
        }
    }

    /// The assertions the page states in prose, per vector, as the page words them.
    static let explicitChecks: [String: @Sendable (TCString, VectorMarkdown.Entry) throws -> Void] = [
        // "asserted for purposes 1..24 and vendors 1..MaxVendorID (set = consent, others = no consent)"
        "T2-02": { decoded, entry in
            let purposes: Set = [1, 2, 3, 5, 6, 7, 9, 12, 13, 15, 17, 19, 20, 23, 24], vendors: Set = [1, 2, 4, 7, 9, 10]
            for purpose in 1...24 { XCTAssertEqual(decoded.purposeConsented(purpose), purposes.contains(purpose), "\(entry.id) purpose \(purpose)") }
            for vendor in 1...10 { XCTAssertEqual(decoded.vendorConsented(vendor), vendors.contains(vendor), "\(entry.id) vendor \(vendor)") }
        },
        // "asserted to the second (UTC)": checkAsserted compares seconds.
        "T2-05": { _, _ in },
        // "SpecialFeatureOptIn(1)=true, (2)=false; PurposeLITransparency true for 2,3,4,5 and false for 1,6,7,28"
        "T2-07": { decoded, entry in
            XCTAssertTrue(decoded.specialFeatureOptedIn(1), entry.id)
            XCTAssertFalse(decoded.specialFeatureOptedIn(2), entry.id)
            for purpose in [2, 3, 4, 5] { XCTAssertTrue(decoded.purposeLegitimateInterest(purpose), "\(entry.id) LI \(purpose)") }
            for purpose in [1, 6, 7, 28] { XCTAssertFalse(decoded.purposeLegitimateInterest(purpose), "\(entry.id) LI \(purpose)") }
        },
        // The character at index 22 replaced, the policy version read back: "A→0, B→1, …".
        "T2-08": { decoded, entry in
            let asserted = try XCTUnwrap(entry.bullets["Asserted upstream"])
            let pairs = try NSRegularExpression(pattern: #"(\S)→(\d+)"#)
                .matches(in: asserted, range: NSRange(asserted.startIndex..., in: asserted))
                .map { (asserted[Range($0.range(at: 1), in: asserted)!], Int(asserted[Range($0.range(at: 2), in: asserted)!])!) }
            XCTAssertEqual(pairs.count, 8, entry.id)
            XCTAssertEqual(decoded.tcfPolicyVersion, 2, "\(entry.id): the unmodified string")
            for (character, version) in pairs {
                var characters = Array(entry.string)
                characters[22] = Character(String(character))
                XCTAssertEqual(try TCString.decode(String(characters)).tcfPolicyVersion, version, "\(entry.id) with \(character) at 22")
            }
        },
        // "CheckPubRestriction(purpose 7, type 1, vendor 32)=true; (7,1,vendor 7)=false; (5,1,32)=false"
        "T2-09": { decoded, entry in
            XCTAssertTrue(decoded.isRestricted(purpose: 7, type: .requireConsent, vendor: 32), entry.id)
            XCTAssertFalse(decoded.isRestricted(purpose: 7, type: .requireConsent, vendor: 7), entry.id)
            XCTAssertFalse(decoded.isRestricted(purpose: 5, type: .requireConsent, vendor: 32), entry.id)
        },
        // "SpecialFeatureOptIn(3)=false; restriction type 0 on purpose 1 for vendor 32 (type 1 not set);
        // purpose 2 type 0 for vendors 32, 5, 11 (not 44, not 500); purpose 2 type 1 for vendor 32 (not 42)"
        "T2-10": { decoded, entry in
            XCTAssertFalse(decoded.specialFeatureOptedIn(3), entry.id)
            XCTAssertTrue(decoded.isRestricted(purpose: 1, type: .notAllowed, vendor: 32), entry.id)
            XCTAssertFalse(decoded.isRestricted(purpose: 1, type: .requireConsent, vendor: 32), entry.id)
            for vendor in [32, 5, 11] { XCTAssertTrue(decoded.isRestricted(purpose: 2, type: .notAllowed, vendor: vendor), "\(entry.id) vendor \(vendor)") }
            for vendor in [44, 500] { XCTAssertFalse(decoded.isRestricted(purpose: 2, type: .notAllowed, vendor: vendor), "\(entry.id) vendor \(vendor)") }
            XCTAssertTrue(decoded.isRestricted(purpose: 2, type: .requireConsent, vendor: 32), entry.id)
            XCTAssertFalse(decoded.isRestricted(purpose: 2, type: .requireConsent, vendor: 42), entry.id)
        },
        // "PublisherRestrictions = exactly one entry: purpose 1, restriction type 0, vendor ids [10]"
        "T2-11": { decoded, entry in
            XCTAssertEqual(decoded.publisherRestrictions.count, 1, entry.id)
            XCTAssertEqual(decoded.publisherRestrictions.first?.purposeId, 1, entry.id)
            XCTAssertEqual(decoded.publisherRestrictions.first?.restrictionType, .notAllowed, entry.id)
            XCTAssertEqual(decoded.publisherRestrictions.first?.vendors.ids, [10], entry.id)
            XCTAssertEqual(decoded.publisherRestrictions(purpose: 1, vendor: 10), [.notAllowed], entry.id)
        },
        // "asserted only: ValidateConsent(...) == true": it decoded.
        "T2-13": { _, _ in },
        // "asserted only: getPubPurposesConsent() has exactly 1 entry"
        "S-03": { decoded, entry in
            XCTAssertEqual(decoded.publisherTC?.purposesConsent.ids.count, 1, entry.id)
        },
    ]

    /// Section D's refusals. Upstream's messages are go-gdpr's and iabtcf-java's; these are the
    /// reasons this decoder names for the same strings. Bits count in whole bytes, as TCF pads
    /// to bytes ("28 bytes" is 224 bits).
    static let refusals: [String: ConsentStringError] = [
        // "vendor consent strings are at least 29 bytes long. This one was 28"
        "X-01": .truncated(field: "core.vendorConsents.maxVendorId", atBit: 213, needed: 16, available: 11),
        // "the consent string encoded a Version of 1"
        "X-02": .tcfVersion1,
        // go-gdpr refuses its VendorListVersion of 0. This decoder reads 0 as it is (the IAB's GPP
        // libraries write it: gpp-vectors.md G-06, G-10), and refuses the string for what else
        // it lacks: go-gdpr's baseline (X-01...X-07) ends before NumPubRestrictions, which go-gdpr
        // does not read when it parses.
        "X-03": .truncated(field: "core.publisherRestrictions.numPubRestrictions", atBit: 253, needed: 12, available: 3),
        // "a BitField for 60 vendors requires a consent string of 36 bytes. This consent string had 30"
        "X-04": .truncated(field: "core.vendorConsents.bitField", atBit: 230, needed: 60, available: 10),
        // "vendor consent strings using RangeSections require at least 31 bytes. Got 30"
        "X-05": .truncated(field: "core.vendorConsents.rangeEntries.numEntries", atBit: 230, needed: 12, available: 10),
        // "bit 242 range entry excludes vendor 0"
        "X-06": .vendorIdZero(field: "core.vendorConsents.rangeEntries[0]", atBit: 242),
        // "bit 242 range entry excludes vendors [2, 1]. The start should be less than the end"
        "X-07": .rangeEndBeforeStart(field: "core.vendorConsents.rangeEntries[0]", start: 2, end: 1, atBit: 242),
        // "declares 10 vendors (BitField) but the vendor-LI section is missing"
        "X-08": .truncated(field: "core.vendorLegitimateInterests.isRangeEncoding", atBit: 256, needed: 1, available: 0),
        // "RangeSection with 6 entries, vendor-LI section missing"
        "X-09": .truncated(field: "core.vendorLegitimateInterests.isRangeEncoding", atBit: 360, needed: 1, available: 0),
        // "invalid base64url character"
        "X-10": .badBase64Character(field: "core", character: "/", offset: 0),
        // "1 byte only": its version, 1, is read first, and refuses it.
        "X-11": .tcfVersion1,
        // "version 2 but truncated"
        "X-12": .truncated(field: "core.created", atBit: 6, needed: 36, available: 2),
        // "<any invalid>": the page's placeholder, itself not base64url.
        "X-13": .badBase64Character(field: "core", character: "<", offset: 0),
    ]
}
