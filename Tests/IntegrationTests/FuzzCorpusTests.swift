import Foundation
import XCTest

/// The committed fuzz corpus, replayed through the plain builds of the fuzz targets: each
/// input that once mattered (seeds, and crash inputs once fixed) stays a regression test.
/// The fuzzing itself runs in scripts/fuzz.sh (make test: seconds; make fuzz: long).
final class FuzzCorpusTests: XCTestCase {
    func testEveryCorpusInputRunsThroughItsTarget() throws {
        for target in ["varlink", "config", "rewards"] {
            let corpus = packageRoot.appendingPathComponent("Fuzz/corpus/\(target)")
            let inputs = try FileManager.default.contentsOfDirectory(atPath: corpus.path).count
            XCTAssertGreaterThan(inputs, 0, target)
            let result = try runCommand(productsDirectory.appendingPathComponent("adorch-fuzz-\(target)").path, [corpus.path])
            XCTAssertEqual(result.status, 0, "\(target): \(result.stderr)")
            XCTAssertEqual(result.stdout, "\(inputs) inputs replayed, none crashed\n", target)
        }
    }
}
