import AdorchVarlink
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import VASTFixtures
import XCTest

/// The loopback ad server of Tests/vast/adserver.py, stopped by PID when done.
final class AdServer {
    let root: URL
    let server: LoopbackServer
    var base: String { server.base }

    /// Serves the documents of `root` (a scratch folder by default).
    init(root: URL? = nil) throws {
        self.root = root ?? FileManager.default.temporaryDirectory.appendingPathComponent("adorch-vast-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: self.root, withIntermediateDirectories: true)
        server = try LoopbackServer(script: "Tests/vast/adserver.py", arguments: ["--root", self.root.path])
    }

    /// Documents whose tracking and error URLs point at this server, under /t/.
    var docs: Docs { Docs(base: "{BASE}/t") }

    func put(_ name: String, _ document: String) throws {
        try document.write(to: root.appendingPathComponent(name), atomically: true, encoding: .utf8)
    }

    func get(_ path: String) throws -> Data { try server.get(path) }
    func log() throws -> [String] { try server.log() }
    func wait(for prefix: String, count: Int = 1, timeout: Int = 10) throws { try server.wait(for: prefix, count: count, timeout: timeout) }
}

/// Issue 6 through the real daemon, the real vast plugin (dlopened) and a real HTTP server.
final class VASTPluginTests: XCTestCase {
    private func config(_ slots: String, plugins: String = "[plugins.vast]\n[plugins.sim]\n") -> String {
        """
        [targeting]
        app_id = "com.example.game"

        \(plugins)
        \(slots)
        """
    }

    private func vastSlot(_ id: String, tag: String, format: String = "rewarded", timeoutMS: Int = 3000, extra: String = "",
                          after: String = "") -> String {
        """
        [[slots]]
        id = "\(id)"
        format = "\(format)"
        buffer = 1
        width = 640
        height = 360
        \(format == "rewarded" ? "reward_name = \"coins\"\nreward_amount = 5" : "")
          [[slots.waterfall]]
          plugin = "vast"
          server_parameter = "tag_url=\(tag) types=video/mp4 bitrate=1000 \(extra)"
          timeout_ms = \(timeoutMS)
        \(after)

        """
    }

