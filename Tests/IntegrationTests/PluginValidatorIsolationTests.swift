import Foundation
import XCTest

/// adorch-plugin-validate's two isolations against a plugin that crashes or hangs in ad_load:
/// isolated, each is a failed check naming the check and the signal, then the summary; in
/// process, the crash still ends the validator with the crash note.
final class PluginValidatorIsolationTests: XCTestCase {
    private var build: URL!
    private let validator = productsDirectory.appendingPathComponent("adorch-plugin-validate").path
    /// The first check that calls ad_load, where the fixture misbehaves.
    private let loadCheck = "interstitial: load completes exactly once"

    override func setUpWithError() throws {
        build = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-validator-isolation-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: build, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: build) }

    /// A plugin that keeps the contract (its loads find no fill) but for MISBEHAVE in ad_load
    /// and AT_EXIT as the process exits. It says so on stderr at init, to show that the
    /// plugin's own output passes through.
    private static let misbehavingPlugin = """
        #include <stdio.h>
        #include <stdlib.h>
        #include <unistd.h>
        #include "adorch/plugin.h"
        #ifndef AT_EXIT
        #define AT_EXIT
        #endif

        __attribute__((destructor)) static void misbehaving_at_exit(void) { AT_EXIT; }

        static int32_t misbehaving_init(const adorch_host *host, const char *config_json) {
            (void)host, (void)config_json;
            fputs("misbehaving plugin: init\\n", stderr);
            return 0;
        }
        static void misbehaving_deinit(void) {}
        static adorch_ad *misbehaving_ad_create(adorch_ad_id id, const adorch_request *request) {
            (void)id, (void)request;
            return malloc(1);
        }
        static int32_t misbehaving_ad_load(adorch_ad *ad) {
            (void)ad;
            MISBEHAVE;
            return ADORCH_ERROR_NO_FILL;
        }
        static int32_t misbehaving_ad_show(adorch_ad *ad, const char *context_json) {
            (void)ad, (void)context_json;
            return ADORCH_ERROR_NOT_READY;
        }
        static void misbehaving_ad_notify(adorch_ad *ad, uint32_t event, const char *detail_json) {
            (void)ad, (void)event, (void)detail_json;
        }
        static void misbehaving_ad_destroy(adorch_ad *ad) { free(ad); }

        ADORCH_PLUGIN_EXPORT const adorch_plugin_entry_t adorch_plugin_entry = {
            .abi_major = ADORCH_PLUGIN_ABI_MAJOR, .abi_minor = ADORCH_PLUGIN_ABI_MINOR,
            .struct_size = sizeof(adorch_plugin_entry_t), .name = "misbehaving", .version = "1.0.0",
            .description = "misbehaves in its first ad_load", .formats = ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL),
            .init = misbehaving_init, .deinit = misbehaving_deinit, .ad_create = misbehaving_ad_create,
            .ad_load = misbehaving_ad_load, .ad_show = misbehaving_ad_show, .ad_notify = misbehaving_ad_notify,
            .ad_destroy = misbehaving_ad_destroy,
        };
        """

    /// The fixture built with cc, ad_load doing `misbehave` and the exit `atExit` (C
    /// statements); the plugin's path.
    private func plugin(_ name: String, misbehave: String, atExit: String = "") throws -> String {
        let source = build.appendingPathComponent("\(name).c")
        try Self.misbehavingPlugin.write(to: source, atomically: true, encoding: .utf8)
        let output = build.appendingPathComponent("libadorch-plugin-\(name).so").path
        let run = try runCommand("/usr/bin/env", ["cc", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                                                  "-I", packageRoot.appendingPathComponent("Sources/CAdorchPlugin/include").path,
                                                  "-DMISBEHAVE=\(misbehave)", "-DAT_EXIT=\(atExit)", source.path, "-o", output])
        guard run.status == 0 else { throw TestFailure("cc \(name).c: \(run.stderr)") }
        return output
    }

    /// The crash must reach the validator as the signal: a sanitizer's own handler would catch
    /// it, report and exit 1, and the Swift runtime's backtracer would only slow it down.
    private let crashEnvironment: [String: String] = {
        let env = ProcessInfo.processInfo.environment
        let keep = ":handle_segv=0:handle_abort=0"
        return ["ASAN_OPTIONS": (env["ASAN_OPTIONS"] ?? "") + keep, "TSAN_OPTIONS": (env["TSAN_OPTIONS"] ?? "") + keep,
                "SWIFT_BACKTRACE": "enable=no"]
    }()

    private func validate(_ plugin: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try runCommand(validator, [plugin, "--call-bound-ms", String(validatorCallBoundMs)] + arguments, environment: crashEnvironment)
    }

    func testACrashInAnIsolatedPluginIsAFailedCheckNamingTheSignal() throws {
        for (name, misbehave, signal) in [("segv", "*(volatile int *)8 = 1", "SIGSEGV"), ("abort", "abort()", "SIGABRT")] {
            let crashing = try plugin(name, misbehave: misbehave)
            let run = try validate(crashing, ["--isolation", "process"])
            XCTAssertEqual(run.status, 1, "\(name): \(run.stdout)\n\(run.stderr)")
            let lines = run.stdout.split(separator: "\n").map(String.init)
            XCTAssertEqual(Array(lines.suffix(2)), ["FAIL  \(loadCheck): the plugin crashed its host (\(signal))",
                                                    "5 checks: 3 passed, 1 failed, 1 skipped"], "\(name): \(run.stdout)")
            XCTAssertTrue(lines.first?.hasPrefix("PASS  entry: misbehaving 1.0.0") ?? false, run.stdout)
            XCTAssertTrue(run.stderr.contains("misbehaving plugin: init"), "the plugin's own output passes through: \(run.stderr)")
            XCTAssertFalse(run.stderr.contains("crashed the validator"), run.stderr)
        }

        // The same as one JSON document.
        struct Report: Decodable {
            struct Check: Decodable, Equatable { var name, outcome, detail: String }
            var passed: Bool
            var checks: [Check]
        }
        let run = try validate(try plugin("segv-json", misbehave: "*(volatile int *)8 = 1"), ["--json"])
        XCTAssertEqual(run.status, 1, run.stderr)
        let report = try JSONDecoder().decode(Report.self, from: Data(run.stdout.utf8))
        XCTAssertFalse(report.passed)
        XCTAssertEqual(report.checks.last, Report.Check(name: loadCheck, outcome: "fail", detail: "the plugin crashed its host (SIGSEGV)"))
    }

    /// A crash after the last check, as the host exits, still fails the run.
    func testACrashAsTheIsolatedHostExitsFailsTheRun() throws {
        let crashing = try plugin("exit", misbehave: "(void)0", atExit: "*(volatile int *)8 = 1")
        // Each refused load is waited for until its deadline: a short one keeps this quick.
        let run = try validate(crashing, ["--iterations", "0", "--timeout-ms", "100"])
        XCTAssertEqual(run.status, 1, run.stdout)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.dropLast().last, "FAIL  after the checks: the plugin crashed its host (SIGSEGV)", run.stdout)
        XCTAssertEqual(lines.filter { $0.hasPrefix("FAIL") }.count, 1, "every check passed before: \(run.stdout)")
        XCTAssertTrue(lines.last?.hasSuffix(" passed, 1 failed, 6 skipped") ?? false, run.stdout)
    }

    /// --address-space-mb reaches the isolated host: a load that allocates 2 GB fails there
    /// under a 1 GB limit (the fixture aborts on it), and not without a limit.
    func testTheAddressSpaceLimitHoldsInTheIsolatedHost() throws {
        try XCTSkipIf(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__sanitizer_get_current_allocated_bytes") != nil,
                      "under a sanitizer the validator sets no limit: its shadow memory alone is over any")
        let big = try plugin("big", misbehave: "void *big = malloc((size_t)2 << 30); if (!big) abort(); free(big)")
        let quick = ["--iterations", "0", "--timeout-ms", "100"]
        let limited = try validate(big, quick + ["--address-space-mb", "1024"])
        XCTAssertEqual(limited.status, 1, limited.stdout)
        XCTAssertTrue(limited.stdout.contains("FAIL  \(loadCheck): the plugin crashed its host (SIGABRT)\n"), limited.stdout)
        let unlimited = try validate(big, quick + ["--address-space-mb", "0"])
        XCTAssertEqual(unlimited.status, 0, unlimited.stdout)
    }

    func testInProcessTheCrashStillEndsTheValidatorWithItsCrashNote() throws {
        let crashing = try plugin("segv", misbehave: "*(volatile int *)8 = 1")
        let run = try validate(crashing, ["--isolation", "in-process"])
        XCTAssertEqual(run.status, SIGSEGV, "killed by the signal: \(run.stdout)\n\(run.stderr)")
        XCTAssertTrue(run.stderr.contains("FAIL  \(loadCheck): the plugin crashed the validator (signal \(SIGSEGV))"), run.stderr)
        XCTAssertFalse(run.stdout.contains(" checks: "), "no summary after a crash: \(run.stdout)")
    }

    /// A plugin stuck in ad_load is killed once nothing came from its host for the request's
    /// deadline and the margin after it, and fails the check like a crash. It sleeps there
    /// rather than spin (the same to the watch, without burning a shared core), and for 30 s,
    /// not forever: if the watch failed, the run would end without the line, not hang.
    func testAnIsolatedPluginThatStopsAnsweringIsKilledAndFailsItsCheck() throws {
        let stuck = try plugin("stuck", misbehave: "sleep(30)")
        let started = ContinuousClock.now
        let run = try validate(stuck, ["--timeout-ms", "300"])
        let took = ContinuousClock.now - started
        XCTAssertEqual(run.status, 1, run.stdout)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.last, "5 checks: 3 passed, 1 failed, 1 skipped", run.stdout)
        let failure = try XCTUnwrap(lines.dropLast().last, run.stdout)
        let prefix = "FAIL  \(loadCheck): the plugin stopped answering: nothing from its host for ", suffix = " s, so it was killed (SIGKILL)"
        XCTAssertTrue(failure.hasPrefix(prefix) && failure.hasSuffix(suffix), failure)
        let limit = try XCTUnwrap(Double(failure.dropFirst(prefix.count).dropLast(suffix.count)), failure)
        XCTAssertGreaterThan(limit, 0.3, "longer than the request's deadline")
        XCTAssertGreaterThanOrEqual(took, .milliseconds(Int(limit * 1000)), "killed only after that long without a word")
    }

    func testTheHelpExplainsBothIsolationsAndTheDefault() throws {
        let run = try runCommand(validator, ["--help"])
        XCTAssertEqual(run.status, 0)
        for says in ["--isolation process (the default, as in adorchd)", "--isolation in-process", "--address-space-mb", "default: process)"] {
            XCTAssertTrue(run.stdout.contains(says), "\(says): \(run.stdout)")
        }
        let refused = try runCommand(validator, [productsDirectory.appendingPathComponent("libadorch-plugin-sim.so").path, "--isolation", "sideways"])
        XCTAssertEqual(refused.status, 64, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("sideways"), refused.stderr)
    }
}
