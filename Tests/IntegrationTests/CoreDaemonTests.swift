import AdorchLocking
import AdorchPluginHost
import AdorchVarlink
import Foundation
import XCTest

/// The real adorchd binary with the real plugins over the real socket (issue 2's acceptance).
final class CoreDaemonTests: XCTestCase {
    /// Acceptance 1: on the embedded default the demo slots fill within 5 s, and adorchctl shows it.
    func testDemoSlotsFillWithinFiveSecondsOnTheEmbeddedDefault() throws {
        // As `make run` starts it: no config, plugins found next to the binary.
        let daemon = try DaemonProcess(pluginDir: nil)
        try daemon.waitFor("every demo slot full", timeout: .seconds(5)) { try daemon.allSlotsFull() }

        let ctl = try runCommand(productsDirectory.appendingPathComponent("adorchctl").path, ["slots", "--socket", daemon.socket])
        XCTAssertEqual(ctl.status, 0, ctl.stderr)
        let rows = ctl.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        guard rows.allSatisfy({ $0.count >= 4 }) else { throw TestFailure("adorchctl slots: rows of fewer than 4 columns:\n\(ctl.stdout)") }
        XCTAssertEqual(rows.map { String($0[0]) }, ["rewarded_main", "fullscreen_main", "interstitial_main", "banner_main", "splash_main", "native_main",
                                                     "interactive_main"])
        for row in rows { XCTAssertEqual(row[2], row[3], "ready == buffer in \(row)") }

        let json = try runCommand(productsDirectory.appendingPathComponent("adorchctl").path, ["status", "--json", "--socket", daemon.socket])
        XCTAssertEqual(JSONValue.parse(Data(json.stdout.utf8))?["config"]?.stringValue, "(embedded default)")
        XCTAssertEqual(daemon.stop(), 0, "SIGTERM is a clean exit")
        XCTAssertFalse(FileManager.default.fileExists(atPath: daemon.socket), "the socket file is removed on stop")
    }

