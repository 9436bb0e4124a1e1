import AdorchPluginHost
import Foundation
import XCTest

/// adorch-plugin-validate, the real executable, against the real plugins: the well-behaved
/// ones pass clean in either isolation, and each of sim's misbehaviour switches fails the check for its rule.
final class PluginValidatorTests: XCTestCase {
    private struct Report: Decodable {
        struct Check: Decodable {
            var name: String
            var outcome: String
            var detail: String
        }
        var plugin: String
        var passed: Bool
        var checks: [Check]

        var failed: [Check] { checks.filter { $0.outcome == "fail" } }
        func check(_ name: String) -> Check? { checks.first { $0.name == name } }
    }

    private func plugin(_ name: String) -> String { productsDirectory.appendingPathComponent("libadorch-plugin-\(name).so").path }

    /// Runs the validator with --json; the report and the exit status.
    private func validate(_ plugin: String, _ arguments: [String] = []) throws -> (report: Report, status: Int32) {
        let run = try runCommand(productsDirectory.appendingPathComponent("adorch-plugin-validate").path, [plugin, "--json", "--call-bound-ms", String(validatorCallBoundMs)] + arguments)
        do {
            return (try JSONDecoder().decode(Report.self, from: Data(run.stdout.utf8)), run.status)
        } catch {
            throw TestFailure("adorch-plugin-validate \(arguments) exited \(run.status) without a report: \(error)\n\(run.stdout)\n\(run.stderr)")
        }
    }

    /// In each isolation: the checks are the same whether the plugin runs in a confined child or in the validator.
    private func assertPassesClean(_ plugin: String, _ arguments: [String] = [], minimumChecks: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        for isolation in PluginIsolation.allCases {
            try assertPassesCleanOnce(plugin, arguments + ["--isolation", isolation.rawValue], minimumChecks: minimumChecks, file: file, line: line)
        }
    }

    private func assertPassesCleanOnce(_ plugin: String, _ arguments: [String], minimumChecks: Int, file: StaticString, line: UInt) throws {
        let (report, status) = try validate(plugin, arguments)
        XCTAssertEqual(status, 0, "\(plugin): \(report.failed.map { "\($0.name): \($0.detail)" })", file: file, line: line)
        XCTAssertTrue(report.passed, file: file, line: line)
        XCTAssertEqual(report.failed.count, 0, file: file, line: line)
        XCTAssertGreaterThanOrEqual(report.checks.filter { $0.outcome == "pass" }.count, minimumChecks, "\(report.checks.map(\.name))", file: file, line: line)
        // Every part of the contract was exercised, not skipped for want of an ad.
        for part in ["entry", "init", "deinit, then init again", "time: no call blocks longer than \(validatorCallBoundMs) ms"] {
            XCTAssertEqual(report.check(part)?.outcome, "pass", "\(part): \(report.check(part)?.detail ?? "missing")", file: file, line: line)
        }
        XCTAssertEqual(report.checks.first { $0.name.hasPrefix("resources after ") }?.outcome, "pass", file: file, line: line)
        XCTAssertEqual(report.checks.filter { $0.name.hasSuffix(": show a loaded ad") && $0.outcome != "pass" }.map(\.name), [], file: file, line: line)
    }

    func testTheCPluginExamplePassesClean() throws {
        try assertPassesClean(plugin("example"), minimumChecks: 25)
    }

    func testTheSwiftPluginPassesClean() throws {
        try assertPassesClean(plugin("swift-example"), minimumChecks: 25)
    }

    /// sim with its default (well-behaved) settings, every format it claims, 10,000 cycles.
    func testSimPassesCleanOnEveryFormat() throws {
        let (report, _) = try validate(plugin("sim"), ["--format", "banner", "--iterations", "0"])
        XCTAssertEqual(report.checks.filter { $0.name.hasPrefix("banner: ") }.count, 8, "--format limits the checks: \(report.checks.map(\.name))")
        try assertPassesClean(plugin("sim"), minimumChecks: 70)
    }

    /// vast against a VAST server on loopback; its tracking URLs point there too.
    func testVASTPassesCleanAgainstALoopbackAdServer() throws {
        let server = try AdServer()
        try server.put("inline.xml", server.docs.inline())
        try assertPassesClean(plugin("vast"), ["--server-parameter", "tag_url=\(server.base)/vast/inline.xml", "--iterations", "2000"], minimumChecks: 35)
        XCTAssertFalse(try server.log().filter { $0.hasPrefix("/vast/inline.xml") }.isEmpty, "the plugin fetched its documents from the server")
    }

