import AdorchJSON
import AdorchVarlink
import Foundation
import XCTest

/// The loopback OpenRTB exchange of Tests/openrtb/exchange.py: it validates every BidRequest
/// against IAB's 2.6 schema in ../shared and answers from fixtures; stopped by PID when done.
final class Exchange {
    let root: URL
    let server: LoopbackServer
    var base: String { server.base }

    static let sharedOpenRTB = packageRoot.appendingPathComponent("../shared/data/openrtb").standardizedFileURL

    init() throws {
        let schema = Self.sharedOpenRTB.appendingPathComponent("schema")
        guard FileManager.default.fileExists(atPath: schema.appendingPathComponent("BidRequest.json").path) else {
            throw XCTSkip("the OpenRTB 2.6 schema is in the shared folder beside the package, and \(schema.path) is absent")
        }
        root = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-openrtb-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        server = try LoopbackServer(script: "Tests/openrtb/exchange.py", arguments: ["--root", root.path, "--schema", schema.path])
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    func put(_ name: String, _ text: String) throws { try text.write(to: root.appendingPathComponent(name), atomically: true, encoding: .utf8) }
    func put(_ name: String, _ response: JSONValue) throws { try put(name, response.prettyString) }

    /// IAB's example response `name` (../shared/data/openrtb/schema/examples/bid-responses) made
    /// to answer any request ({ID}, {IMP}) with notices back to this exchange under /n/NAME/.
    func iabExample(_ name: String, as fixture: String, change: (inout [String: JSONValue]) -> Void = { _ in }) throws {
        let url = Self.sharedOpenRTB.appendingPathComponent("schema/examples/bid-responses/\(name).json")
        var response = try XCTUnwrap(JSONValue.parse(Data(contentsOf: url))?.objectValue, url.path)
        response["id"] = "{ID}"
        var seats = response["seatbid"]?.arrayValue ?? []
        for s in seats.indices {
            var seat = seats[s].objectValue ?? [:]
            var bids = seat["bid"]?.arrayValue ?? []
            for b in bids.indices {
                var bid = bids[b].objectValue ?? [:]
                bid["impid"] = "{IMP}"
                for (key, kind) in [("nurl", "win"), ("burl", "bill"), ("lurl", "loss")] {
                    bid[key] = .string("{BASE}/n/\(fixture)/\(kind)?price=${AUCTION_PRICE}&loss=${AUCTION_LOSS}&auction=${AUCTION_ID}&imp=${AUCTION_IMP_ID}&cur=${AUCTION_CURRENCY}")
                }
                change(&bid)
                bids[b] = .object(bid)
            }
            seat["bid"] = .array(bids)
            seats[s] = .object(seat)
        }
        response["seatbid"] = .array(seats)
        try put(fixture, .object(response))
    }

    /// Every BidRequest received, with the schema's violations of it.
    func requests() throws -> [(path: String, request: JSONValue, errors: [String])] {
        let list = JSONValue.parse(try server.get("/_requests"))?.arrayValue ?? []
        return list.map { ($0["path"]?.stringValue ?? "", $0["request"] ?? .null, ($0["errors"]?.arrayValue ?? []).compactMap(\.stringValue)) }
    }

    func notices() throws -> [String] { try server.log() }
    func wait(for prefix: String, count: Int = 1) throws { try server.wait(for: prefix, count: count) }
    /// From now, notices and trackers are answered 503 (recorded apart), or again 204.
    func down(_ on: Bool) throws { _ = try server.get("/_down?on=\(on ? 1 : 0)") }
    func waitRefused(_ prefix: String) throws { try server.wait(for: prefix, kind: "refused") }
}

/// Issue 33 through the real daemon, the real openrtb plugin (dlopened in its boxed host) and
/// a real HTTP exchange: requests valid for every format, bids shown at their price, the
/// refusals, tmax, and bad answers.
final class OpenRTBPluginTests: XCTestCase {
    private func config(_ exchange: String, tmaxMS: Int = 2000, extra: String = "", slots: String) -> String {
        """
        [plugins.openrtb]
        config = { endpoint = "\(exchange)", tmax_ms = \(tmaxMS), floor = 0.1, \(extra) badv = ["blocked.example"], app = { bundle = "org.example.game", name = "Example", store_url = "https://store.example/game" } }

        \(slots)
        """
    }

    private func slot(_ id: String, _ format: String, unit: String, size: (Int, Int)? = nil, timeoutMS: Int = 3000) -> String {
        """
        [[slots]]
        id = "\(id)"
        format = "\(format)"
        \(["rewarded", "fullscreen", "interstitial"].contains(format) ? "buffer = 1" : "")
        \(size.map { "width = \($0.0)\nheight = \($0.1)" } ?? "")
        \(format == "rewarded" ? "reward_name = \"coins\"\nreward_amount = 5" : "")
          [[slots.waterfall]]
          plugin = "openrtb"
          ad_unit_id = "\(unit)"
          timeout_ms = \(timeoutMS)

        """
    }

