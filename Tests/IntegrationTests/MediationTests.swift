import AdorchVarlink
import Foundation
import XCTest

/// Issue 4's mediation rules through the real daemon and real plugins.
final class MediationTests: XCTestCase {
    private func slot(_ id: String, buffer: Int = 1, _ entries: [(plugin: String, parameter: String, timeoutMS: Int)]) -> String {
        var text = "[[slots]]\nid = \"\(id)\"\nformat = \"interstitial\"\nbuffer = \(buffer)\n"
        for e in entries {
            text += "  [[slots.waterfall]]\n  plugin = \"\(e.plugin)\"\n  server_parameter = \"\(e.parameter)\"\n  timeout_ms = \(e.timeoutMS)\n"
        }
        return text + "\n"
    }

    /// Acceptance 6: the Swift plugin loads and serves beside the C ones.
    func testTheSwiftPluginServesBesideTheCPlugins() throws {
        let daemon = try DaemonProcess(config: """
        [plugins.sim]
        [plugins.example]
        [plugins.swift-example]

        \(slot("c_sim", [("sim", "latency_ms=5..20", 1000)]))
        \(slot("c_example", [("example", "", 1000)]))
        \(slot("swift", buffer: 2, [("swift-example", "", 1000)]))
        """)
        try daemon.waitFor("every slot full") { try daemon.allSlotsFull() }
        let plugins = try daemon.status()["plugins"]?.arrayValue ?? []
        XCTAssertEqual(plugins.map { $0["state"]?.stringValue }, ["loaded", "loaded", "loaded"])
        XCTAssertEqual(plugins.first { $0["name"]?.stringValue == "swift-example" }?["description"]?.stringValue,
                       "house ads, written in Swift with @_cdecl")
        for (slot, network) in [("c_sim", "sim"), ("c_example", "example"), ("swift", "swift-example")] {
            let ad = try daemon.call("io.adorch.Ads.Show", ["slot": .string(slot)])["ad"]
            XCTAssertEqual(ad?["network"]?.stringValue, network)
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": try XCTUnwrap(ad?["id"], "\(slot) serves"), "event": "close"])
        }
        try daemon.waitFor("refilled") { try daemon.allSlotsFull() }
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// Parallel mode: both networks are asked at once, the better price is shown first, and
    /// the other ad stays valid for the next show.
    func testParallelModeKeepsTheHighestPriceFirstAndTheRestForLater() throws {
        let daemon = try DaemonProcess(config: """
        [plugins.sim]
        [plugins.swift-example]

        [[slots]]
        id = "p"
        format = "interstitial"
        buffer = 1
        parallel = 2
          [[slots.waterfall]]
          plugin = "swift-example"
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5 price=7"
        """)
        try daemon.waitFor("both answers in") { try daemon.slotStatus("p")["ready"]?.intValue == 2 }
        let first = try daemon.call("io.adorch.Ads.Show", ["slot": "p"])["ad"]
        XCTAssertEqual(first?["network"]?.stringValue, "sim")
        XCTAssertEqual(first?["price"]?.doubleValue, 7)
        let second = try daemon.call("io.adorch.Ads.Show", ["slot": "p"])["ad"]
        XCTAssertEqual(second?["network"]?.stringValue, "swift-example", "the other offer was still valid")
        XCTAssertEqual(try daemon.slotStatus("p")["parallel"]?.intValue, 2)
    }

    /// Acceptance 3: a rate_limited answer pauses that network while another fills the slot.
    func testARateLimitedNetworkIsPausedWhileAnotherFills() throws {
        let daemon = try DaemonProcess(config: """
        [scheduler]
        rate_limit_pause_s = 60
        [plugins.sim]
        [plugins.swift-example]

        \(slot("s", [("sim", "latency_ms=5 errors=40020:1.0", 1000), ("swift-example", "", 1000)]))
        """)
        try daemon.waitFor("s full") { try daemon.allSlotsFull() }
        for _ in 0..<10 {
            try daemon.waitFor("s ready") { try daemon.allSlotsFull() }
            let ad = try daemon.call("io.adorch.Ads.Show", ["slot": "s"])["ad"]
            XCTAssertEqual(ad?["network"]?.stringValue, "swift-example")
        }
        try daemon.waitFor("s refilled") { try daemon.allSlotsFull() }
        XCTAssertEqual(try daemon.simStats()["loads"]?.intValue, 1, "one load to the rate-limited network, then none")
        let network = try daemon.status()["networks"]?.arrayValue?.first { $0["name"]?.stringValue == "sim" }
        XCTAssertGreaterThan(network?["paused_ms"]?.intValue ?? 0, 50_000)
        let entries = try daemon.slotStatus("s")["waterfall"]?.arrayValue ?? []
        XCTAssertEqual(entries.first?["last_error"]?.stringValue, "rate_limited")
        XCTAssertEqual(entries.last?["fills"]?.intValue, 11)
        XCTAssertTrue(daemon.log.contains("network sim rate-limited us (network code 40020)"), daemon.log)
    }

    /// Acceptance 4: the host tells a plugin of one impression and one click per ad unless
    /// the plugin tracks them itself; duplicates are dropped.
    func testImpressionsAndClicksReachAPluginOnceAndOnlyIfItDoesNotTrackThem() throws {
        let daemon = try DaemonProcess(config: simConfig(slots:
            slot("host_tracks", [("sim", "latency_ms=5 tracks=0", 1000)]) + slot("self_tracks", [("sim", "latency_ms=5 tracks=1 seed=2", 1000)])))
        try daemon.waitFor("full") { try daemon.allSlotsFull() }
        func showAndReport(_ slot: String) throws {
            try daemon.waitFor("\(slot) ready") { try daemon.allSlotsFull() }
            let id = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": .string(slot)])["ad"]?["id"])
            for event in ["impression", "click", "click"] {
                _ = try daemon.client().call("io.adorch.Ads.Report", ["ad_id": id, "event": .string(event)])
            }
            let again = try daemon.client().call("io.adorch.Ads.Report", ["ad_id": id, "event": "impression"])
            XCTAssertEqual(again.error, "io.adorch.Ads.AdNotValid")
        }
        try showAndReport("host_tracks")
        try daemon.waitFor("the plugin told twice") { try daemon.simStats()["notifies"]?.intValue == 2 }
        try showAndReport("self_tracks")
        try showAndReport("host_tracks")
        try daemon.waitFor("the second host-tracked ad told twice") { try daemon.simStats()["notifies"]?.intValue == 4 }
        XCTAssertEqual(try daemon.simStats()["notifies"]?.intValue, 4, "never for the self-tracking plugin")
        let counters = try daemon.slotStatus("host_tracks")["counters"]
        XCTAssertEqual(counters?["impressions"]?.intValue, 2)
        XCTAssertEqual(counters?["clicks"]?.intValue, 2)
        XCTAssertEqual(counters?["duplicate_reports"]?.intValue, 4, "per ad, the second click and the refused second impression")
    }

    /// plugin.h, ADORCH_EVENT_IMPRESSION: a self-tracking plugin's impression counts in the
    /// slot's impressions once per ad, whether it comes before or after the app's report.
    func testASelfTrackedImpressionCountsOnceWhoeverReportsIt() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: slot("self_tracks", buffer: 2, [("sim", "latency_ms=5 tracks=1", 1000)])))
        try daemon.waitFor("full") { try daemon.allSlotsFull() }
        let events = try daemon.client(timeout: .seconds(5))
        _ = try events.call("io.adorch.Ads.Subscribe", ["slots": ["self_tracks"]], more: true)
        func impressions() throws -> Int64? { try daemon.slotStatus("self_tracks")["counters"]?["impressions"]?.intValue }
        func readImpressions(of id: String, _ count: Int) throws {
            var seen = 0
            while seen < count {
                guard let event = try events.nextReply().parameters["event"] else { continue }
                if event["ad_id"]?.stringValue == id, event["name"]?.stringValue == "impression" { seen += 1 }
            }
        }
        // The plugin first: sim reports the impression once the ad is presented.
        let first = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "self_tracks"])["ad"]?["id"]?.stringValue)
        try readImpressions(of: first, 1)
        XCTAssertEqual(try impressions(), 1)
        XCTAssertNil(try daemon.client().call("io.adorch.Ads.Report", ["ad_id": .string(first), "event": "impression"]).error,
                     "the app's report is taken")
        XCTAssertEqual(try impressions(), 1, "and not counted again")
        // The app first, or the plugin: the two reports of the second ad count once.
        try daemon.waitFor("ready") { try daemon.slotStatus("self_tracks")["ready"]?.intValue ?? 0 > 0 }
        let second = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "self_tracks"])["ad"]?["id"]?.stringValue)
        XCTAssertNil(try daemon.client().call("io.adorch.Ads.Report", ["ad_id": .string(second), "event": "impression"]).error)
        try readImpressions(of: second, 2)
        XCTAssertEqual(try impressions(), 2)
        XCTAssertEqual(try daemon.slotStatus("self_tracks")["counters"]?["duplicate_reports"]?.intValue, 0)
    }

    /// plugin.h, rule 5: no host callback calls into the plugin before it returns. sim makes
    /// every callback holding its one mutex, and counts any call into it from inside one.
    func testHostCallbacksNeverCallBackIntoThePlugin() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: slot("a", buffer: 2, [("sim", "latency_ms=1 tracks=1", 1000)])
            + slot("b", buffer: 2, [("sim", "latency_ms=1 dislike=1 seed=3", 1000)])))
        try daemon.waitFor("full") { try daemon.allSlotsFull() }
        for round in 0..<10 {
            for slot in ["a", "b"] {
                try daemon.waitFor("\(slot) ready") { try daemon.slotStatus(slot)["ready"]?.intValue ?? 0 > 0 }
                let id = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": .string(slot)])["ad"]?["id"])
                for event in ["impression", "click", "close"] where round % 2 == 0 || event != "close" {
                    _ = try daemon.client().call("io.adorch.Ads.Report", ["ad_id": id, "event": .string(event)])
                }
            }
        }
        try daemon.waitFor("refilled") { try daemon.allSlotsFull() }
        let stats = try daemon.simStats()
        XCTAssertGreaterThanOrEqual(stats["loaded_reports"]?.intValue ?? 0, 24, "\(stats)")
        XCTAssertGreaterThanOrEqual(stats["events_reported"]?.intValue ?? 0, 40, "\(stats)")
        XCTAssertEqual(stats["reentrant_calls"]?.intValue, 0, "\(stats)")
    }

    /// Acceptance 5: a plugin stuck inside a call delays nothing else, and its loads time out.
    func testAPluginBlockedInACallStallsOnlyItself() throws {
        let daemon = try DaemonProcess(config: """
        [plugins.sim]
        [plugins.swift-example]

        \(slot("stuck", [("sim", "block_ms=1500 latency_ms=5", 300)]))
        \(slot("fine", buffer: 2, [("swift-example", "", 1000)]))
        """)
        try daemon.waitFor("fine full") { try daemon.slotStatus("fine")["ready"]?.intValue == 2 }
        var slowest = Duration.zero
        for _ in 0..<20 {
            try daemon.waitFor("fine ready") { try daemon.slotStatus("fine")["ready"]?.intValue ?? 0 > 0 }
            let client = try daemon.client()
            let started = ContinuousClock.now
            let reply = try client.call("io.adorch.Ads.Show", ["slot": "fine"])
            slowest = max(slowest, ContinuousClock.now - started)
            XCTAssertNil(reply.error)
        }
        XCTAssertLessThan(slowest, .milliseconds(250), "Shows on another plugin's slot are not held up by the stuck one")
        try daemon.waitFor("a timeout in stuck") { try daemon.slotStatus("stuck")["counters"]?["timeouts"]?.intValue ?? 0 >= 1 }
        XCTAssertEqual(try daemon.slotStatus("stuck")["ready"]?.intValue, 0)
        XCTAssertEqual(try daemon.status()["plugins"]?.arrayValue?.first { $0["name"]?.stringValue == "sim" }?["state"]?.stringValue, "loaded")
    }

    /// The contract: a plugin whose init fails is disabled with a clear status; the rest serve.
    func testAPluginWhoseInitFailsIsRefusedAndTheSlotFillsFromTheNextEntry() throws {
        let daemon = try DaemonProcess(config: """
        [plugins.sim]
        config = { fail_init = true }
        [plugins.example]

        \(slot("s", [("sim", "", 1000), ("example", "", 1000)]))
        """)
        try daemon.waitFor("s full from example") { try daemon.allSlotsFull() }
        let sim = try daemon.status()["plugins"]?.arrayValue?.first { $0["name"]?.stringValue == "sim" }
        XCTAssertEqual(sim?["state"]?.stringValue, "refused")
        XCTAssertEqual(sim?["error"]?.stringValue?.hasSuffix("refused: sim's init returned 1"), true, "\(String(describing: sim))")
        XCTAssertTrue(daemon.log.contains("sim: init refused on purpose (fail_init)"))
    }
}