    /// Each misbehaviour fails the check that holds its rule, says what happened, and the
    /// exit status is 1.
    func testEachSimMisbehaviourFailsNamingTheBrokenRule() throws {
        let cases: [(parameter: String, extra: [String], check: String, says: String)] = [
            ("misbehave=never", ["--timeout-ms", "300"], "rewarded: load completes exactly once", "no loaded or failed within its 300 ms deadline"),
            ("misbehave=twice", [], "callbacks: completion exactly once: a second loaded/failed for one load", "violations, the first: ad 1"),
            ("misbehave=after_destroy", [], "callbacks: no report after ad_destroy returned", "after its ad_destroy returned"),
            ("misbehave=empty_payload", [], "rewarded: payload", "the payload is empty"),
            ("misbehave=leak", [], "resources after 3000 cycles", "grew"),
            ("block_ms=\(validatorCallBoundMs + 30)", ["--iterations", "50"], "time: no call blocks longer than \(validatorCallBoundMs) ms", "over the bound: ad_load"),
        ]
        for c in cases {
            let arguments = ["--format", "rewarded", "--iterations", "3000", "--server-parameter", c.parameter] + c.extra
            let (report, status) = try validate(plugin("sim"), arguments)
            XCTAssertEqual(status, 1, c.parameter)
            XCTAssertFalse(report.passed, c.parameter)
            let check = report.check(c.check)
            XCTAssertEqual(check?.outcome, "fail", "\(c.parameter): \(report.failed.map { "\($0.name): \($0.detail)" })")
            XCTAssertEqual(check?.detail.contains(c.says), true, "\(c.parameter): \(check?.detail ?? "no check \(c.check)")")
        }
    }

    /// plugin.h's answers, held to the plugin: an answer ADORCH_DEADLINE_MARGIN_MS before the
    /// deadline (rule 3), a self-tracked impression reported once, and a trans_id that does not
    /// repeat across two runs of the plugin (ADORCH_EVENT_REWARD, request.load_uid).
    func testTheValidatorHoldsPluginsToTheHeadersAnswers() throws {
        let deadline = "deadline: answered 50 ms before it"
        let impressions = "impressions: a self-tracking plugin reports each once"
        let transID = "rewards: trans_id unique across a host restart"
        let cases: [(parameter: String, check: String, outcome: String, says: String)] = [
            ("tracks=1 reward=network", impressions, "pass", "one IMPRESSION"),
            ("tracks=1 reward=network", transID, "pass", "run's ad 1: sim-"),
            ("latency_ms=5", deadline, "pass", "deadline 500 ms: loaded after"),
            ("latency_ms=700 give_up=1", deadline, "pass", "failed 5 (network code 10002: timeout) after "),
            ("latency_ms=700", deadline, "fail", "no loaded or failed by 450 ms, its 500 ms deadline less the margin"),
            ("tracks=1 impression_twice=1", impressions, "fail", "IMPRESSION 2 times for one ad: the host counts one"),
            ("reward=network ad_id_trans_id=1", transID, "fail", "got trans_id sim-1-1 in both runs"),
        ]
        for c in cases {
            let (report, _) = try validate(plugin("sim"), ["--format", "rewarded", "--iterations", "0", "--server-parameter", c.parameter])
            let check = report.check(c.check)
            XCTAssertEqual(check?.outcome, c.outcome, "\(c.parameter): \(check?.detail ?? "no check \(c.check)")")
            XCTAssertEqual(check?.detail.contains(c.says), true, "\(c.parameter): \(check?.detail ?? "no check \(c.check)")")
        }
    }

    /// The text output: one line per check, a summary, and the exit status.
    func testLinesOnePerCheckAndAClearSummary() throws {
        let validator = productsDirectory.appendingPathComponent("adorch-plugin-validate").path
        let run = try runCommand(validator, [plugin("sim"), "--format", "rewarded", "--iterations", "0", "--server-parameter", "misbehave=empty_payload"])
        XCTAssertEqual(run.status, 1)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("FAIL  rewarded: payload: the payload is empty (it must be a JSON object)"), run.stdout)
        XCTAssertTrue(lines.dropLast().allSatisfy { $0.hasPrefix("PASS  ") || $0.hasPrefix("FAIL  ") || $0.hasPrefix("SKIP  ") }, run.stdout)
        // Skipped: the resources, and the impression and trans_id checks, which need a valid payload.
        XCTAssertEqual(lines.last?.hasSuffix("passed, 1 failed, 3 skipped"), true, run.stdout)
        XCTAssertTrue(lines.contains("SKIP  resources after 0 cycles: asked for no cycles (--iterations 0)"), run.stdout)
    }

    /// Wrong arguments are refused with exit status 64 (EX_USAGE) and a message; a library that is not a
    /// plugin fails the entry check with the reason.
    func testBadArgumentsAndAForeignLibraryAreNamed() throws {
        let validator = productsDirectory.appendingPathComponent("adorch-plugin-validate").path
        let refusals: [([String], String)] = [
            ([plugin("sim"), "--format", "popup"], "unknown format 'popup'"),
            ([plugin("sim"), "--config", "[1]"], "--config must be a JSON object"),
            (["/nonexistent/libx.so"], "no such file: /nonexistent/libx.so"),
        ]
        for (arguments, says) in refusals {
            let run = try runCommand(validator, arguments)
            XCTAssertEqual(run.status, 64, "\(arguments)")
            XCTAssertTrue(run.stderr.contains(says), "\(arguments): \(run.stderr)")
        }
        let libz = ["/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/aarch64-linux-gnu/libz.so.1"].first { FileManager.default.fileExists(atPath: $0) }
        let foreign = try XCTUnwrap(libz, "zlib is part of every Debian system")
        let (report, status) = try validate(foreign)
        XCTAssertEqual(status, 1)
        XCTAssertEqual(report.checks.first?.outcome, "fail")
        XCTAssertEqual(report.checks.first?.detail.contains("adorch_plugin_entry"), true, report.checks.first?.detail ?? "")
    }
}
