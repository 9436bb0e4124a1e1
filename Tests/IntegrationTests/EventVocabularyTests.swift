import AdorchVarlink
import Foundation
import XCTest

/// Issue 4: the whole event vocabulary reaches subscribers with ad id, slot and network,
/// and a Show whose plugin cannot present gets the next valid ad in the same call.
final class EventVocabularyTests: XCTestCase {
    func testSubscribersHearTheAdsWholeLifeByName() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [[slots]]
        id = "v"
        format = "fullscreen"
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5 dislike=1 cached_ms=5"
        """))
        try daemon.waitFor("v full") { try daemon.allSlotsFull() }
        let events = try daemon.client(timeout: .seconds(5))
        _ = try events.call("io.adorch.Ads.Subscribe", ["slots": ["v"]], more: true)
        let ad = try daemon.call("io.adorch.Ads.Show", ["slot": "v"])["ad"]
        let id = try XCTUnwrap(ad?["id"]?.stringValue)
        var names: [String] = []
        var dislike: JSONValue?
        func read(until name: String) throws {
            while !names.contains(name) {
                guard let event = try events.nextReply().parameters["event"], event["ad_id"]?.stringValue == id else { continue }
                XCTAssertEqual(event["slot"]?.stringValue, "v")
                XCTAssertEqual(event["network"]?.stringValue, "sim")
                if let name = event["name"]?.stringValue { names.append(name) }
                if event["name"]?.stringValue == "dislike" { dislike = event["detail"] }
            }
        }
        // The network's own events first (closing the ad would cancel what it has pending).
        try read(until: "dislike")
        for event in ["impression", "click", "skip", "complete", "close"] {
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": .string(event)])
        }
        try read(until: "closed")
        for name in ["shown", "will_present", "presented", "dislike", "impression", "click", "skipped", "play_finished", "closed"] {
            XCTAssertTrue(names.contains(name), "\(name) in \(names)")
        }
        XCTAssertLessThan(try XCTUnwrap(names.firstIndex(of: "will_present")), try XCTUnwrap(names.firstIndex(of: "presented")))
        XCTAssertEqual(dislike?["reasons"]?.arrayValue?.count, 2)
    }

    func testAShowWhosePluginCannotPresentGetsTheNextValidAdInTheSameCall() throws {
        let daemon = try DaemonProcess(config: """
        [scheduler]
        max_loads_in_flight_per_network = 1
        [plugins.sim]
        [plugins.swift-example]

        [[slots]]
        id = "f"
        format = "interstitial"
        buffer = 2
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "broken"
          server_parameter = "latency_ms=5 show_fail=1 price=9"
          [[slots.waterfall]]
          plugin = "swift-example"
        """)
        // One load per network at a time: one ad from each, the broken network's paying more.
        try daemon.waitFor("f full") { try daemon.allSlotsFull() }
        let events = try daemon.client(timeout: .seconds(5))
        _ = try events.call("io.adorch.Ads.Subscribe", ["slots": ["f"]], more: true)
        let shown = try daemon.call("io.adorch.Ads.Show", ["slot": "f"])["ad"]
        XCTAssertEqual(shown?["network"]?.stringValue, "swift-example", "the working network's ad, after the better-paid one failed")
        var failed: String?
        while failed == nil {
            let event = try events.nextReply().parameters["event"]
            if event?["name"]?.stringValue == "failed_to_display" { failed = event?["ad_id"]?.stringValue }
        }
        XCTAssertNotEqual(failed, shown?["id"]?.stringValue)
        XCTAssertEqual(try daemon.slotStatus("f")["counters"]?["display_failures"]?.intValue, 1)
    }
}
