import AdorchBench
import Foundation
import XCTest

/// Short versions of `make soak` and `make cycles` against the debug build: the same clients,
/// misbehaving and blocking plugins, reloads and checks, for seconds instead of half an hour.
final class SoakAndCyclesTests: XCTestCase {
    private let products = Bundle.main.bundleURL

    func testAShortSoakLosesNoReplyAndGivesBackEveryFile() throws {
        let soak = Soak(adorchd: products.appendingPathComponent("adorchd").path, pluginDir: products.path, duration: .seconds(20),
                        clients: 40, reloadEvery: .seconds(5), sampleEvery: .seconds(5), thinkTime: .milliseconds(20), crashAt: 5)
        var lines: [String] = []
        let result = try soak.run { lines.append($0) }
        XCTAssertTrue(result.passed, result.report)
        XCTAssertTrue(result.report.contains("lost replies: 0\n"), result.report)
        let reloads = result.report.split(separator: "\n").first { $0.hasPrefix("reloads: ") }?.split(separator: " ") ?? []
        XCTAssertTrue(reloads.count >= 4 && reloads[1] == reloads[3] && Int(reloads[1]) ?? 0 >= 3, "a reload every 5 s, all applied: \(result.report)")
        XCTAssertTrue(result.report.contains("adorchd: exit 0"), result.report)
        // Every kind of call was answered, errors included: the mix is what it claims.
        for kind in ["ok ", "AdNotValid ", "SlotNotFound "] { XCTAssertTrue(result.report.contains(kind), "\(kind)in \(result.report)") }
        guard result.samples.count >= 4 else { return XCTFail("\(result.samples.count) samples, 4 at least: \(lines.joined(separator: "\n"))") }
        XCTAssertTrue(result.samples.allSatisfy { $0.rss > 0 && $0.fds > 0 }, "\(result.samples)")
        XCTAssertGreaterThan(result.samples.map(\.fds).max() ?? 0, result.samples[0].fds / 2, "clients' connections show in the fds")
        // The crashing isolated plugin crashed, and the hosts were counted: sim's and stuck's, and
        // the crashing one's while it is up. A reload starts a changed plugin's new host before
        // its old one has stopped, so for a moment each of the three may have two (a sample
        // once saw 5). None is left over: the census at the end is exact.
        XCTAssertGreaterThan(result.samples.last?.crashes ?? 0, 0, lines.joined(separator: "\n"))
        XCTAssertTrue(result.samples.allSatisfy { (2...6).contains($0.hosts) }, lines.joined(separator: "\n"))
        XCTAssertTrue(result.report.contains("0 zombies, 0 left running after adorchd stopped"), result.report)
    }

    func testCyclesEndWithExactlyTheBuffersLive() throws {
        let cycles = Cycles(adorchd: products.appendingPathComponent("adorchd").path, pluginDir: products.path, cycles: 5_000,
                            connections: 8)
        let result = try cycles.run { _ in }
        XCTAssertTrue(result.passed, result.report)
        XCTAssertTrue(result.report.contains("5000 shown, 5000 destroyed, 20 live; the buffers hold 20"), result.report)
    }
}
