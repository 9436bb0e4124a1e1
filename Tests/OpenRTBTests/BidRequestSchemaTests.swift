import AdorchJSON
import Foundation
import OpenRTB
import XCTest

/// Every BidRequest the builder makes, for every format and privacy case, validated against
/// IAB's OpenRTB 2.6 JSON Schema (../shared/data/openrtb/schema) by PyPI's jsonschema.
final class BidRequestSchemaTests: XCTestCase {
    func testEveryFormatAndPrivacyCaseIsAValidBidRequest() throws {
        _ = try SharedOpenRTB.data("schema/BidRequest.json")
        try XCTSkipUnless(try SharedOpenRTB.python(["-c", "import jsonschema, referencing"]).status == 0,
                          "python3 with PyPI's jsonschema is needed (scripts/install-deps.sh installs it)")
        var privacyCases: [(String, LoadPrivacy)] = [("none", LoadPrivacy())]
        var gdpr = LoadPrivacy()
        (gdpr.gdpr, gdpr.tcString, gdpr.privacyClass) = (1, "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA", .nonPersonalized)
        privacyCases.append(("gdpr", gdpr))
        var us = LoadPrivacy()
        (us.gdpr, us.gpp, us.gppSectionIDs, us.usPrivacy) = (0, "DBABzw~1YNN~BVVqAAEABCA", [6, 7], "1YNN")
        privacyCases.append(("us", us))
        var child = LoadPrivacy()
        (child.privacyClass, child.coppa) = (.childDirected, true)
        privacyCases.append(("child", child))

        var settings = BidRequestBuilderTests.settings()
        settings.device.width = 1920
        settings.device.height = 1080
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-openrtb-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var files: [String] = []
        for format in BidLoad.Format.allCases {
            for (name, privacy) in privacyCases {
                for test in [false, true] {
                    let load = BidLoad(format: format, loadUID: BidRequestBuilderTests.uid, adUnit: "u", width: format == .banner ? 300 : 0,
                                       height: format == .banner ? 250 : 0, count: format == .native ? 2 : 1, testMode: test, privacy: privacy)
                    let url = folder.appendingPathComponent("\(format)-\(name)-\(test).json")
                    try BidRequestBuilder(settings: settings).build(load).json.jsonData.write(to: url)
                    files.append(url.path)
                }
            }
        }
        // The control: a request the schema must refuse, so a validator that passes anything fails here.
        let broken = folder.appendingPathComponent("broken.json")
        try Data(#"{"id": "x", "imp": [{"video": {"w": 1}}], "tmax": "soon"}"#.utf8).write(to: broken)
        let run = try SharedOpenRTB.python([SharedOpenRTB.packageFolder.appendingPathComponent("Tests/openrtb/openrtb_schema.py").path,
                                            SharedOpenRTB.schemaFolder, "BidRequest"] + files + [broken.path])
        let lines = run.output.split(separator: "\n").compactMap { JSONValue.parse(Data($0.utf8)) }
        XCTAssertEqual(lines.count, files.count + 1, run.error)
        var valid = 0
        for line in lines {
            let file = line["file"]?.stringValue ?? ""
            let errors = line["errors"]?.arrayValue ?? []
            if file == broken.path {
                XCTAssertEqual(errors.count, 3, "the control: imp.id and video.mimes missing, tmax not an integer: \(errors)")
            } else if errors.isEmpty {
                valid += 1
            } else {
                XCTFail("\((file as NSString).lastPathComponent): \(errors)")
            }
        }
        XCTAssertEqual(valid, files.count)
        print("BidRequestSchemaTests: \(valid) of \(files.count) requests valid OpenRTB 2.6 (\(BidLoad.Format.allCases.count) formats × \(privacyCases.count) privacy cases × test mode)")
    }
}