    func testARewardedSlotFillsFromTheLoopbackServerWithTheMediaTheSlotPrefers() throws {
        let server = try AdServer()
        try server.put("inline.xml", server.docs.inline())
        let daemon = try DaemonProcess(config: config(vastSlot("r", tag: "\(server.base)/vast/inline.xml?app=[APPBUNDLE]&slot=[SLOTID]&cb=[CACHEBUSTING]")))
        try daemon.waitFor("r filled from the VAST server") { try daemon.allSlotsFull() }
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "r", "user_id": "u1"])["ad"])
        XCTAssertEqual(ad["network"], "vast")
        let payload = try XCTUnwrap(ad["payload"])
        XCTAssertEqual(payload["media"]?["url"], "http://m.invalid/360.mp4", "640x360 at 1000 kbit/s, not the document's first file")
        XCTAssertEqual(payload["media"]?["type"], "video/mp4")
        XCTAssertEqual(payload["duration_s"], 20)
        XCTAssertEqual(payload["skip_offset_s"], 5)
        XCTAssertEqual(payload["click_through"], "https://advertiser.invalid/landing")
        XCTAssertEqual(payload["companions"]?.arrayValue?.first?["width"], 300)
        XCTAssertEqual(payload["ad_id"], "ad-1")
        let tagRequest = try XCTUnwrap(server.log().first { $0.hasPrefix("/vast/inline.xml") })
        XCTAssertNotNil(tagRequest.range(of: #"^/vast/inline\.xml\?app=com\.example\.game&slot=r&cb=\d{8}$"#, options: .regularExpression), tagRequest)
    }

    func testAThreeHopChainFiresEveryHopsTrackingExactlyOnce() throws {
        let server = try AdServer()
        try server.put("hop1.xml", server.docs.wrapper(next: "{BASE}/vast/hop2.xml", prefix: "w1"))
        try server.put("hop2.xml", server.docs.wrapper(next: "{BASE}/vast/hop3.xml", prefix: "w2"))
        try server.put("hop3.xml", server.docs.wrapper(next: "{BASE}/vast/inline.xml", prefix: "w3"))
        try server.put("inline.xml", server.docs.inline())
        let daemon = try DaemonProcess(config: config(vastSlot("r", tag: "\(server.base)/vast/hop1.xml")))
        try daemon.waitFor("r filled through three wrappers") { try daemon.allSlotsFull() }
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "r", "user_id": "u1"])["ad"])
        XCTAssertEqual(ad["payload"]?["wrappers"], 3)
        for event in ["impression", "start", "first_quartile", "midpoint", "third_quartile", "complete"] {
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": try XCTUnwrap(ad["id"], "\(ad)"), "event": .string(event)])
        }
        // impression, start, q1, mid, q3, complete: 6 per hop, 4 hops (3 wrappers + inline).
        try server.wait(for: "/t/", count: 24)
        let hits = try server.log().filter { $0.hasPrefix("/t/") }
        for prefix in ["w1", "w2", "w3", "in"] {
            for event in ["impression", "start", "q1", "mid", "q3", "complete"] {
                XCTAssertEqual(hits.filter { $0 == "/t/\(prefix)/\(event)" }.count, 1, "\(prefix)/\(event) in \(hits)")
            }
        }
        // The plugin counts what it fires when the app's event reaches it; a status call is
        // served after every report before it, so nothing more is on its way.
        let stats = try XCTUnwrap(daemon.status()["plugins"]?.arrayValue?.first { $0["name"] == "vast" }?["stats"])
        XCTAssertEqual(stats["pings_sent"], 24, "\(stats)")
        XCTAssertEqual(hits.count, 24)
    }

    func testASixHopChainIs302ToEveryErrorURLAndTheWaterfallMovesOn() throws {
        let server = try AdServer()
        for hop in 1...6 {
            try server.put("hop\(hop).xml", server.docs.wrapper(next: hop == 6 ? "{BASE}/vast/inline.xml" : "{BASE}/vast/hop\(hop + 1).xml", prefix: "w\(hop)"))
        }
        try server.put("inline.xml", server.docs.inline())
        let daemon = try DaemonProcess(config: config(vastSlot("r", tag: "\(server.base)/vast/hop1.xml", after: """
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5 seed=3"
        """)))
        try daemon.waitFor("r filled by the next entry") { try daemon.allSlotsFull() }
        try server.wait(for: "/t/w", count: 6)
        let errors = try server.log().filter { $0.hasPrefix("/t/w") }
        for hop in 1...6 {
            XCTAssertEqual(errors.filter { $0.hasPrefix("/t/w\(hop)/error?code=302&t=") }.count, 1, "hop \(hop): \(errors)")
        }
        XCTAssertFalse(try server.log().contains("/vast/inline.xml"), "the chain stops at the limit")
        let slot = try daemon.slotStatus("r")
        XCTAssertEqual(slot["waterfall"]?.arrayValue?.first?["last_error"], "no_fill")
        XCTAssertEqual(slot["waterfall"]?.arrayValue?.dropFirst().first?["fills"], 1)
        XCTAssertTrue(daemon.log.contains("VAST 302: wrapper limit reached"), daemon.log)
    }

    func testNoAdBrokenXMLAndNoPlayableFileGetTheirCodesAndNamedErrors() throws {
        let server = try AdServer()
        try server.put("empty.xml", server.docs.empty)
        try server.put("broken.xml", server.docs.wrapper(next: "{BASE}/vast/cut.xml", prefix: "wb"))
        try server.put("cut.xml", String(server.docs.inline(prefix: "cut").prefix(400)))
        try server.put("ogg.xml", server.docs.inline(prefix: "ogg"))
        let daemon = try DaemonProcess(config: config(
            vastSlot("empty", tag: "\(server.base)/vast/empty.xml") + vastSlot("broken", tag: "\(server.base)/vast/broken.xml")
                + vastSlot("ogg", tag: "\(server.base)/vast/ogg.xml", extra: "types=video/ogg")
        ))
        try daemon.waitFor("all three failed") {
            try ["empty", "broken", "ogg"].allSatisfy { try daemon.slotStatus($0)["waterfall"]?.arrayValue?.first?["last_error"] != nil }
        }
        XCTAssertEqual(try daemon.slotStatus("empty")["waterfall"]?.arrayValue?.first?["last_error"], "no_fill")
        XCTAssertEqual(try daemon.slotStatus("broken")["waterfall"]?.arrayValue?.first?["last_error"], "plugin_fault", "a document the plugin cannot parse")
        XCTAssertEqual(try daemon.slotStatus("ogg")["waterfall"]?.arrayValue?.first?["last_error"], "no_fill")
        try server.wait(for: "/t/root/error?code=303")
        try server.wait(for: "/t/wb/error?code=100")
        try server.wait(for: "/t/ogg/error?code=403")
        XCTAssertTrue(daemon.log.contains("VAST 403: ad ad-1: no playable media file (offered: application/javascript, application/x-mpegURL, video/mp4, video/webm)"), daemon.log)
    }

    /// Foundation on Linux kept only the whole seconds of a request's timeout: with under a
    /// second left, an answer that took 100 ms was a timeout.
    func testAnEntryTimeoutUnderOneSecondWaitsForTheAnswer() throws {
        let server = try AdServer()
        try server.put("inline.xml", server.docs.inline())
        let daemon = try DaemonProcess(config: config(vastSlot("r", tag: "\(server.base)/slow/100/inline.xml", timeoutMS: 800)))
        try daemon.waitFor("r filled within 800 ms") { try daemon.allSlotsFull() }
        XCTAssertNil(try daemon.slotStatus("r")["waterfall"]?.arrayValue?.first?["last_error"])
    }

    func testExpiresEndsTheAdInRealTimeAndItsNotUsedIsReported() throws {
        let server = try AdServer()
        try server.put("inline.xml", server.docs.inline(expires: 2))
        let daemon = try DaemonProcess(config: config(vastSlot("r", tag: "\(server.base)/vast/inline.xml")))
        let events = try daemon.client(timeout: .milliseconds(250))
        _ = try events.call("io.adorch.Ads.Subscribe", ["slots": ["r"]], more: true)
        var loadedAt: ContinuousClock.Instant?
        var loadedID: JSONValue?
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            guard let event = (try? events.nextReply())?.parameters["event"] else { continue }
            if event["kind"] == "ad_loaded", loadedID == nil {
                (loadedAt, loadedID) = (.now, event["ad_id"])
                // No replacement from now on, so the ad lives until its <Expires>.
                try FileManager.default.removeItem(at: server.root.appendingPathComponent("inline.xml"))
            } else if event["kind"] == "ad_expired", event["ad_id"] == loadedID, let loadedAt {
                let lived = ContinuousClock.now - loadedAt
                XCTAssertGreaterThan(lived, .milliseconds(1900), "not before its <Expires>")
                XCTAssertLessThan(lived, .seconds(4))
                try server.wait(for: "/t/in/notused")
                return
            }
        }
        XCTFail("no ad_expired for \(loadedID ?? "no ad"): \(daemon.log)")
    }

    func testASlowOrDeadServerCostsOneTimeoutAndStallsNoOtherSlot() throws {
        let server = try AdServer()
        try server.put("inline.xml", server.docs.inline())
        let daemon = try DaemonProcess(config: config(
            vastSlot("dead", tag: "\(server.base)/dead", format: "fullscreen", timeoutMS: 1000)
                + vastSlot("slow", tag: "\(server.base)/slow/5000/inline.xml", format: "interstitial", timeoutMS: 1000)
                + vastSlot("fine", tag: "\(server.base)/vast/inline.xml")
        ))
        try daemon.waitFor("the healthy slot filled while the others wait") { try daemon.slotStatus("fine")["ready"] == 1 }
        XCTAssertEqual(try daemon.slotStatus("dead")["ready"], 0)
        try daemon.waitFor("both stalled loads ended in a timeout", timeout: .seconds(5)) {
            try ["dead", "slow"].allSatisfy { try daemon.slotStatus($0)["waterfall"]?.arrayValue?.first?["last_error"] == "timeout" }
        }
        for id in ["dead", "slow"] {
            let slot = try daemon.slotStatus(id)
            XCTAssertEqual(slot["counters"]?["timeouts"], 1, "one timeout each, then a backoff: \(slot)")
            XCTAssertEqual(slot["counters"]?["ignored_callbacks"], 0, "the plugin answered before the host's deadline")
        }
        for _ in 0..<20 {
            _ = try daemon.call("io.adorch.Ads.Show", ["slot": "fine", "user_id": "u"])
            try daemon.waitFor("fine refilled") { try daemon.slotStatus("fine")["ready"] == 1 }
        }
    }

    /// IAB's public VAST 4.0 and 4.2 samples: each is served as a tag, and each must give a
    /// valid ad or a precise, named error; the daemon keeps serving throughout.
    func testEveryIABSampleGivesAnAdOrANamedError() throws {
        // ../shared beside this checkout, or beside the repository it was cloned from (CI's clone).
        let origin = try? runCommand("/usr/bin/git", ["-C", packageRoot.path, "remote", "get-url", "origin"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let candidates = [packageRoot.path] + (origin.map { $0.hasPrefix("/") ? [$0] : [] } ?? [])
        // standardized: `git clone .` records the origin as "/path/to/repo/.".
        let places = candidates.map { URL(fileURLWithPath: $0).standardized.deletingLastPathComponent().appendingPathComponent("shared/data/vast-samples") }
        guard let samples = places.first(where: { FileManager.default.fileExists(atPath: $0.path) }) else {
            throw XCTSkip("IAB's VAST samples are in none of \(places.map(\.path)): the conformance test is skipped")
        }
        var slots = "", expected: [(slot: String, file: String)] = []
        var servers: [AdServer] = []
        for version in ["VAST-4.0", "VAST-4.2"] {
            let server = try AdServer(root: samples.appendingPathComponent(version))
            servers.append(server)
            let files = try FileManager.default.contentsOfDirectory(atPath: samples.appendingPathComponent(version).path).filter { $0.hasSuffix(".xml") }.sorted()
            for file in files {
                let slot = "s\(expected.count)"
                expected.append((slot, "\(version)/\(file)"))
                // Samples' wrappers point at hosts outside this machine: a short timeout bounds them.
                slots += vastSlot(slot, tag: "\(server.base)/vast/\(file)", format: "fullscreen", timeoutMS: 1500, extra: "types=video/mp4,video/webm,application/x-mpegurl")
            }
        }
        XCTAssertGreaterThanOrEqual(expected.count, 30, "both sample sets are there")
        let daemon = try DaemonProcess(config: config(slots, plugins: "[plugins.vast]\n"))
        try daemon.waitFor("every sample answered", timeout: .seconds(20)) {
            try expected.allSatisfy { try daemon.slotStatus($0.slot)["ready"] == 1 || daemon.slotStatus($0.slot)["waterfall"]?.arrayValue?.first?["last_error"] != nil }
        }
        var report: [String] = []
        for (slot, file) in expected {
            let status = try daemon.slotStatus(slot)
            if status["ready"] == 1 {
                report.append("\(file): ad")
                continue
            }
            let error = try XCTUnwrap(status["waterfall"]?.arrayValue?.first?["last_error"]?.stringValue, file)
            XCTAssertTrue(["no_fill", "timeout", "network", "plugin_fault"].contains(error), "\(file): \(error)")
            // The log names the VAST code or the fetch failure for this slot.
            let line = daemon.log.split(separator: "\n").last { $0.contains("slot=\(slot) ") && $0.contains("failed") }
            XCTAssertNotNil(line, "\(file) failed without a log line")
            report.append("\(file): \(error) — \(line.map { $0.components(separatedBy: "] ").last ?? "" } ?? "")")
        }
        print("IAB VAST samples:\n  " + report.joined(separator: "\n  "))
        XCTAssertEqual(try daemon.call("io.adorch.Manager.GetStatus")["pid"]?.intValue.map(Int32.init), daemon.pid, "still serving")
        XCTAssertGreaterThan(report.filter { $0.hasSuffix(": ad") }.count, 10, "most samples are playable ads")
    }
}
