import AdorchVarlink
import Foundation
import XCTest

/// Every budget in [limits] is where an operator looks for it: the shipped config names it
/// with its default, GetStatus reports that value, `adorchctl status` prints it, and the
/// README's [limits] paragraph lists it with the same default.
final class LimitsDocumentedTests: XCTestCase {
    /// `# key = value` lines of the shipped config's [limits] table.
    private func shippedLimits() throws -> [(key: String, value: String)] {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("etc/adorch/adorchd.toml"), encoding: .utf8)
        let table = try XCTUnwrap(text.components(separatedBy: "\n[limits]\n").last).components(separatedBy: "\n[").first ?? ""
        return table.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 4, parts[0] == "#", parts[2] == "=" else { return nil }
            return (String(parts[1]), String(parts[3]))
        }
    }

    func testEveryBudgetIsInTheStatusAdorchctlAndTheReadmeWithItsDefault() throws {
        let limits = try shippedLimits()
        XCTAssertGreaterThanOrEqual(limits.count, 15, "the shipped [limits] lists every budget: \(limits)")
        let daemon = try DaemonProcess()
        let status = try daemon.status()["limits"]
        let ctl = try runCommand(productsDirectory.appendingPathComponent("adorchctl").path, ["status"],
                                 environment: ["ADORCH_SOCKET": daemon.socket])
        XCTAssertEqual(ctl.status, 0, ctl.stderr)
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        for (key, value) in limits {
            let reported = status?[key]
            XCTAssertNotNil(reported, "GetStatus reports \(key)")
            XCTAssertEqual(reported?.intValue.map(String.init) ?? reported?.doubleValue.map { String(format: "%g", $0) }, value,
                           "GetStatus's \(key) is the shipped default")
            XCTAssertTrue(ctl.stdout.contains(" \(key)=\(value)"), "adorchctl status prints \(key)=\(value): \(ctl.stdout)")
            XCTAssertTrue(readme.contains("`\(key)` (\(value))"), "the README lists `\(key)` (\(value))")
        }
    }
}