    private func vastFixture(_ exchange: Exchange, _ name: String, price: Double = 3) throws {
        try exchange.iabExample("vast-inline", as: name) { $0["price"] = .double(price); $0["mtype"] = 2 }
    }

    private func bannerFixture(_ exchange: Exchange, _ name: String) throws {
        try exchange.iabExample("ad-served-on-win", as: name) { bid in
            bid["adm"] = "<a href=\"https://advertiser.example/\"><img src=\"https://cdn.example/320x50.png\"></a>"
            bid["mtype"] = 1
        }
    }

    func testEveryFormatBidsValidRequestsAndShowsTheWinningBidAtItsPrice() throws {
        let exchange = try Exchange()
        try vastFixture(exchange, "video")
        try bannerFixture(exchange, "banner")
        // One bid per impression: a native Load of two ads asks two.
        let nativeBids: [JSONValue] = ["{IMP}", "{IMP2}"].enumerated().map { n, imp in [
            "id": .string("n\(n)"), "impid": .string(imp), "price": 1.5, "mtype": 4, "nurl": "{BASE}/n/native/win?price=${AUCTION_PRICE}",
            "adm": .string(JSONValue.object(["ver": "1.2", "assets": [["id": 1, "title": ["text": "A headline"]], ["id": 4, "img": ["url": "https://cdn.example/i.png", "w": 80, "h": 80]]],
                                             "link": ["url": "https://advertiser.example/"], "imptrackers": ["{BASE}/n/native/imp"]]).jsonString),
        ] }
        try exchange.put("native", JSONValue.object(["id": "{ID}", "seatbid": [["seat": "n", "bid": .array(nativeBids)]]]))
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots:
            slot("rewarded", "rewarded", unit: "video", size: (640, 360)) + slot("fullscreen", "fullscreen", unit: "video", size: (640, 360))
                + slot("interstitial", "interstitial", unit: "video", size: (640, 360)) + slot("banner", "banner", unit: "banner", size: (320, 50))
                + slot("splash", "splash", unit: "banner") + slot("native", "native", unit: "native")))
        try daemon.waitFor("the three preloaded slots filled by bids") { try daemon.allSlotsFull() }
        for id in ["rewarded", "fullscreen", "interstitial"] {
            let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": .string(id), "user_id": "u1"])["ad"], id)
            XCTAssertEqual(ad["network"], "openrtb")
            XCTAssertEqual(ad["payload"]?["price"]?.doubleValue, 3, id)
            XCTAssertEqual(ad["payload"]?["media"]?["url"], "http://sample.com/video.mp4", id)
        }
        let banner = try XCTUnwrap(daemon.call("io.adorch.Ads.Load", ["slot": "banner", "width": 320, "height": 50])["ads"]?.arrayValue?.first)
        XCTAssertEqual(banner["payload"]?["html"]?.stringValue?.contains("320x50.png"), true, "\(banner)")
        XCTAssertEqual(banner["payload"]?["creative_type"], "banner")
        XCTAssertNotNil(try daemon.call("io.adorch.Ads.Load", ["slot": "splash"])["ads"]?.arrayValue?.first?["payload"]?["html"])
        let natives = try XCTUnwrap(daemon.call("io.adorch.Ads.Load", ["slot": "native", "count": 2])["ads"]?.arrayValue)
        XCTAssertEqual(natives.count, 2)
        XCTAssertEqual(natives.first?["payload"]?["headline"], "A headline")
        XCTAssertEqual(natives.first?["payload"]?["icon"]?["url"], "https://cdn.example/i.png")

