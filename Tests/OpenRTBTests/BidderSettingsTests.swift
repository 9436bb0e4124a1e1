import AdorchJSON
import Foundation
import OpenRTB
import XCTest

/// The plugin's config: defaults where it is silent, and a named refusal for every bad value.
final class BidderSettingsTests: XCTestCase {
    func testAFullConfigIsReadAndTheRestDefaults() throws {
        let s = try BidderSettings(config: [
            "endpoint": "https://exchange.example/openrtb2/auction", "tmax_ms": 250, "currency": "EUR", "floor": 0.75,
            "bcat": ["IAB25"], "badv": ["Spam.Example"],
            "app": ["bundle": "org.example.game", "name": "Game", "store_url": "https://store.example/game", "publisher_id": "p1"],
            "device": ["type": 3, "width": 1920, "height": 1080, "language": "de"],
        ])
        XCTAssertEqual(s.endpoint.absoluteString, "https://exchange.example/openrtb2/auction")
        XCTAssertEqual(s.tmax, .milliseconds(250))
        XCTAssertEqual(s.currency, "EUR")
        XCTAssertEqual(s.floor, 0.75)
        XCTAssertEqual(s.blockedAdvertisers, ["spam.example"])
        XCTAssertEqual(s.app.storeURL, "https://store.example/game")
        XCTAssertEqual(s.device.type, 3)
        let plain = try BidderSettings(config: ["endpoint": "http://127.0.0.1:8080/bid"])
        XCTAssertEqual(plain.tmax, .milliseconds(500))
        XCTAssertEqual(plain.currency, "USD")
        XCTAssertEqual(plain.videoTypes, ["video/mp4", "video/webm"])
        XCTAssertEqual(plain.device.type, 2)
    }

    func testEachBadValueIsRefusedNamingItsKey() {
        let cases: [(JSONValue, String)] = [
            ([:], "endpoint"),
            (["endpoint": "ftp://x/"], "endpoint"),
            (["endpoint": "not a url"], "endpoint"),
            (["endpoint": "http://x/", "tmax_ms": 0], "tmax_ms"),
            (["endpoint": "http://x/", "tmax_ms": 1.5], "tmax_ms"),
            (["endpoint": "http://x/", "currency": "usd"], "currency"),
            (["endpoint": "http://x/", "floor": -1], "floor"),
            (["endpoint": "http://x/", "bcat": "IAB25"], "bcat"),
            (["endpoint": "http://x/", "badv": [""]], "badv"),
            (["endpoint": "http://x/", "app": ["bundel": "typo"]], "app.bundel"),
            (["endpoint": "http://x/", "device": ["type": 9]], "device.type"),
            (["endpoint": "http://x/", "video_mimes": []], "video_mimes"),
            (["endpoint": "http://x/", "tmax": 100], "tmax"),
            ("a string", "config"),
        ]
        for (config, key) in cases {
            XCTAssertThrowsError(try BidderSettings(config: config), "\(config)") { error in
                XCTAssertEqual((error as? SettingsError)?.key, key, "\(config): \(error)")
            }
        }
    }
}
