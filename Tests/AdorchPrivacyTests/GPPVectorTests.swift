import AdorchPrivacy
import Foundation
import XCTest

/// Every vector of shared/data/consent/gpp-vectors.md: GPP strings (header and sections), US
/// National sections on their own, refused GPP strings, and the US Privacy tables.
final class GPPVectorTests: XCTestCase {
    func testEveryGPPStringDecodesAsThePageSays() throws {
        let page = try VectorMarkdown.load("gpp-vectors.md")
        let strings = page.entries.filter { $0.id.hasPrefix("G-") }
        XCTAssertEqual(strings.count, 10, "section A")
        for entry in strings {
            let decoded: GPPString
            do {
                decoded = try GPPString.decode(entry.string)
            } catch {
                XCTFail("\(entry.id): refused: \(error)")
                continue
            }
            // "Header decoded here: type 3, version 1, section ids [2, 6]"
            let header = try XCTUnwrap(entry.bullets["Header decoded here"], entry.id)
            XCTAssertTrue(header.hasPrefix("type 3, version 1, section ids "), entry.id)
            XCTAssertEqual(decoded.sectionIds, VectorNotation.numbers(String(header.dropFirst("type 3, version 1, section ids ".count))), entry.id)
            // The title names each id: "sections [2=tcfeuv2, 6=uspv1]" (or "[none]").
            let named = entry.title.replacingOccurrences(of: "sections [", with: "").dropLast().components(separatedBy: ", ")
            XCTAssertEqual(decoded.sectionIds.map { "\($0)=\(GPPSection.name(of: $0))" }, named == ["none"] ? [] : named, entry.id)
            // Sections 2, 6 and 7 are decoded; every other one is kept, unsupported, as sent.
            for (id, section) in zip(decoded.sectionIds, decoded.sections) {
                switch (id, section) {
                case (GPPSection.tcfEuV2ID, .tcfEuV2), (GPPSection.usPrivacyID, .usPrivacy), (GPPSection.usNationalID, .usNational): break
                case (_, .unsupported(let unsupportedId, let encoded)):
                    XCTAssertEqual(unsupportedId, id, entry.id)
                    XCTAssertTrue(entry.string.contains("~\(encoded)"), entry.id)
                default: XCTFail("\(entry.id): section \(id) decoded as \(section)")
                }
            }
            guard let check = Self.explicitChecks[entry.id] else { XCTFail("\(entry.id): no check for \(entry.bullets["Asserted upstream"] ?? "")"); continue }
            try check(decoded, try XCTUnwrap(entry.bullets["Asserted upstream"], entry.id))
        }
    }

