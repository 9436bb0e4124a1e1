import Foundation
import XCTest

/// docs/architecture.md is the map of the tree: every path it names exists, and it names every
/// target folder, every room of the daemon and of the plugin host, and every file the daemon
/// keeps outside its rooms. A folder added or moved without the page fails here.
final class ArchitectureDocTests: XCTestCase {
    func testTheArchitecturePageAndTheTreeAgree() throws {
        let page = try String(contentsOf: packageRoot.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let named = Set(try NSRegularExpression(pattern: #"`(Sources/[^`]+)`"#)
            .matches(in: page, range: NSRange(page.startIndex..., in: page))
            .map { String(page[Range($0.range(at: 1), in: page)!]) })
        XCTAssertFalse(named.isEmpty)
        for path in named.sorted() {
            XCTAssertTrue(FileManager.default.fileExists(atPath: packageRoot.appendingPathComponent(path).path), "docs/architecture.md names \(path), which does not exist")
        }
        func folders(_ relative: String) throws -> [String] {
            let url = packageRoot.appendingPathComponent(relative)
            return try FileManager.default.contentsOfDirectory(atPath: url.path).sorted().filter { name in
                var folder: ObjCBool = false
                return FileManager.default.fileExists(atPath: url.appendingPathComponent(name).path, isDirectory: &folder) && folder.boolValue
            }.map { "\(relative)/\($0)" }
        }
        for folder in try folders("Sources") + folders("Sources/AdorchDaemon") + folders("Sources/AdorchPluginHost") {
            XCTAssertTrue(named.contains(folder), "docs/architecture.md does not name \(folder)")
        }
        let daemon = packageRoot.appendingPathComponent("Sources/AdorchDaemon")
        for file in try FileManager.default.contentsOfDirectory(atPath: daemon.path).sorted() where file.hasSuffix(".swift") {
            XCTAssertTrue(page.contains("`\(file)`"), "docs/architecture.md does not place Sources/AdorchDaemon/\(file) in a room")
        }
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: packageRoot.appendingPathComponent("Sources/AdorchPluginHost").path)
            .filter { $0.hasSuffix(".swift") }.isEmpty, "every file of AdorchPluginHost is in the room of its execution context")
    }
}
