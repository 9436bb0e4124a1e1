import AdorchPrivacy
import Foundation
import XCTest

/// Generated TC strings decoded by TCString and by PyPI's iab-tcf (a separate implementation,
/// in Python): every field must agree between the two, and with the model the string came from.
final class TCFDifferentialTests: XCTestCase {
    static let cases = 1_500
    /// The test's folder: Reference/iab_tcf_decode.py is beside this file.
    static let testFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

    func testGeneratedStringsDecodeAsIabTcfDecodesThem() throws {
        try XCTSkipUnless(Self.python(["-c", "import iab_tcf"]).status == 0,
                          "python3 with PyPI's iab-tcf is needed (scripts/install-deps.sh installs it)")

        // A new seed each run, printed; ADORCH_PRIVACY_SEED replays one.
        let seed = ProcessInfo.processInfo.environment["ADORCH_PRIVACY_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        print("TCFDifferentialTests: seed \(seed) (ADORCH_PRIVACY_SEED=\(seed) replays it)")
        var rng = SeededGenerator(seed: seed)
        let models = (0..<Self.cases).map { _ in TCModel.random(using: &rng) }
        let strings = models.map { $0.encoded() }

        let list = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-tcf-\(getpid())-\(seed).txt")
        try strings.joined(separator: "\n").appending("\n").write(to: list, atomically: true, encoding: .ascii)
        defer { try? FileManager.default.removeItem(at: list) }
        let run = try Self.python([Self.testFolder.appendingPathComponent("Reference/iab_tcf_decode.py").path, list.path])
        XCTAssertEqual(run.status, 0, "iab-tcf failed (seed \(seed)): \(run.error)")
        let references = run.output.split(separator: "\n")
        XCTAssertEqual(references.count, strings.count, "iab-tcf decoded \(references.count) of \(strings.count) strings (seed \(seed))")

        var disagreements = 0
        for (index, (model, reference)) in zip(models, references).enumerated() {
            let string = strings[index]
            let decoded: TCString
            do {
                decoded = try TCString.decode(string)
            } catch {
                XCTFail("case \(index) (seed \(seed)): \(string) refused: \(error)")
                disagreements += 1
                continue
            }
            let expected = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(reference.utf8)) as? [String: Any])
            let differences = Self.compare(decoded, expected) + Self.compare(decoded, model)
            if !differences.isEmpty {
                disagreements += 1
                XCTFail("case \(index) (seed \(seed)): \(string)\n  " + differences.joined(separator: "\n  "))
                if disagreements >= 10 { break }
            }
        }
        print("TCFDifferentialTests: \(strings.count - disagreements) of \(strings.count) generated strings agree with iab-tcf and with their model")
    }

    /// Field by field, against iab-tcf's JSON (Reference/iab_tcf_decode.py's names).
    static func compare(_ decoded: TCString, _ json: [String: Any]) -> [String] {
        var differences: [String] = []
        func check<T: Equatable>(_ name: String, _ mine: T, _ theirs: Any?) {
            if (theirs as? T) != mine { differences.append("\(name): decoded \(mine), iab-tcf \(String(describing: theirs))") }
        }
        func runs(_ set: IDSet) -> [[Int]] { set.ranges.map { [$0.lowerBound, $0.upperBound] } }
        func checkRuns(_ name: String, _ mine: IDSet, _ theirs: Any?) { check(name, runs(mine), theirs as? [[Int]]) }
        func checkVendors(_ name: String, _ mine: VendorSection) {
            let theirs = json[name] as? [String: Any]
            check("\(name).maxVendorId", mine.maxVendorId, theirs?["max"])
            check("\(name).isRangeEncoding", mine.encoding == .range, theirs?["range"])
            checkRuns("\(name).vendors", mine.vendors, theirs?["ids"])
        }
        check("version", decoded.version, json["version"])
        // iab-tcf keeps whole seconds.
        check("created", decoded.createdDeciseconds / 10, json["created"])
        check("lastUpdated", decoded.lastUpdatedDeciseconds / 10, json["lastUpdated"])
        check("cmpId", decoded.cmpId, json["cmpId"])
        check("cmpVersion", decoded.cmpVersion, json["cmpVersion"])
        check("consentScreen", decoded.consentScreen, json["consentScreen"])
        check("consentLanguage", decoded.consentLanguage, json["consentLanguage"])
        check("vendorListVersion", decoded.vendorListVersion, json["vendorListVersion"])
        check("tcfPolicyVersion", decoded.tcfPolicyVersion, json["tcfPolicyVersion"])
        check("isServiceSpecific", decoded.isServiceSpecific, json["isServiceSpecific"])
        check("useNonStandardTexts", decoded.useNonStandardTexts, json["useNonStandardTexts"])
        checkRuns("specialFeatureOptIns", decoded.specialFeatureOptIns, json["specialFeatureOptIns"])
        checkRuns("purposesConsent", decoded.purposesConsent, json["purposesConsent"])
        checkRuns("purposesLITransparency", decoded.purposesLITransparency, json["purposesLITransparency"])
        check("purposeOneTreatment", decoded.purposeOneTreatment, json["purposeOneTreatment"])
        check("publisherCC", decoded.publisherCC, json["publisherCC"])
        checkVendors("vendorConsents", decoded.vendorConsents)
        checkVendors("vendorLegitimateInterests", decoded.vendorLegitimateInterests)
        let restrictions = json["publisherRestrictions"] as? [[String: Any]] ?? []
        check("publisherRestrictions.count", decoded.publisherRestrictions.count, restrictions.count)
        for (index, (mine, theirs)) in zip(decoded.publisherRestrictions, restrictions).enumerated() {
            check("publisherRestrictions[\(index)].purposeId", mine.purposeId, theirs["purposeId"])
            check("publisherRestrictions[\(index)].restrictionType", mine.restrictionType.rawValue, theirs["restrictionType"])
            checkRuns("publisherRestrictions[\(index)].vendors", mine.vendors, theirs["ids"])
        }
        check("disclosedVendors present", decoded.disclosedVendors != nil, json["disclosedVendors"] != nil)
        if let mine = decoded.disclosedVendors { checkRuns("disclosedVendors", mine.vendors, json["disclosedVendors"]) }
        check("allowedVendors present", decoded.allowedVendors != nil, json["allowedVendors"] != nil)
        if let mine = decoded.allowedVendors { checkRuns("allowedVendors", mine.vendors, json["allowedVendors"]) }
        check("publisherTC present", decoded.publisherTC != nil, json["publisherTC"] != nil)
        if let mine = decoded.publisherTC, let theirs = json["publisherTC"] as? [String: Any] {
            checkRuns("publisherTC.purposesConsent", mine.purposesConsent, theirs["purposesConsent"])
            checkRuns("publisherTC.purposesLITransparency", mine.purposesLITransparency, theirs["purposesLITransparency"])
            check("publisherTC.numCustomPurposes", mine.numCustomPurposes, theirs["numCustomPurposes"])
            checkRuns("publisherTC.customPurposesConsent", mine.customPurposesConsent, theirs["customPurposesConsent"])
            checkRuns("publisherTC.customPurposesLITransparency", mine.customPurposesLITransparency, theirs["customPurposesLITransparency"])
        }
        return differences
    }

    /// Against the model the string was made from: what iab-tcf drops (deciseconds, the reserved
    /// segments) is checked here, and so is every query.
    static func compare(_ decoded: TCString, _ model: TCModel) -> [String] {
        var differences: [String] = []
        func check<T: Equatable>(_ name: String, _ mine: T, _ expected: T) {
            if mine != expected { differences.append("\(name): decoded \(mine), generated \(expected)") }
        }
        func ids(_ entries: [ClosedRange<Int>]) -> [Int] { Set(entries.flatMap { Array($0) }).sorted() }
        check("created", decoded.createdDeciseconds, model.created)
        check("lastUpdated", decoded.lastUpdatedDeciseconds, model.lastUpdated)
        check("skippedSegmentTypes", decoded.skippedSegmentTypes, model.segmentOrder.filter { $0 > 3 })
        for purpose in 0...25 {
            check("purposeConsented(\(purpose))", decoded.purposeConsented(purpose), model.purposesConsent.contains(purpose))
            check("purposeLegitimateInterest(\(purpose))", decoded.purposeLegitimateInterest(purpose), model.purposesLI.contains(purpose))
        }
        for feature in 0...13 {
            check("specialFeatureOptedIn(\(feature))", decoded.specialFeatureOptedIn(feature), model.specialFeatures.contains(feature))
        }
        let consented = Set(ids(model.vendorConsents.entries)), interested = Set(ids(model.vendorLI.entries))
        for vendor in 0...(max(model.vendorConsents.maxVendorId, model.vendorLI.maxVendorId) + 1) {
            check("vendorConsented(\(vendor))", decoded.vendorConsented(vendor), consented.contains(vendor))
            check("vendorLegitimateInterest(\(vendor))", decoded.vendorLegitimateInterest(vendor), interested.contains(vendor))
        }
        check("disclosedVendors", decoded.disclosedVendors?.vendors.ids, model.disclosed.map { ids($0.entries) })
        check("allowedVendors", decoded.allowedVendors?.vendors.ids, model.allowed.map { ids($0.entries) })
        for restriction in model.restrictions {
            for entry in restriction.entries {
                let type = PublisherRestriction.RestrictionType(rawValue: restriction.type)!
                for vendor in [entry.lowerBound, entry.upperBound] where !decoded.isRestricted(purpose: restriction.purposeId, type: type, vendor: vendor) {
                    differences.append("isRestricted(purpose: \(restriction.purposeId), type: \(type), vendor: \(vendor)) is false")
                }
            }
        }
        return differences
    }

    /// python3 (the one on PATH, where scripts/install-deps.sh installs iab-tcf) with `arguments`.
    static func python(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let output = Pipe(), error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        // Read before waiting: the output is larger than a pipe's buffer.
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }
}