    /// "Asserted upstream", which the page words in prose for GPP, per vector.
    static let explicitChecks: [String: @Sendable (GPPString, String) throws -> Void] = [
        // "hasSection(uspv1|tcfeuv2|tcfcav1) = false (header only, no sections)"
        "G-01": { decoded, _ in
            XCTAssertTrue(decoded.sections.isEmpty)
            XCTAssertNil(decoded.usPrivacy)
            XCTAssertNil(decoded.tcfEuV2)
        },
        // "getSectionIds() = [6]; uspv1 Notice='Y', OptOutSale='N', LspaCovered='N'; no tcfeuv2/tcfcav1"
        "G-02": { decoded, _ in
            XCTAssertEqual(decoded.usPrivacy, USPrivacy(notice: .yes, optOutSale: .no, lspaCovered: .no))
            XCTAssertNil(decoded.tcfEuV2)
        },
        "G-03": { decoded, asserted in try checkTcfEuV2Listing(asserted, decoded.tcfEuV2, "G-03") },
        "G-04": { decoded, asserted in
            XCTAssertEqual(decoded.usPrivacy, USPrivacy(notice: .yes, optOutSale: .no, lspaCovered: .no), "G-04")
            try checkTcfEuV2Listing(asserted, decoded.tcfEuV2, "G-04")
        },
        // "uspv1 Y/N/N; tcfeuv2 as above (CmpId 880, VLV 48); tcfcav1 (id 5): …". TCF Canada is
        // a section this library does not decode: it is kept as sent (checked above), and its
        // fields are not checked.
        "G-05": { decoded, _ in
            XCTAssertEqual(decoded.usPrivacy, USPrivacy(notice: .yes, optOutSale: .no, lspaCovered: .no), "G-05")
            XCTAssertEqual(decoded.tcfEuV2?.cmpId, 880, "G-05")
            XCTAssertEqual(decoded.tcfEuV2?.vendorListVersion, 48, "G-05")
            XCTAssertEqual(decoded.section(5), .unsupported(id: 5, encoded: "BPSG_8APSG_8AAyACAENGdCgf_gfgAfgfgBgABABAAABAB4AACACAAA.fHHHA4444ao"), "G-05")
        },
        // "tcfeuv2 VendorConsents = [1, 173, 722] (range-encoded)"
        "G-06": { decoded, _ in
            XCTAssertEqual(decoded.tcfEuV2?.vendorConsents.vendors.ids, [1, 173, 722], "G-06")
            XCTAssertEqual(decoded.tcfEuV2?.vendorConsents.encoding, .range, "G-06")
        },
        // "usnat (id 7) SensitiveDataProcessing = [1 ×16], KnownChildSensitiveDataConsents = [1, 1, 1]"
        "G-07": { decoded, _ in
            XCTAssertEqual(decoded.usNational?.version, 2, "G-07")
            XCTAssertEqual(decoded.usNational?.sensitiveDataProcessing, Array(repeating: 1, count: 16), "G-07")
            XCTAssertEqual(decoded.usNational?.knownChildSensitiveDataConsents, [1, 1, 1], "G-07")
        },
        // "usnat (id 7, section version 1) SensitiveDataProcessing = [1 ×12], KnownChildSensitiveDataConsents = [1, 1]"
        "G-08": { decoded, _ in
            XCTAssertEqual(decoded.usNational?.version, 1, "G-08")
            XCTAssertEqual(decoded.usNational?.sensitiveDataProcessing, Array(repeating: 1, count: 12), "G-08")
            XCTAssertEqual(decoded.usNational?.knownChildSensitiveDataConsents, [1, 1], "G-08")
        },
        "G-09": { decoded, asserted in try checkTcfEuV2Listing(asserted, decoded.tcfEuV2, "G-09") },
        // "hasSection = true for tcfeuv2, … usmn (every section at its default value)": all 20 are
        // there (checked above); the three decoded ones hold their defaults.
        "G-10": { decoded, _ in
            XCTAssertEqual(decoded.sections.count, 20, "G-10")
            XCTAssertEqual(decoded.tcfEuV2?.vendorConsents.vendors.isEmpty, true, "G-10")
            XCTAssertEqual(decoded.usPrivacy, USPrivacy(notice: .notApplicable, optOutSale: .notApplicable, lspaCovered: .notApplicable), "G-10")
            XCTAssertEqual(decoded.usNational?.saleOptOut, 0, "G-10")
            XCTAssertEqual(decoded.usNational?.mspaCoveredTransaction, 1, "G-10")
            XCTAssertEqual(decoded.usNational?.gpc, false, "G-10")
        },
    ]

    /// "tcfeuv2: version 2, CmpId 880, CmpVersion 0, …, Created = LastUpdated = 2022-01-01T00:00:00Z".
    static func checkTcfEuV2Listing(_ asserted: String, _ tcf: TCString?, _ id: String) throws {
        let tcf = try XCTUnwrap(tcf, "\(id): no tcfeuv2 section")
        let listing = try XCTUnwrap(asserted.components(separatedBy: "tcfeuv2: ").last, id)
        for item in listing.components(separatedBy: ", ") {
            if item.hasPrefix("Created = LastUpdated = ") {
                let moment = VectorNotation.deciseconds(String(item.dropFirst("Created = LastUpdated = ".count)))
                XCTAssertEqual(tcf.createdDeciseconds, moment, id)
                XCTAssertEqual(tcf.lastUpdatedDeciseconds, moment, id)
                continue
            }
            let parts = item.components(separatedBy: " ")
            let (key, value) = parts.count == 2 ? (parts[0], parts[1]) : ("ConsentLanguage", item)
            let context = "\(id): tcfeuv2 \(key)"
            switch key {
            case "version": XCTAssertEqual(tcf.version, Int(value), context)
            case "CmpId": XCTAssertEqual(tcf.cmpId, Int(value), context)
            case "CmpVersion": XCTAssertEqual(tcf.cmpVersion, Int(value), context)
            case "ConsentScreen": XCTAssertEqual(tcf.consentScreen, Int(value), context)
            case "ConsentLanguage": XCTAssertEqual(tcf.consentLanguage, value, context)
            case "VendorListVersion": XCTAssertEqual(tcf.vendorListVersion, Int(value), context)
            case "PolicyVersion": XCTAssertEqual(tcf.tcfPolicyVersion, Int(value), context)
            case "IsServiceSpecific": XCTAssertEqual(tcf.isServiceSpecific, Bool(value), context)
            case "UseNonStandardStacks": XCTAssertEqual(tcf.useNonStandardTexts, Bool(value), context)
            case "PurposeOneTreatment": XCTAssertEqual(tcf.purposeOneTreatment, Bool(value), context)
            case "PublisherCountryCode": XCTAssertEqual(tcf.publisherCC, value, context)
            default: XCTFail("\(context): no check for \(item)")
            }
        }
    }

