@testable import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import Foundation
import Logging
import XCTest

/// ABI 1.2's ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD: the host's showNow, and the validator's
/// check, against sim (which declares it and keeps it) and a plugin that declares it and
/// blocks in ad_show.
final class AnyThreadShowTests: XCTestCase {
    private var build: URL!

    override func setUpWithError() throws {
        build = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-any-thread-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: build, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: build) }

    /// Fixtures/blocking_show_plugin.c, built with cc against today's header.
    private func blockingPlugin() throws -> String {
        let output = build.appendingPathComponent("libadorch-plugin-blocking.so").path
        let run = try runCommand("/usr/bin/env", ["cc", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                                                  "-I", packageRoot.appendingPathComponent("Sources/CAdorchPlugin/include").path,
                                                  packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures/blocking_show_plugin.c").path, "-o", output])
        guard run.status == 0 else { throw TestFailure("cc blocking_show_plugin.c: \(run.stderr)") }
        return output
    }

    /// Loads one interstitial through `plugin` and waits for its loaded report.
    private func loadOne(_ plugin: LoadedPlugin, id: AdID, loaded: LockedValue<Set<AdID>>) throws {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let deadline = Moment(nanoseconds: UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)) + .seconds(5)
        plugin.load(LoadOrder(adID: id, plugin: plugin.info.name, slotID: "s", format: .interstitial,
                              entry: WaterfallEntry(plugin: plugin.info.name, serverParameter: "latency_ms=0"),
                              deadline: deadline, reward: nil, testMode: true, targetingJSON: "{}"))
        let until = Date() + 5
        while !loaded.withLock({ $0.contains(id) }), Date() < until { Thread.sleep(forTimeInterval: 0.005) }
        XCTAssertTrue(loaded.withLock { $0.contains(id) }, "ad \(id) loaded")
    }

    private func open(_ path: String, name: String, loaded: LockedValue<Set<AdID>>) throws -> LoadedPlugin {
        try LoadedPlugin(name: name, path: path, configJSON: "{}", logger: Logger(label: "test")) { _, id, report in
            if case .loaded = report { loaded.withLock { _ = $0.insert(id) } }
        }
    }

    func testShowNowCallsAdShowOnTheCallingThreadAndWithdrawsTheFlagFromASlowPlugin() throws {
        let loaded = LockedValue<Set<AdID>>([])
        let sim = try open(productsDirectory.appendingPathComponent("libadorch-plugin-sim.so").path, name: "sim", loaded: loaded)
        defer { sim.shutdown() }
        XCTAssertTrue(sim.showsOnAnyThread)
        try loadOne(sim, id: 1, loaded: loaded)
        XCTAssertTrue(sim.showNow(1, userID: "u"))
        XCTAssertFalse(sim.showNow(99, userID: nil), "an ad the plugin does not hold is not shown")
        XCTAssertTrue(sim.showsOnAnyThread, "a fast ad_show keeps the flag")

        let blocking = try open(try blockingPlugin(), name: "blocking", loaded: loaded)
        defer { blocking.shutdown() }
        XCTAssertTrue(blocking.showsOnAnyThread)
        let ids = (2...AdID(1 + AnyThreadShowRecord.strikes))
        for id in ids { try loadOne(blocking, id: id, loaded: loaded) }
        for id in ids {
            XCTAssertTrue(blocking.showsOnAnyThread, "before slow call \(id - 1) of \(AnyThreadShowRecord.strikes): the flag is kept")
            XCTAssertTrue(blocking.showNow(id, userID: nil), "a slow show still answers")
        }
        XCTAssertFalse(blocking.showsOnAnyThread, "\(AnyThreadShowRecord.strikes) calls over \(AnyThreadShowRecord.bound): the flag is withdrawn")
    }

    /// The rule itself: slow calls count within the last `window`, and withdrawal is for good.
    func testTheRecordWithdrawsOnTheThirdSlowCallAmongTheLastHundred() {
        let fast = Duration.microseconds(50), slow = AnyThreadShowRecord.bound + .milliseconds(1)
        var record = AnyThreadShowRecord()
        XCTAssertFalse(record.note(slow))
        XCTAssertFalse(record.note(AnyThreadShowRecord.bound), "a call of exactly the bound is within it")
        for _ in 0..<AnyThreadShowRecord.window { XCTAssertFalse(record.note(fast)) }
        XCTAssertFalse(record.note(slow), "the first slow call has left the window: this is one of one")
        XCTAssertFalse(record.note(slow))
        XCTAssertFalse(record.withdrawn)
        XCTAssertTrue(record.note(slow), "the third among the last \(AnyThreadShowRecord.window) withdraws")
        XCTAssertTrue(record.withdrawn)
        XCTAssertFalse(record.note(slow), "only the call that withdraws says so")
        for _ in 0...AnyThreadShowRecord.window { _ = record.note(fast) }
        XCTAssertTrue(record.withdrawn, "withdrawn for good")
        XCTAssertEqual(record.slowCalls, 5)
        XCTAssertEqual(record.slowest, slow)
    }

    func testTheValidatorFailsAPluginThatBlocksInAnAnyThreadShow() throws {
        let validator = productsDirectory.appendingPathComponent("adorch-plugin-validate").path
        let sim = try runCommand(validator, [productsDirectory.appendingPathComponent("libadorch-plugin-sim.so").path, "--format", "rewarded",
                                             "--iterations", "0", "--call-bound-ms", String(validatorCallBoundMs)])
        XCTAssertTrue(sim.stdout.contains("PASS  show from any thread: 200 ad_show calls on a thread of their own"), sim.stdout)

        let run = try runCommand(validator, [try blockingPlugin(), "--iterations", "0", "--call-bound-ms", String(validatorCallBoundMs)])
        XCTAssertEqual(run.status, 1, run.stdout)
        let line = run.stdout.split(separator: "\n").first { $0.hasPrefix("FAIL  show from any thread: ") }
        XCTAssertTrue(line?.contains("over the 10 ms bound 3 times in 3") ?? false, run.stdout)
        XCTAssertEqual(run.stdout.split(separator: "\n").filter { $0.hasPrefix("FAIL") }.count, 1, "only that check fails: \(run.stdout)")
    }
}
