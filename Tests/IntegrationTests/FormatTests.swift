import AdorchVarlink
import Foundation
import XCTest

/// Issue 4, acceptance 1 and 2: all six formats load and show through the daemon with the
/// sim plugin; the on-demand ones through Load, within their deadline.
final class FormatTests: XCTestCase {
    func testEverySixFormatsLoadsAndShowsOverTheSocket() throws {
        let daemon = try DaemonProcess()
        try daemon.waitFor("preloaded demo slots full") { try daemon.allSlotsFull() }
        for (slot, format) in [("rewarded_main", "rewarded"), ("fullscreen_main", "fullscreen"), ("interstitial_main", "interstitial")] {
            let ad = try daemon.call("io.adorch.Ads.Show", ["slot": .string(slot), "user_id": "u1"])["ad"]
            XCTAssertEqual(ad?["format"]?.stringValue, format)
        }
        let banner = try daemon.call("io.adorch.Ads.Load", ["slot": "banner_main", "width": 728, "height": 90])["ads"]?.arrayValue ?? []
        XCTAssertEqual(banner.count, 1)
        XCTAssertEqual(banner.first?["format"]?.stringValue, "banner")
        XCTAssertEqual(banner.first?["payload"]?["width"]?.intValue, 728, "the size reached the plugin")
        let splash = try daemon.call("io.adorch.Ads.Load", ["slot": "splash_main"])["ads"]?.arrayValue ?? []
        XCTAssertEqual(splash.first?["format"]?.stringValue, "splash")
        for count in [1, 3, 10] {
            let native = try daemon.call("io.adorch.Ads.Load", ["slot": "native_main", "count": .int(Int64(count))])["ads"]?.arrayValue ?? []
            XCTAssertEqual(native.count, count)
            XCTAssertEqual(Set(native.compactMap { $0["id"]?.stringValue }).count, count, "each ad its own id")
            XCTAssertTrue(native.allSatisfy { !($0["payload"]?["headline"]?.stringValue ?? "").isEmpty })
            for asset in ["body", "call_to_action", "images", "icon", "star_rating", "advertiser", "has_video"] {
                XCTAssertNotNil(native.first?["payload"]?[asset], asset)
            }
        }
        let defaultCount = try daemon.call("io.adorch.Ads.Load", ["slot": "native_main"])["ads"]?.arrayValue ?? []
        XCTAssertEqual(defaultCount.count, 3, "the recommended 3 by default")
        for count in [0, 11] {
            let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Load", ["slot": "native_main", "count": .int(Int64(count))])
            XCTAssertEqual(error, "io.adorch.Ads.InvalidParameter")
            XCTAssertEqual(parameters["parameter"]?.stringValue, "count")
        }
        // A native ad is handed out once, and reports reach it like any other ad.
        let native = try daemon.call("io.adorch.Ads.Load", ["slot": "native_main", "count": 2])["ads"]?.arrayValue ?? []
        let destroysBefore = try daemon.simStats()["destroys"]?.intValue ?? -1
        for ad in native {
            let id = try XCTUnwrap(ad["id"], "\(ad)")
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": id, "event": "impression"])
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": id, "event": "close"])
        }
        try daemon.waitFor("the native object destroyed with its last ad") {
            try daemon.simStats()["destroys"]?.intValue == destroysBefore + 1
        }
        let sim = try daemon.simStats()
        XCTAssertEqual(sim["contract_violations"]?.intValue, 0, "\(sim)")
        XCTAssertEqual(sim["second_shows"]?.intValue, 0, "one ad_show per object, however many ads it held")
        let (showError, _) = try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "banner_main"])
        XCTAssertEqual(showError, "io.adorch.Ads.InvalidParameter", "banners are loaded, not shown from a buffer")
    }

    func testTargetingFromTheDaemonTheSlotAndTheRequestReachesThePlugin() throws {
        let daemon = try DaemonProcess(config: """
        [targeting]
        app_id = "com.example.game"
        age = 30
        paid_app = false
        [plugins.sim]

        [[slots]]
        id = "b"
        format = "banner"
        width = 320
        height = 50
        test_mode = true
        targeting = { gender = "female", keywords = ["puzzle"] }
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=5"
        """)
        let ads = try daemon.call("io.adorch.Ads.Load", ["slot": "b", "targeting": ["keywords": ["racing"], "extra": ["level": 7]]])["ads"]
        let seen = try XCTUnwrap(ads?.arrayValue?.first?["payload"])
        XCTAssertEqual(seen["test"], true)
        XCTAssertEqual(seen["targeting"], [
            "app_id": "com.example.game", "age": 30, "paid_app": false, "gender": "female",
            "keywords": ["racing"], "extra": ["level": 7],
        ], "daemon, slot and request targeting merged, the request's keys winning")
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Load", ["slot": "b", "targeting": ["age": "old"]])
        XCTAssertEqual(error, "io.adorch.Ads.InvalidParameter")
        XCTAssertEqual(parameters["parameter"]?.stringValue, "targeting.age")
    }

    func testTheWaterfallTriesEntriesInOrderWithinTheDeadlineAndASlowSplashTimesOut() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [[slots]]
        id = "b"
        format = "banner"
        width = 320
        height = 50
        load_timeout_ms = 3000
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "nofill"
          server_parameter = "fill=0 latency_ms=10"
          timeout_ms = 1000
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "silent"
          server_parameter = "misbehave=never"
          timeout_ms = 400
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "fills"
          server_parameter = "fill=1 latency_ms=10"
          timeout_ms = 1000

        [[slots]]
        id = "slow_splash"
        format = "splash"
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "slow-1"
          server_parameter = "latency_ms=5000 seed=8"
          timeout_ms = 3000
          [[slots.waterfall]]
          plugin = "sim"
          ad_unit_id = "slow-2"
          server_parameter = "latency_ms=5000 seed=9"
          timeout_ms = 3000
        """))
        let started = ContinuousClock.now
        let ads = try daemon.call("io.adorch.Ads.Load", ["slot": "b"])["ads"]?.arrayValue ?? []
        let took = ContinuousClock.now - started
        XCTAssertEqual(ads.count, 1)
        XCTAssertLessThan(took, .seconds(3), "within the overall deadline")
        XCTAssertGreaterThan(took, .milliseconds(400), "after the silent entry's own timeout")
        let entries = try daemon.slotStatus("b")["waterfall"]?.arrayValue ?? []
        XCTAssertEqual(entries.map { $0["ad_unit_id"]?.stringValue }, ["nofill", "silent", "fills"])
        XCTAssertEqual(entries.map { $0["loads"]?.intValue }, [1, 1, 1], "each tried once, in order")
        XCTAssertEqual(entries.map { $0["last_error"]?.stringValue }, ["no_fill", "timeout", nil])
        let lines = daemon.log.split(separator: "\n")
        let order = ["no_fill", "timed out", "loaded"].map { word in lines.firstIndex { $0.contains("in b") && $0.contains(word) } }
        XCTAssertEqual(order.compactMap { $0 }.count, 3, daemon.log)
        XCTAssertEqual(order.compactMap { $0 }, order.compactMap { $0 }.sorted(), "the log shows them in order")

        let splashStarted = ContinuousClock.now
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Load", ["slot": "slow_splash"])
        let splashTook = ContinuousClock.now - splashStarted
        XCTAssertEqual(error, "io.adorch.Ads.LoadFailed")
        XCTAssertEqual(parameters["error"]?.stringValue, "timeout")
        XCTAssertGreaterThan(splashTook, .milliseconds(1900))
        XCTAssertLessThan(splashTook, .milliseconds(2600), "the splash's 2 s deadline, not its entries' 3 s")
    }
}