    /// Acceptance 2, first half: the PyPI varlink client shows an ad; showing or reporting it
    /// again is AdNotValid.
    func testThePyPIVarlinkClientShowsAnAdThatCannotBeShownAgain() throws {
        let daemon = try DaemonProcess()
        try daemon.waitFor("rewarded_main ready") { try daemon.slots().first?["ready"]?.intValue ?? 0 > 0 }

        func varlinkCLI(_ method: String, _ parameters: String) throws -> String {
            let result = try runCommand("/usr/bin/env", ["python3", "-m", "varlink.cli", "call", "unix:\(daemon.socket)/\(method)", parameters])
            XCTAssertEqual(result.status, 0, result.stderr)
            return result.stdout + result.stderr
        }
        let shown = try varlinkCLI("io.adorch.Ads.Show", #"{"slot":"rewarded_main","user_id":"u1"}"#)
        guard let ad = JSONValue.parse(Data(shown.utf8))?["ad"] else { return XCTFail("no ad in: \(shown)") }
        let id = try XCTUnwrap(ad["id"]?.stringValue)
        XCTAssertEqual(ad["slot"]?.stringValue, "rewarded_main")
        XCTAssertEqual(ad["network"]?.stringValue, "sim")
        XCTAssertEqual(ad["format"]?.stringValue, "rewarded")
        XCTAssertNotNil(ad["payload"]?.objectValue?["media_url"])
        XCTAssertNotNil(ad["expires_at"]?.stringValue)

        // The CLI prints nothing for an empty reply, and exits 0 even on an error reply.
        XCTAssertFalse(try varlinkCLI("io.adorch.Ads.Report", #"{"ad_id":"\#(id)","event":"impression"}"#).contains("Error"))
        XCTAssertTrue(try varlinkCLI("io.adorch.Ads.Report", #"{"ad_id":"\#(id)","event":"impression"}"#).contains("io.adorch.Ads.AdNotValid"))
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "impression"])
        XCTAssertEqual(error, "io.adorch.Ads.AdNotValid")
        // The refusal names the ad by the id the app holds, never the engine's number for it.
        XCTAssertEqual(parameters["message"]?.stringValue, "ad \(id) already reported impression")
        XCTAssertEqual(parameters["ad_id"]?.stringValue, id)
        // No Show can return it again: every later Show returns another ad.
        for _ in 0..<2 {
            try daemon.waitFor("rewarded_main ready") { try daemon.slots().first?["ready"]?.intValue ?? 0 > 0 }
            let again = try daemon.call("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": "u1"])
            XCTAssertNotEqual(again["ad"]?["id"]?.stringValue, id)
        }
    }

    /// Acceptance 2, second half: 1,000 shows across the demo slots keep the plugin contract,
    /// and every slot is full again within seconds.
    func testAThousandShowsKeepTheContractAndRefill() throws {
        let daemon = try DaemonProcess()
        try daemon.waitFor("demo slots full") { try daemon.allSlotsFull() }
        let shares = [("rewarded_main", 400), ("fullscreen_main", 400), ("interstitial_main", 200)]
        let failures = Failures()
        let socket = daemon.socket
        DispatchQueue.concurrentPerform(iterations: shares.count) { i in
            let (slot, count) = shares[i]
            do {
                let client = try VarlinkClient(path: socket)
                let events = try VarlinkClient(path: socket, timeout: .seconds(5))
                _ = try events.call("io.adorch.Ads.Subscribe", ["slots": [.string(slot)]], more: true)
                var shown = 0
                while shown < count {
                    let reply = try client.call("io.adorch.Ads.Show", ["slot": .string(slot), "user_id": .string("user-\(i)")])
                    if reply.error == "io.adorch.Ads.NoAdReady" {
                        // Wait for this slot's next load instead of spinning.
                        while try events.nextReply().parameters["event"]?["kind"]?.stringValue != "ad_loaded" {}
                        continue
                    }
                    guard reply.error == nil, let id = reply.parameters["ad"]?["id"] else {
                        return failures.add("\(slot): \(reply.error ?? "") \(reply.parameters)")
                    }
                    for event in ["impression", "close"] {
                        let report = try client.call("io.adorch.Ads.Report", ["ad_id": id, "event": .string(event)])
                        if let error = report.error { failures.add("\(slot) report \(event): \(error)") }
                    }
                    shown += 1
                }
            } catch {
                failures.add("\(slot): \(error)")
            }
        }
        XCTAssertEqual(failures.all, [])

        try daemon.waitFor("demo slots full again", timeout: .seconds(10)) { try daemon.allSlotsFull() }
        let sim = try daemon.simStats()
        XCTAssertEqual(sim["creates"], sim["loads"], "one load per created object: \(sim)")
        XCTAssertEqual(sim["contract_violations"]?.intValue, 0, "\(sim)")
        XCTAssertEqual(sim["second_loads"]?.intValue, 0)
        XCTAssertEqual(sim["second_shows"]?.intValue, 0)
        XCTAssertEqual(sim["shows"]?.intValue, 1000)
        let slots = try daemon.status()["slots"]?.arrayValue ?? []
        XCTAssertEqual(slots.map { $0["counters"]?["shows"]?.intValue ?? 0 }.reduce(0, +), 1000)
        XCTAssertEqual(slots.map { $0["counters"]?["ignored_callbacks"]?.intValue ?? -1 }, [0, 0, 0, 0, 0, 0, 0],
                       daemon.log.split(separator: "\n").filter { $0.contains("ignored") }.joined(separator: "\n"))
    }

    /// Acceptance 3: with a short TTL an ad is replaced before it expires, the slot never
    /// runs dry, and Show never returns an expired ad.
    func testShortLivedAdsAreReplacedBeforeTheSlotRunsDry() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [[slots]]
        id = "short"
        format = "interstitial"
        buffer = 2
        ttl_s = 3
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "fill=1 latency_ms=5..30 ttl_s=3 seed=3"
          timeout_ms = 1000
        """))
        try daemon.waitFor("short full") { try daemon.allSlotsFull() }
        let watch = try daemon.client(timeout: .seconds(5))
        _ = try watch.call("io.adorch.Ads.Subscribe", ["slots": ["short"]], more: true)
        var replaced = 0
        var kinds: [String] = []
        while replaced < 4 {
            let kind = try watch.nextReply().parameters["event"]?["kind"]?.stringValue ?? "?"
            kinds.append(kind)
            if kind == "ad_replaced" { replaced += 1 }
        }
        XCTAssertFalse(kinds.contains("slot_empty"), "\(kinds)")
        XCTAssertFalse(kinds.contains("ad_expired"), "\(kinds)")
        XCTAssertEqual(try daemon.slotStatus("short")["counters"]?["expired"]?.intValue, 0)
        XCTAssertTrue(try daemon.allSlotsFull())

        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for _ in 0..<10 {
            try daemon.waitFor("short ready") { try daemon.slots().first?["ready"]?.intValue ?? 0 > 0 }
            let asked = Date()
            let ad = try daemon.call("io.adorch.Ads.Show", ["slot": "short"])["ad"]
            let expiresAt = try XCTUnwrap(ad?["expires_at"]?.stringValue.flatMap(iso.date(from:)))
            XCTAssertGreaterThan(expiresAt, asked, "Show returned an ad that had already expired")
        }
    }

    /// Acceptance 4: entries that never call back, call back twice or after destroy, or load
    /// with an empty payload: the slots serve from their other entries, the counters say
    /// what happened, and the host never broke the contract.
    func testMisbehavingEntriesDoNotStopTheirSlots() throws {
        func slot(_ id: String, _ misbehaviour: String) -> String {
            """
            [[slots]]
            id = "\(id)"
            format = "fullscreen"
            buffer = 1
              [[slots.waterfall]]
              plugin = "sim"
              ad_unit_id = "bad-\(id)"
              server_parameter = "fill=1 latency_ms=5..20 misbehave=\(misbehaviour) seed=5"
              timeout_ms = 300
              [[slots.waterfall]]
              plugin = "sim"
              ad_unit_id = "good-\(id)"
              server_parameter = "fill=1 latency_ms=5..20 seed=6"
              timeout_ms = 1000

            """
        }
        let daemon = try DaemonProcess(config: simConfig(
            slots: slot("never", "never") + slot("twice", "twice") + slot("after", "after_destroy") + slot("empty", "empty_payload"),
            scheduler: "backoff_base_ms = 200"
        ))
        try daemon.waitFor("every slot full") { try daemon.allSlotsFull() }
        try daemon.waitFor("a timeout in never") { try daemon.slotStatus("never")["counters"]?["timeouts"]?.intValue ?? 0 >= 1 }
        try daemon.waitFor("an ignored second callback in twice") {
            try daemon.slotStatus("twice")["counters"]?["ignored_callbacks"]?.intValue ?? 0 >= 1
        }
        try daemon.waitFor("a contract violation in empty") {
            try daemon.slotStatus("empty")["counters"]?["contract_violations"]?.intValue ?? 0 >= 1
        }
        // after_destroy reports once its object is destroyed: show the ad and close it.
        for slot in ["never", "twice", "after", "empty"] {
            try daemon.waitFor("\(slot) ready") { try daemon.slotStatus(slot)["ready"]?.intValue ?? 0 > 0 }
            let ad = try daemon.call("io.adorch.Ads.Show", ["slot": .string(slot)])["ad"]
            let id = try XCTUnwrap(ad?["id"], "\(slot) serves")
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": id, "event": "close"])
        }
        try daemon.waitFor("a callback after destroy ignored in after") {
            try daemon.slotStatus("after")["counters"]?["ignored_callbacks"]?.intValue ?? 0 >= 1
        }
        try daemon.waitFor("every slot full again") { try daemon.allSlotsFull() }
        let sim = try daemon.simStats()
        XCTAssertGreaterThan(sim["misbehaviours"]?.intValue ?? 0, 0)
        XCTAssertEqual(sim["contract_violations"]?.intValue, 0, "the host kept the contract: \(sim)")
        XCTAssertEqual(sim["creates"], sim["loads"])
        XCTAssertTrue(daemon.log.contains("callback ignored"), "ignored callbacks are logged")
    }

    /// Acceptance 5: a plugin of another ABI major is refused with one clear line; the daemon
    /// runs on with the others.
    func testAPluginOfAnotherABIMajorIsRefusedAndTheRestServe() throws {
        let build = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-abi-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: build, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: build) }
        let future = build.appendingPathComponent("libadorch-plugin-future.so").path
        let compiled = try runCommand("/usr/bin/env", [
            "cc", "-shared", "-fPIC", "-I", packageRoot.appendingPathComponent("Sources/CAdorchPlugin/include").path,
            packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures/abi2_plugin.c").path, "-o", future,
        ])
        XCTAssertEqual(compiled.status, 0, compiled.stderr)

        let daemon = try DaemonProcess(config: """
        [plugins.sim]
        [plugins.future]
        path = "\(future)"

        [[slots]]
        id = "s"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "future"
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5..20"
        """)
        try daemon.waitFor("s full from sim") { try daemon.allSlotsFull() }
        let refusals = daemon.log.split(separator: "\n").filter { $0.contains(future) && $0.contains("refused") }
        XCTAssertEqual(refusals.count, 1, daemon.log)
        XCTAssertTrue(refusals.first?.contains("built for plugin ABI 2.1, this daemon speaks ABI \(PluginABI.major).\(PluginABI.minor)") ?? false, "\(refusals)")
        let plugins = try daemon.status()["plugins"]?.arrayValue ?? []
        XCTAssertEqual(plugins.first { $0["name"]?.stringValue == "future" }?["state"]?.stringValue, "refused")
        XCTAssertEqual(plugins.first { $0["name"]?.stringValue == "sim" }?["state"]?.stringValue, "loaded")
    }

    /// A config the daemon cannot use stops it before it starts, naming the file and key.
    func testABadConfigIsRefusedWithTheFileAndKey() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-badcfg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("bad.toml").path
        try "[[slots]]\nid = \"s\"\nformat = \"interstitial\"\nbuffer = \"two\"\n  [[slots.waterfall]]\n  plugin = \"sim\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        let adorchd = productsDirectory.appendingPathComponent("adorchd").path
        let result = try runCommand(adorchd, ["--config", path, "--socket", dir.appendingPathComponent("s.sock").path])
        XCTAssertEqual(result.status, 78)
        XCTAssertTrue(result.stderr.contains("\(path): key slots[0].buffer: expected an integer, got string"), result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("s.sock").path))

        try "[daemon]\nsocket = \n".write(toFile: path, atomically: true, encoding: .utf8)
        let syntax = try runCommand(adorchd, ["--config", path, "--check-config"])
        XCTAssertEqual(syntax.status, 78)
        XCTAssertTrue(syntax.stderr.contains("\(path): line 2"), syntax.stderr)

        let good = try runCommand(adorchd, ["--config", packageRoot.appendingPathComponent("etc/adorch/adorchd.toml").path, "--check-config"])
        XCTAssertEqual(good.status, 0, good.stderr)
        XCTAssertTrue(good.stdout.contains("valid, 7 slots"), good.stdout)
    }

    /// Reload applies a new config; a bad one is refused and changes nothing.
    func testReloadAppliesAGoodConfigAndKeepsTheOldOneOnABadOne() throws {
        let slotA = """
        [[slots]]
        id = "a"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5..20"
        """
        let daemon = try DaemonProcess(config: simConfig(slots: slotA))
        try daemon.waitFor("a full") { try daemon.allSlotsFull() }
        let configPath = daemon.dir.appendingPathComponent("adorchd.toml")
        try simConfig(slots: slotA + "\n" + slotA.replacingOccurrences(of: "id = \"a\"", with: "id = \"b\""))
            .write(to: configPath, atomically: true, encoding: .utf8)
        let ctl = productsDirectory.appendingPathComponent("adorchctl").path
        let reload = try runCommand(ctl, ["reload", "--socket", daemon.socket])
        XCTAssertEqual(reload.status, 0, reload.stderr)
        XCTAssertEqual(try daemon.slots().map { $0["id"]?.stringValue }, ["a", "b"])
        try daemon.waitFor("a and b full") { try daemon.allSlotsFull() }

        try "[[slots]]\nid = 3\n".write(to: configPath, atomically: true, encoding: .utf8)
        let bad = try runCommand(ctl, ["reload", "--socket", daemon.socket])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("io.adorch.Manager.ReloadFailed"), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("key slots[0].id"), bad.stderr)
        XCTAssertEqual(try daemon.slots().map { $0["id"]?.stringValue }, ["a", "b"], "the running config stays")
    }
}

/// Failures collected from several threads.
final class Failures: Sendable {
    private let items = LockedValue<[String]>([])

    func add(_ item: String) { items.withLock { $0.append(item) } }

    var all: [String] { items.withLock { $0 } }
}