    /// N-01 and N-02: the usnat section on its own, against iabgpp-java's assertions. iabgpp-java
    /// widens a 12/2 reading to 16/3 with zeros, so a shorter list here must match its start,
    /// the rest of upstream's being 0; and it reports an absent GPC subsection as false.
    func testUSNationalSectionsDecodeAsIabgppJavaAsserts() throws {
        let page = try VectorMarkdown.load("gpp-vectors.md")
        let sections = page.entries.filter { $0.id.hasPrefix("N-") }
        XCTAssertEqual(sections.count, 2, "section B")
        for entry in sections {
            let decoded = try USNational.decode(entry.string)
            let asserted = try XCTUnwrap(entry.bullets["Asserted upstream (iabgpp-java)"], entry.id)
            let pattern = try NSRegularExpression(pattern: #"(\w+) (\[[^\]]*\]|\w+)"#)
            let matches = pattern.matches(in: asserted, range: NSRange(asserted.startIndex..., in: asserted))
            XCTAssertEqual(matches.count, 16, entry.id)
            for match in matches {
                let key = String(asserted[Range(match.range(at: 1), in: asserted)!])
                let value = String(asserted[Range(match.range(at: 2), in: asserted)!])
                let context = "\(entry.id): \(key)"
                let fields: [String: Int] = [
                    "SharingNotice": decoded.sharingNotice, "SaleOptOutNotice": decoded.saleOptOutNotice,
                    "SharingOptOutNotice": decoded.sharingOptOutNotice,
                    "TargetedAdvertisingOptOutNotice": decoded.targetedAdvertisingOptOutNotice,
                    "SensitiveDataProcessingOptOutNotice": decoded.sensitiveDataProcessingOptOutNotice,
                    "SensitiveDataLimitUseNotice": decoded.sensitiveDataLimitUseNotice, "SaleOptOut": decoded.saleOptOut,
                    "SharingOptOut": decoded.sharingOptOut, "TargetedAdvertisingOptOut": decoded.targetedAdvertisingOptOut,
                    "PersonalDataConsents": decoded.personalDataConsents, "MspaCoveredTransaction": decoded.mspaCoveredTransaction,
                    "MspaOptOutOptionMode": decoded.mspaOptOutOptionMode, "MspaServiceProviderMode": decoded.mspaServiceProviderMode,
                ]
                let lists = ["SensitiveDataProcessing": decoded.sensitiveDataProcessing,
                             "KnownChildSensitiveDataConsents": decoded.knownChildSensitiveDataConsents]
                if let mine = fields[key] {
                    XCTAssertEqual(mine, Int(value), context)
                } else if let mine = lists[key] {
                    let theirs = try XCTUnwrap(VectorNotation.numbers(value), context)
                    XCTAssertEqual(mine + Array(repeating: 0, count: max(0, theirs.count - mine.count)), theirs, context)
                } else if key == "Gpc" {
                    XCTAssertEqual(decoded.gpc ?? false, Bool(value), context)
                } else {
                    XCTFail("\(context): no check for \(value)")
                }
            }
        }
    }

    /// Section C's refusals, with the reason this decoder names for each.
    func testMalformedGPPStringsAreRefused() throws {
        let page = try VectorMarkdown.load("gpp-vectors.md")
        let expected: [String: ConsentStringError] = [
            // "DecodingException (on getHeader())": a space is not base64url.
            "GX-01": .badBase64Character(field: "header", character: " ", offset: 7),
            // "z" is 51: not the header's type.
            "GX-02": .unexpectedValue(field: "header.type", found: 51, expected: "3 (the GPP header)"),
            // "type 3, version 15, so this is not a GPP v1 header"
            "GX-03": .unsupportedVersion(field: "header.version", found: 15, supported: [1]),
            // "The number of sections does not match": `~~` leaves two sections for three ids.
            "GX-04": .sectionCountMismatch(declared: 3, present: 2),
            // "header announces 3 sections [2,5,6], only 2 present"
            "GX-05": .sectionCountMismatch(declared: 3, present: 2),
        ]
        let rows = page.rows(matching: #"^GX-\d+$"#)
        XCTAssertEqual(rows.count, expected.count)
        for row in rows {
            XCTAssertThrowsError(try GPPString.decode(row[1]), row[0]) { error in
                XCTAssertEqual(error as? ConsentStringError, expected[row[0]], "\(row[0]): \(error)")
            }
        }
    }

    /// Section D: Prebid Server's two tables and iabgpp-java's UspV1Test bullets.
    func testUSPrivacyStringsDecodeAsThePageSays() throws {
        let page = try VectorMarkdown.load("gpp-vectors.md")
        // The page writes the empty string as `""` (empty).
        func decode(_ cell: String) throws -> USPrivacy? { try USPrivacy.decode(cell.hasSuffix("(empty)") ? "" : cell) }

        // | string | line | description | opt-out sale | error (verbatim) |
        let parsed = page.rows.filter { $0.count == 5 && ["true", "false"].contains($0[3]) }
        XCTAssertEqual(parsed.count, 12, "TestParseConsent")
        let reasons: [(String, (Character) -> USPrivacyError)] = [
            ("must contain 4 characters", { _ in .wrongLength(found: 3) }),
            ("must specify version 1", { .unsupportedVersion(found: $0) }),
            ("for the explicit notice", { .badFlag(field: .notice, found: $0) }),
            ("for the opt-out sale", { .badFlag(field: .optOutSale, found: $0) }),
            ("for the limited service provider agreement", { .badFlag(field: .lspaCovered, found: $0) }),
        ]
        for row in parsed {
            let (string, optOut, error) = (row[0], row[3] == "true", row[4])
            if error == "—" {
                XCTAssertEqual(try decode(string)?.optedOutOfSale ?? false, optOut, string)
                continue
            }
            let reason = try XCTUnwrap(reasons.first { error.contains($0.0) }, "\(string): no reason for \(error)")
            // The offending character: the version's, or the flag's the message names.
            let place = ["for the explicit notice": 1, "for the opt-out sale": 2, "for the limited service provider agreement": 3][reason.0] ?? 0
            let character = Array(string)[min(place, string.count - 1)]
            XCTAssertThrowsError(try decode(string), string) { thrown in
                XCTAssertEqual(thrown as? USPrivacyError, reason.1(character), "\(string): \(thrown)")
            }
        }

        // | string | line | description | valid |
        let validated = page.rows.filter { $0.count == 4 && ["true", "false"].contains($0[3]) }
        XCTAssertEqual(validated.count, 4, "TestValidateConsent")
        for row in validated {
            // Valid: not refused (the empty string decodes to no signal).
            let refused: Bool
            do { _ = try decode(row[0]); refused = false } catch { refused = true }
            XCTAssertEqual(!refused, row[3] == "true", row[0])
        }

        // "- `1NYN` (L39): Version 1, Notice 'N', OptOutSale 'Y', LspaCovered 'N'."
        let bullets = page.lines.filter { $0.range(of: #"^- `1...` \(L\d+\): Version 1,"#, options: .regularExpression) != nil }
        XCTAssertEqual(bullets.count, 2, "UspV1Test")
        for bullet in bullets {
            let string = String(bullet.dropFirst(3).prefix(4))
            let quoted = bullet.split(separator: "'").enumerated().filter { $0.offset % 2 == 1 }.map { Character(String($0.element)) }
            let decoded = try XCTUnwrap(try USPrivacy.decode(string), string)
            XCTAssertEqual([decoded.notice.rawValue, decoded.optOutSale.rawValue, decoded.lspaCovered.rawValue], quoted, string)
        }
    }
}