        let requests = try exchange.requests()
        XCTAssertGreaterThanOrEqual(requests.count, 6)
        for r in requests { XCTAssertEqual(r.errors, [], "\(r.request)") }
        let byUnit = Dictionary(grouping: requests) { $0.request["imp"]?.arrayValue?.first?["tagid"]?.stringValue ?? "" }
        let rewarded = try XCTUnwrap(requests.first { $0.request["imp"]?.arrayValue?.first?["rwdd"]?.intValue == 1 })
        XCTAssertEqual(rewarded.request["imp"]?.arrayValue?.first?["instl"]?.intValue, 1)
        XCTAssertEqual(rewarded.request["app"]?["bundle"], "org.example.game")
        XCTAssertLessThanOrEqual(rewarded.request["tmax"]?.intValue ?? 0, 2000)
        XCTAssertEqual(byUnit["native"]?.map { $0.request["imp"]?.arrayValue?.count ?? 0 }, [2], "one imp per native ad asked")
        XCTAssertEqual(byUnit["banner"]?.first?.request["imp"]?.arrayValue?.first?["banner"]?["w"]?.intValue, 320)
        print("OpenRTBPluginTests: \(requests.count) BidRequests, all valid OpenRTB 2.6")
    }

    func testNoticesAreFiredOnceEachWithTheirMacros() throws {
        let exchange = try Exchange()
        try exchange.put("two", JSONValue.object(["id": "{ID}", "cur": "USD", "seatbid": [["seat": "s", "bid": [
            ["id": "high", "impid": "{IMP}", "price": 4.25, "mtype": 1, "adm": "<b>high</b>",
             "nurl": "{BASE}/n/high/win?p=${AUCTION_PRICE}&a=${AUCTION_ID}", "burl": "{BASE}/n/high/bill?p=${AUCTION_PRICE}", "lurl": "{BASE}/n/high/loss?r=${AUCTION_LOSS}"],
            ["id": "low", "impid": "{IMP}", "price": 2, "mtype": 1, "adm": "<b>low</b>", "lurl": "{BASE}/n/low/loss?r=${AUCTION_LOSS}&p=${AUCTION_PRICE}&a=${AUCTION_ID}"],
            ["id": "cheap", "impid": "{IMP}", "price": 0.05, "mtype": 1, "adm": "<b>cheap</b>", "lurl": "{BASE}/n/cheap/loss?r=${AUCTION_LOSS}&a=${AUCTION_ID}"],
        ]]]]))
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots: slot("i", "interstitial", unit: "two")))
        try daemon.waitFor("the slot filled") { try daemon.allSlotsFull() }
        try exchange.wait(for: "/n/low/loss")
        try exchange.wait(for: "/n/cheap/loss")
        let auction = try XCTUnwrap(exchange.requests().first?.request["id"]?.stringValue)
        XCTAssertFalse(try exchange.notices().contains { $0.hasPrefix("/n/high/win") }, "no win notice before the ad is handed to a viewer")
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "i", "user_id": "u1"])["ad"])
        XCTAssertEqual(ad["payload"]?["price"]?.doubleValue, 4.25)
        try exchange.wait(for: "/n/high/win")
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": try XCTUnwrap(ad["id"]), "event": "impression"])
        XCTAssertEqual(try daemon.callExpectingError("io.adorch.Ads.Report", ["ad_id": try XCTUnwrap(ad["id"]), "event": "impression"]).0,
                       "io.adorch.Ads.AdNotValid", "an impression counts once")
        try exchange.wait(for: "/n/high/bill")
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": try XCTUnwrap(ad["id"]), "event": "close"])
        let notices = try exchange.notices().filter { $0.hasPrefix("/n/") }
        XCTAssertEqual(notices.filter { $0.hasPrefix("/n/high/win") }, ["/n/high/win?p=4.25&a=\(auction)"])
        XCTAssertEqual(notices.filter { $0.hasPrefix("/n/high/bill") }, ["/n/high/bill?p=4.25"])
        // The slot refilled after the Show, from the same fixture: each auction has its own losers.
        XCTAssertEqual(notices.filter { $0.hasPrefix("/n/low/") && $0.hasSuffix("&a=\(auction)") }, ["/n/low/loss?r=102&p=&a=\(auction)"],
                       "lost to a higher bid, and not told the price")
        XCTAssertEqual(notices.filter { $0.hasPrefix("/n/cheap/") && $0.hasSuffix("&a=\(auction)") }, ["/n/cheap/loss?r=100&a=\(auction)"], "below the floor")
        let auctions = Set(try exchange.requests().compactMap { $0.request["id"]?.stringValue })
        XCTAssertEqual(notices.filter { $0.hasPrefix("/n/low/") }.count, auctions.count, "one loss notice per auction: \(notices)")
        XCTAssertFalse(notices.contains { $0.hasPrefix("/n/high/loss") }, "a shown ad did not lose")
    }

    /// docs/bidding.md, "The auction", end to end: the slot's floor reaches the BidRequest, a
    /// waterfall entry whose eCPM beats the bid is walked and takes the auction, and the bidder
    /// hears it lost to a higher bid (ADORCH_EVENT_LOSS through the boxed host, into its lurl).
    func testAHybridSlotsAuctionSendsTheFloorAndTellsTheBidderItLost() throws {
        let exchange = try Exchange()
        try exchange.put("bid", JSONValue.object(["id": "{ID}", "seatbid": [["seat": "s", "bid": [
            ["id": "b", "impid": "{IMP}", "price": 3, "mtype": 1, "adm": "<b>bid</b>", "lurl": "{BASE}/n/bid/loss?r=${AUCTION_LOSS}&a=${AUCTION_ID}"],
        ]]]]))
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots: """
            [plugins.sim]

            [[slots]]
            id = "h"
            format = "interstitial"
            buffer = 1
            floor = 0.5
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "latency_ms=0 price=9"
              ecpm = 9
              [[slots.waterfall]]
              plugin = "openrtb"
              bidder = true
              ad_unit_id = "bid"
              timeout_ms = 3000
            """))
        try daemon.waitFor("the slot filled") { try daemon.allSlotsFull() }
        try exchange.wait(for: "/n/bid/loss")
        let first = try XCTUnwrap(exchange.requests().first)
        XCTAssertEqual(first.errors, [])
        XCTAssertEqual(first.request["imp"]?.arrayValue?.first?["bidfloor"]?.doubleValue, 0.5, "the slot's floor, over the plugin's 0.1")
        let auction = try XCTUnwrap(first.request["id"]?.stringValue)
        XCTAssertEqual(try exchange.notices().filter { $0.hasSuffix("&a=\(auction)") }, ["/n/bid/loss?r=102&a=\(auction)"],
                       "the walked entry's 9 beat the bid's 3")
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "h", "user_id": "u1"])["ad"])
        XCTAssertEqual(ad["network"], "sim")
        let slot = try XCTUnwrap(daemon.status()["slots"]?.arrayValue?.first { $0["id"] == "h" })
        XCTAssertGreaterThanOrEqual(slot["counters"]?["outbid"]?.intValue ?? 0, 1, "\(slot)")
    }

    /// Acceptance 2: win, billing and loss notices go through the daemon's outbox in its state
    /// directory. Notices the exchange refused before a `kill -9`, and the loss of the ad the
    /// killed daemon held, arrive after the restart; a clean stop's held ad loses at the next
    /// start; none arrives twice.
    func testEachNoticeArrivesExactlyOnceAcrossAKill9() throws {
        let exchange = try Exchange()
        try exchange.put("kill", JSONValue.object(["id": "{ID}", "cur": "USD", "seatbid": [["seat": "s", "bid": [
            ["id": "b", "impid": "{IMP}", "price": 2.5, "mtype": 1, "adm": "<b>ad</b>", "nurl": "{BASE}/n/win?a=${AUCTION_ID}&p=${AUCTION_PRICE}",
             "burl": "{BASE}/n/bill?a=${AUCTION_ID}&t=${AUCTION_IMP_TS}", "lurl": "{BASE}/n/loss?a=${AUCTION_ID}&r=${AUCTION_LOSS}"],
        ]]]]))
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-notices-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        let settings = config("\(exchange.base)/bid", slots: slot("k", "interstitial", unit: "kill"))
        func auctions() throws -> [String] { try exchange.requests().compactMap { $0.request["id"]?.stringValue } }
        func showAndCount(_ daemon: DaemonProcess) throws {
            let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "k", "user_id": "u1"])["ad"])
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": try XCTUnwrap(ad["id"]), "event": "impression"])
        }

        var first: DaemonProcess? = try DaemonProcess(config: settings, stateDir: state)
        try first!.waitFor("the slot filled") { try first!.allSlotsFull() }
        try showAndCount(first!)
        let shown = try XCTUnwrap(auctions().first)
        try exchange.wait(for: "/n/win?a=\(shown)&p=2.5")
        try exchange.wait(for: "/n/bill?a=\(shown)&t=")
        // The exchange goes down: the next ad's notices are refused, and wait in the outbox.
        try exchange.down(true)
        try first!.waitFor("the slot refilled") { try first!.allSlotsFull() && auctions().count == 2 }
        try showAndCount(first!)
        let unsent = try auctions()[1]
        try exchange.waitRefused("/n/win?a=\(unsent)")
        try exchange.waitRefused("/n/bill?a=\(unsent)")
        try first!.waitFor("the slot refilled again") { try first!.allSlotsFull() && auctions().count == 3 }
        let held = try auctions()[2]
        kill(first!.pid, SIGKILL)
        first!.stop()
        first = nil
        try exchange.down(false)

        var second: DaemonProcess? = try DaemonProcess(config: settings, stateDir: state)
        try exchange.wait(for: "/n/win?a=\(unsent)&p=2.5")
        try exchange.wait(for: "/n/bill?a=\(unsent)&t=")
        try exchange.wait(for: "/n/loss?a=\(held)&r=2")
        try second!.waitFor("the slot filled after the restart") { try second!.allSlotsFull() }
        let heldAtStop = try XCTUnwrap(auctions().last)
        XCTAssertEqual(second!.stop(), 0)
        second = nil
        let third = try DaemonProcess(config: settings, stateDir: state)
        try exchange.wait(for: "/n/loss?a=\(heldAtStop)&r=2")
        let status = try third.status()
        XCTAssertNotNil(status["notices"], "\(status)")

        let notices = try exchange.notices().filter { $0.hasPrefix("/n/") }
        XCTAssertEqual(notices.count, Set(notices).count, "no notice twice: \(notices)")
        for (auction, kinds) in [(shown, ["win", "bill"]), (unsent, ["win", "bill"]), (held, ["loss"]), (heldAtStop, ["loss"])] {
            XCTAssertEqual(notices.filter { $0.contains("a=\(auction)&") }.map { String($0.dropFirst(3).prefix { $0 != "?" }) }.sorted(), kinds.sorted(),
                           "auction \(auction): \(notices)")
        }
        XCTAssertTrue(notices.contains { $0.hasPrefix("/n/bill?a=\(unsent)&t=") && Int64($0.split(separator: "=").last ?? "") != nil },
                      "the impression's time filled in by the daemon: \(notices)")
    }

    /// A full disk: an ad whose win notice cannot be written is not handed out (the Show says
    /// why), and once space returns its loss and the next ad's notices go, each once.
    func testAFullDiskRefusesAShowWhoseWinCannotBeWrittenAndLosesNoNotice() throws {
        let disk = try smallDisk(megabytes: 4)
        let exchange = try Exchange()
        try exchange.put("full", JSONValue.object(["id": "{ID}", "seatbid": [["bid": [
            ["id": "b", "impid": "{IMP}", "price": 2, "mtype": 1, "adm": "<b>ad</b>", "nurl": "{BASE}/n/win?a=${AUCTION_ID}",
             "lurl": "{BASE}/n/loss?a=${AUCTION_ID}&r=${AUCTION_LOSS}"],
        ]]]]))
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots: slot("f", "interstitial", unit: "full")),
                                       stateDir: disk.appendingPathComponent("state"))
        defer { daemon.stop() }
        try daemon.waitFor("the slot filled") { try daemon.allSlotsFull() }
        let refused = try XCTUnwrap(exchange.requests().last?.request["id"]?.stringValue)
        let filler = disk.appendingPathComponent("filler").path
        fillDisk(filler)
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "f", "user_id": "u1"])
        XCTAssertEqual(error, "io.adorch.Ads.LedgerFailed", "\(parameters)")
        XCTAssertTrue(parameters["message"]?.stringValue?.contains("could not be written to the notice outbox") == true, "\(parameters)")
        try daemon.waitForLog("the ad's end said why") { $0.contains("its win notice could not be written to the notice outbox") }
        try FileManager.default.removeItem(atPath: filler)
        try exchange.wait(for: "/n/loss?a=\(refused)&r=2")
        try daemon.waitFor("the slot refilled") { try daemon.allSlotsFull() && (try daemon.status()["notices"]?["unwritten"]?.intValue) == 0 }
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "f", "user_id": "u1"])["ad"])
        let shown = try XCTUnwrap(exchange.requests().compactMap { $0.request["id"]?.stringValue }.first { $0 != refused })
        XCTAssertEqual(ad["network"], "openrtb")
        try exchange.wait(for: "/n/win?a=\(shown)")
        let notices = try exchange.notices().filter { $0.hasPrefix("/n/") }
        XCTAssertFalse(notices.contains("/n/win?a=\(refused)"), "the refused ad was never won: \(notices)")
        XCTAssertEqual(notices.filter { $0.hasPrefix("/n/win?") }.count, 1, "\(notices)")
        XCTAssertEqual(notices.filter { $0 == "/n/loss?a=\(refused)&r=2" }.count, 1, "\(notices)")
    }

    /// The sender: a notice refused for good (404) is not sent again, one that failed (503) is
    /// tried again after its backoff, and an answer that never ends is cut, not read on.
    func testTheOutboxRetriesWhatFailedDropsWhatWasRefusedAndCutsAnEndlessAnswer() throws {
        let exchange = try Exchange()
        try exchange.put("odd", JSONValue.object(["id": "{ID}", "seatbid": [["bid": [
            ["id": "b", "impid": "{IMP}", "price": 2, "mtype": 1, "adm": "<b>ad</b>", "nurl": "{BASE}/gone/win?a=${AUCTION_ID}",
             "burl": "{BASE}/endless/bill?a=${AUCTION_ID}"],
        ]]]]))
        try exchange.put("fine", JSONValue.object(["id": "{ID}", "seatbid": [["bid": [
            ["id": "b", "impid": "{IMP}", "price": 2, "mtype": 1, "adm": "<b>ad</b>", "nurl": "{BASE}/n/win?a=${AUCTION_ID}"],
        ]]]]))
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots: slot("o", "interstitial", unit: "odd") + slot("f", "interstitial", unit: "fine")))
        try daemon.waitFor("the slots filled") { try daemon.allSlotsFull() }
        let odd = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "o", "user_id": "u1"])["ad"]?["id"])
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": odd, "event": "impression"])
        try exchange.down(true)
        _ = try daemon.call("io.adorch.Ads.Show", ["slot": "f", "user_id": "u1"])
        try exchange.waitRefused("/n/win?a=")
        try exchange.down(false)
        try exchange.wait(for: "/n/win?a=")
        try daemon.waitFor("every notice answered") {
            let n = try daemon.status()["notices"]
            return n?["due"]?.intValue == 0 && n?["refused"]?.intValue == 1 && n?["sent"]?.intValue == 2
        }
        let notices = try daemon.status()["notices"]
        XCTAssertGreaterThanOrEqual(notices?["retried"]?.intValue ?? 0, 1, "\(String(describing: notices))")
        XCTAssertEqual(try exchange.notices().filter { $0.hasPrefix("/gone/") }.count, 1, "a 404 is not sent again")
        XCTAssertEqual(try exchange.notices().filter { $0.hasPrefix("/endless/") }.count, 1, "the endless answer counted as answered, once")
        try daemon.waitForLog("the refusal logged by host, not URL") { $0.contains("notices: a win notice of openrtb to 127.0.0.1 was refused (HTTP 404)") }
        XCTAssertFalse(daemon.log.contains("/gone/win?a="), "the journal never holds a notice's URL")
        let metrics = try XCTUnwrap(daemon.call("io.adorch.Manager.GetMetrics")["text"]?.stringValue)
        XCTAssertTrue(metrics.contains("adorch_notices_total{outcome=\"refused\"} 1"), metrics)
    }

    /// Two exchanges in one auction (docs/bidding.md, "Several exchanges"): the plugin's file
    /// copied under a second name is a second plugin with its own config and box; the higher
    /// bid stays, and the lower one's exchange hears it lost to a higher bid.
    func testTwoExchangesBidInOneAuctionAndTheLowerHearsItLost() throws {
        let high = try Exchange(), low = try Exchange()
        for (exchange, price) in [(high, 4.0), (low, 1.5)] {
            try exchange.put("bid", JSONValue.object(["id": "{ID}", "seatbid": [["bid": [
                ["id": "b", "impid": "{IMP}", "price": .double(price), "mtype": 1, "adm": "<b>ad</b>",
                 "nurl": "{BASE}/n/win?a=${AUCTION_ID}", "lurl": "{BASE}/n/loss?a=${AUCTION_ID}&r=${AUCTION_LOSS}"],
            ]]]]))
        }
        let plugins = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-exchanges-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: plugins) }
        let file = productsDirectory.appendingPathComponent("libadorch-plugin-openrtb.so")
        try FileManager.default.copyItem(at: file, to: plugins.appendingPathComponent("libadorch-plugin-openrtb.so"))
        try FileManager.default.copyItem(at: file, to: plugins.appendingPathComponent("libadorch-plugin-openrtb-b.so"))
        let daemon = try DaemonProcess(config: """
            [plugins.openrtb]
            config = { endpoint = "\(low.base)/bid", tmax_ms = 2000 }
            [plugins.exchange_b]
            path = "libadorch-plugin-openrtb-b.so"
            config = { endpoint = "\(high.base)/bid", tmax_ms = 2000 }

            [[slots]]
            id = "two"
            format = "interstitial"
            buffer = 1
              [[slots.waterfall]]
              plugin = "openrtb"
              bidder = true
              ad_unit_id = "bid"
              [[slots.waterfall]]
              plugin = "exchange_b"
              bidder = true
              ad_unit_id = "bid"
            """, pluginDir: plugins.path)
        try daemon.waitFor("the slot filled") { try daemon.allSlotsFull() }
        let lost = try XCTUnwrap(low.requests().first?.request["id"]?.stringValue)
        try low.wait(for: "/n/loss?a=\(lost)&r=102")
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "two", "user_id": "u1"])["ad"])
        XCTAssertEqual(ad["network"], "exchange_b")
        XCTAssertEqual(ad["payload"]?["price"]?.doubleValue, 4)
        try high.wait(for: "/n/win?a=\(try XCTUnwrap(high.requests().first?.request["id"]?.stringValue))")
    }

    func testAThousandBadBidsCostAFewLogLinesAndSixteenLossNotices() throws {
        let exchange = try Exchange()
        let bids: [JSONValue] = (0..<1000).map { n in
            ["id": .string("b\(n)"), "impid": "{IMP}", "price": 0.01, "mtype": 1, "adm": "<b>x</b>", "lurl": .string("{BASE}/n/flood/\(n)?r=${AUCTION_LOSS}")]
        }
        try exchange.put("flood", JSONValue.object(["id": "{ID}", "seatbid": [["bid": .array(bids)]]]))
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots: slot("f", "interstitial", unit: "flood")))
        // The load's failure is reported last, after its notices went out and were counted.
        try daemon.waitForLog("the flood refused") { $0.contains("and 997 more bids refused in that response") && $0.contains("no bid taken: ") }
        // The log first, the counters after: the slot may ask again meanwhile, never the other way.
        let lines = daemon.log.split(separator: "\n").filter { $0.contains("refused (below_floor)") }.count
        let stats = try XCTUnwrap(daemon.status()["plugins"]?.arrayValue?.first { $0["name"] == "openrtb" }?["stats"])
        let responses = Int(try XCTUnwrap(stats["refused_below_floor"]?.intValue)) / 1000
        XCTAssertGreaterThanOrEqual(responses, 1, "\(stats)")
        XCTAssertGreaterThanOrEqual(stats["loss_notices_dropped"]?.intValue ?? 0, Int64(1000 - 16), "\(stats)")
        XCTAssertEqual((stats["loss_notices_dropped"]?.intValue ?? 0) % Int64(1000 - 16), 0, "\(stats)")
        try exchange.wait(for: "/n/flood/", count: 16)
        // Per response: three warnings and the load's failure, which names the first three.
        XCTAssertTrue((4...4 * responses).contains(lines), "\(lines) lines for \(responses) responses")
    }

    func testTmaxCutsALateExchangeAndNoShowWaitsForIt() throws {
        let exchange = try Exchange()
        try vastFixture(exchange, "video")
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", tmaxMS: 150, slots: slot("late", "interstitial", unit: "slow-1500-video")))
        try exchange.server.wait(for: "/bid", kind: "bid")
        let started = ContinuousClock.now
        let (error, _) = try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "late", "user_id": "u1"])
        XCTAssertEqual(error, "io.adorch.Ads.NoAdReady")
        XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(100), "a Show answers from the buffer, never waiting for a bidder")
        try daemon.waitForLog("the load cut at tmax") { $0.contains("timeout: no answer within tmax (0.15 seconds)") }
        let stats = try XCTUnwrap(daemon.status()["plugins"]?.arrayValue?.first { $0["name"] == "openrtb" }?["stats"])
        XCTAssertGreaterThanOrEqual(stats["timeouts"]?.intValue ?? 0, 1, "\(stats)")
        XCTAssertEqual(try daemon.slotStatus("late")["waterfall"]?.arrayValue?.first?["last_error"], "timeout")
    }

    func testEachBadAnswerIsANamedFailureAndTheDaemonServesThroughout() throws {
        let exchange = try Exchange()
        try bannerFixture(exchange, "good")
        var twins = try XCTUnwrap(JSONValue.parse(Data(contentsOf: exchange.root.appendingPathComponent("good")))?.objectValue)
        let bid = twins["seatbid"]?.arrayValue?.first?["bid"]?.arrayValue?.first ?? .null
        twins["seatbid"] = [["bid": [bid, bid]]]
        try exchange.put("twins", .object(twins))
        var wrongID = twins
        (wrongID["id"], wrongID["seatbid"]) = ("not-the-request", [["bid": [bid]]])
        try exchange.put("wrongid", .object(wrongID))
        let cases: [(unit: String, error: String, counter: String)] = [
            ("garbage", "malformed_response: not JSON", "failed_malformed_response"),
            ("big-10485760", "response_too_large", "failed_response_too_large"),
            ("wrongid", "wrong_response_id: id \"not-the-request\" answers another request", "failed_wrong_response_id"),
            ("twins", "duplicate_bid_id", "no_valid_bids"),
            ("redirect", "the exchange answered HTTP 302", "failed_http_status"),
            ("status-500", "the exchange answered HTTP 500", "failed_http_status"),
        ]
        let slots = cases.enumerated().map { slot("bad\($0.offset)", "interstitial", unit: $0.element.unit) }.joined()
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots: slots + slot("ok", "interstitial", unit: "good")))
        try daemon.waitFor("the good slot filled") { try daemon.slotStatus("ok")["ready"]?.intValue == 1 }
        for (index, c) in cases.enumerated() {
            try daemon.waitForLog("bad\(index): \(c.error)") { $0.contains(c.error) }
            XCTAssertNotNil(try daemon.slotStatus("bad\(index)")["waterfall"]?.arrayValue?.first?["last_error"], c.unit)
        }
        let stats = try XCTUnwrap(daemon.status()["plugins"]?.arrayValue?.first { $0["name"] == "openrtb" }?["stats"])
        for c in cases { XCTAssertGreaterThanOrEqual(stats[c.counter]?.intValue ?? 0, 1, "\(c.counter) in \(stats)") }
        XCTAssertEqual(try exchange.requests().filter { $0.path == "/bid" && $0.request["imp"]?.arrayValue?.first?["tagid"] == "redirect" }.count,
                       try exchange.requests().filter { $0.request["imp"]?.arrayValue?.first?["tagid"] == "redirect" }.count,
                       "the redirect is not followed")
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "ok", "user_id": "u1"])["ad"])
        XCTAssertEqual(ad["network"], "openrtb", "the daemon served throughout")
    }

    func testAHighBidWithUnusableMarkupGivesWayToTheNextBid() throws {
        let exchange = try Exchange()
        try vastFixture(exchange, "video")
        let good = try XCTUnwrap(JSONValue.parse(Data(contentsOf: exchange.root.appendingPathComponent("video")))?["seatbid"]?.arrayValue?.first?["bid"]?.arrayValue?.first?.objectValue)
        var broken = good, html = good
        (broken["id"], broken["price"], broken["adm"], broken["lurl"]) = ("broken", 4, "<VAST version=\"3.0\"><Ad><InLine>", "{BASE}/n/broken/loss?r=${AUCTION_LOSS}")
        (html["id"], html["price"], html["adm"], html["mtype"], html["lurl"]) = ("html", 5, "<div>not video</div>", nil, "{BASE}/n/html/loss?r=${AUCTION_LOSS}")
        var cheap = good
        (cheap["id"], cheap["price"], cheap["lurl"]) = ("good", 1, "{BASE}/n/good/loss?r=${AUCTION_LOSS}")
        try exchange.put("mixed", JSONValue.object(["id": "{ID}", "seatbid": [["bid": [.object(html), .object(broken), .object(cheap)]]]]))
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", slots: slot("r", "rewarded", unit: "mixed", size: (640, 360))))
        try daemon.waitFor("the slot filled by the bid whose markup works") { try daemon.allSlotsFull() }
        let ad = try XCTUnwrap(daemon.call("io.adorch.Ads.Show", ["slot": "r", "user_id": "u1"])["ad"])
        XCTAssertEqual(ad["payload"]?["bid_id"], "good")
        XCTAssertEqual(ad["payload"]?["price"]?.doubleValue, 1)
        try exchange.wait(for: "/n/html/loss?r=204")
        try exchange.wait(for: "/n/broken/loss?r=3")
        XCTAssertFalse(try exchange.notices().contains { $0.hasPrefix("/n/good/loss") }, "the winner did not lose")
        let stats = try XCTUnwrap(daemon.status()["plugins"]?.arrayValue?.first { $0["name"] == "openrtb" }?["stats"])
        XCTAssertGreaterThanOrEqual(stats["refused_wrong_media_type"]?.intValue ?? 0, 1, "\(stats)")
        XCTAssertGreaterThanOrEqual(stats["refused_bad_markup"]?.intValue ?? 0, 1, "\(stats)")
    }

    /// An exchange whose answer never ends: the transfer is stopped at the size limit, a named
    /// failure, and the plugin's host does not go on reading it (it did, at a full core, when
    /// its HTTP could not stop a transfer still receiving).
    func testAnEndlessAnswerIsStoppedAtTheSizeLimitNotReadOn() throws {
        let exchange = try Exchange()
        let daemon = try DaemonProcess(config: config("\(exchange.base)/bid", extra: "max_response_bytes = 65536,", slots: slot("e", "interstitial", unit: "endless")))
        try daemon.waitForLog("the answer cut") { $0.contains("response_too_large: ") }
        let host = try XCTUnwrap(daemon.pluginStatus("openrtb")["pid"]?.intValue)
        func cpuTicks() throws -> Int {
            let stat = try String(contentsOfFile: "/proc/\(host)/stat", encoding: .utf8)
            let fields = stat[stat.range(of: ") ")!.upperBound...].split(separator: " ")
            return Int(fields[11])! + Int(fields[12])!  // utime and stime, fields 14 and 15
        }
        let (ticks, started) = (try cpuTicks(), ContinuousClock.now)
        // The slot asks again after its backoff: the next answer cut is the event waited for.
        let before = daemon.log.components(separatedBy: "response_too_large: ").count
        try daemon.waitForLog("the next answer cut", timeout: .seconds(30)) { $0.components(separatedBy: "response_too_large: ").count > before }
        let wall = Double((ContinuousClock.now - started) / .milliseconds(1)) / 1000
        let used = Double(try cpuTicks() - ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
        XCTAssertLessThan(used, 0.3 * wall + 0.05, "the host used \(used) s of CPU in \(wall) s between two cut answers")
        XCTAssertEqual(try daemon.pluginStatus("openrtb")["crashes"]?.intValue, 0)
        let stats = try XCTUnwrap(daemon.pluginStatus("openrtb")["stats"])
        XCTAssertGreaterThanOrEqual(stats["failed_response_too_large"]?.intValue ?? 0, 2, "\(stats)")
    }

    func testATLSErrorIsANamedNetworkFailure() throws {
        let exchange = try Exchange()
        // The exchange speaks plain HTTP: a TLS handshake with it fails.
        let daemon = try DaemonProcess(config: config(exchange.base.replacingOccurrences(of: "http:", with: "https:") + "/bid", slots: slot("tls", "interstitial", unit: "good")))
        try daemon.waitForLog("the TLS failure") { $0.contains("network: TLS: ") }
        XCTAssertEqual(try daemon.slotStatus("tls")["waterfall"]?.arrayValue?.first?["last_error"], "network")
        XCTAssertNotNil(try daemon.call("io.adorch.Manager.GetStatus")["slots"])
    }
}
