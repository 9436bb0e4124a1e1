import XCTest

@testable import AdorchEngine

/// docs/bidding.md, "The auction": a hybrid slot's bidders and waterfall entries, on a manual clock.
final class AuctionTests: XCTestCase {
    /// Waterfall entries are `w…` (with an eCPM where given), bidders `b…`.
    private func hybrid(buffer: Int = 1, floor: Double = 0, _ entries: [(String, Double?)]) -> SlotConfig {
        var config = SlotConfig(id: "s", format: .interstitial, buffer: buffer, ttl: .seconds(600), waterfall: entries.map { name, ecpm in
            WaterfallEntry(plugin: name, adUnitID: "unit-\(name)", timeout: .seconds(2), bidder: name.hasPrefix("b"), ecpm: ecpm)
        })
        config.floor = floor
        return config
    }

    private func harness(_ config: SlotConfig) -> Harness {
        Harness(slots: [config], plugins: Set(config.waterfall.map(\.plugin)))
    }

    private func order(_ h: Harness, _ plugin: String) -> LoadOrder? { h.loads.last { $0.plugin == plugin } }

    func testBiddersAreAskedAtOnceAndTheWaterfallWalkedOnlyWhileAnEntryBeatsTheBestBid() {
        var h = harness(hybrid([("w1", 8), ("b1", nil), ("b2", nil), ("w2", 4), ("w3", nil)]))
        XCTAssertEqual(h.loads.map(\.plugin), ["b1", "b2"], "every bidder at once, no entry before the bids are in")
        h.fill(order(h, "b1")!.adID, price: 5)
        XCTAssertEqual(h.loads.count, 2, "no entry is compared with a bid still coming")
        h.fill(order(h, "b2")!.adID, price: 3)
        XCTAssertEqual(h.loads.map(\.plugin), ["b1", "b2", "w1"], "w1's 8 beats the best bid, 5")
        h.report(.failed(.noFill, networkCode: 0, message: ""), order(h, "w1")!.adID)
        XCTAssertEqual(h.loads.count, 3, "w2's 4 does not beat 5, and w3's eCPM is unknown: the walk ends")
        let b2 = order(h, "b2")!.adID
        XCTAssertEqual(h.losses.map(\.0), [b2])
        XCTAssertEqual(h.losses.map(\.1), [.lostToHigherBid], "one ad wanted: the lower bid lost to a higher one")
        XCTAssertTrue(h.destroyed.contains(b2))
        XCTAssertTrue(h.events.contains { $0.kind == .adOutbid && $0.adID == b2 })
        XCTAssertEqual(h.status("s").counters.outbid, 1)
        guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
        XCTAssertEqual(ad.price, 5)
    }

    func testAnEntryThatBeatsTheBidTakesTheAuctionAtItsECPM() {
        var h = harness(hybrid([("w1", 8), ("b1", nil)]))
        let bid = order(h, "b1")!.adID
        h.fill(bid, price: 5)
        h.fill(order(h, "w1")!.adID)  // reports no price: worth its configured eCPM
        XCTAssertEqual(h.losses.map(\.0), [bid])
        XCTAssertEqual(h.losses.map(\.1), [.lostToHigherBid])
        guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
        XCTAssertEqual(ad.price, 8)
        XCTAssertEqual(order(h, "b1")!.adID, h.loads.last!.adID, "the slot short again: a new auction asks the bidder")
    }

    func testWithoutABidTheWaterfallIsWalkedInOrderAndAWalkedEntryIsNeverTold() {
        var h = harness(hybrid([("w1", nil), ("w2", 2), ("b1", nil)]))
        h.report(.failed(.noFill, networkCode: 0, message: ""), order(h, "b1")!.adID)
        XCTAssertEqual(h.loads.map(\.plugin), ["b1", "w1"], "no bid in hand: every entry may be walked, in order")
        h.report(.failed(.noFill, networkCode: 0, message: ""), order(h, "w1")!.adID)
        XCTAssertEqual(h.loads.map(\.plugin), ["b1", "w1", "w2"])
        h.fill(order(h, "w2")!.adID, expiresIn: .seconds(30))
        XCTAssertEqual(h.status("s").ready, 1)
        h.advance(.seconds(30))
        XCTAssertTrue(h.losses.isEmpty, "only a bidder is told of a loss")
    }

    func testAnEntryWithoutAConfiguredECPMIsPricedByWhatItsAdsPaid() {
        var h = harness(hybrid([("w1", nil), ("b1", nil)]))
        h.report(.failed(.noFill, networkCode: 0, message: ""), order(h, "b1")!.adID)
        h.fill(order(h, "w1")!.adID, price: 9)
        h.advance(.seconds(60))  // past b1's backoff; the slot is full
        guard case .success = h.show("s") else { return XCTFail("no ad") }
        // A new auction asks b1 again; with its bid of 5 in hand, w1 has paid 9.
        let round = h.loads.filter { $0.plugin == "b1" }
        XCTAssertEqual(round.count, 2)
        XCTAssertEqual(h.loads.last!.plugin, "b1")
        h.fill(round.last!.adID, price: 5)
        XCTAssertEqual(h.loads.last!.plugin, "w1", "learned eCPM 9 beats 5: w1 is walked")
    }

    func testTheFloorIsSentRefusedUnderAndEntriesPricedUnderItAreNotAsked() {
        var h = harness(hybrid(floor: 2, [("w1", 1), ("b1", nil), ("w2", nil)]))
        XCTAssertEqual(h.loads.map(\.floor), [2], "the floor goes with the bid request")
        let low = order(h, "b1")!.adID
        h.fill(low, price: 1.5)
        XCTAssertEqual(h.losses.map(\.0), [low])
        XCTAssertEqual(h.losses.map(\.1), [.belowFloor])
        XCTAssertEqual(h.status("s").counters.belowFloor, 1)
        XCTAssertEqual(h.status("s").ready, 0)
        XCTAssertTrue(h.events.contains { $0.kind == .adFailed && $0.adID == low && ($0.message ?? "").contains("floor 2") })
        XCTAssertEqual(h.loads.map(\.plugin), ["b1", "w2"], "w1's eCPM 1 is under the floor: never asked; w2's is unknown")
        h.fill(order(h, "w2")!.adID, price: 1)
        XCTAssertEqual(h.status("s").counters.belowFloor, 2, "a waterfall entry's price under the floor is refused too")
        XCTAssertEqual(h.losses.count, 1, "but only a bidder is told")
    }

    func testABidsExpIsHonouredToTheMillisecond() {
        for (elapsed, shown) in [(Duration.milliseconds(1_233), true), (.milliseconds(1_234), false)] {
            var h = harness(hybrid([("b1", nil)]))
            let bid = order(h, "b1")!.adID
            h.fill(bid, expiresIn: .milliseconds(1_234), price: 4)
            h.advance(elapsed)
            if shown {
                guard case .success(let ad) = h.show("s") else { return XCTFail("valid 1 ms before its exp") }
                XCTAssertEqual(ad.id, bid)
                XCTAssertTrue(h.losses.isEmpty)
            } else {
                guard case .failure = h.show("s") else { return XCTFail("shown at its exp") }
                XCTAssertEqual(h.losses.map(\.0), [bid])
                XCTAssertEqual(h.losses.map(\.1), [.expired], "expired unshown: loss reason 2")
            }
        }
    }

    func testTheBestBidsStayForAsManyAdsAsTheSlotWants() {
        var h = harness(hybrid(buffer: 2, [("b1", nil), ("b2", nil), ("b3", nil)]))
        let bids = ["b1", "b2", "b3"].map { order(h, $0)!.adID }
        for (id, price) in zip(bids, [1.0, 5.0, 3.0]) { h.fill(id, price: price) }
        XCTAssertEqual(h.losses.map(\.0), [bids[0]], "two wanted: 5 and 3 stay, 1 lost")
        var prices: [Double] = []
        for _ in 0..<2 {
            guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
            prices.append(ad.price)
        }
        XCTAssertEqual(prices, [5, 3])
    }

    func testPlacesTheBidsLeaveOpenAreWalkedAtOnceWhateverTheirECPM() {
        var h = harness(hybrid(buffer: 2, [("w1", 1), ("w2", 2), ("w3", 9), ("b1", nil)]))
        h.fill(order(h, "b1")!.adID, price: 5)
        XCTAssertEqual(h.loads.map(\.plugin), ["b1", "w1"], "two wanted, one bid: the open place is walked, from the top")
        h.report(.failed(.noFill, networkCode: 0, message: ""), order(h, "w1")!.adID)
        XCTAssertEqual(h.loads.map(\.plugin), ["b1", "w1", "w2"])
        h.fill(order(h, "w2")!.adID)
        XCTAssertEqual(h.loads.last!.plugin, "w3", "every place taken: only an entry beating the lowest kept price, 2")
        h.fill(order(h, "w3")!.adID)
        XCTAssertEqual(h.losses.count, 0, "the walked w2 lost, not a bid: no bidder is told")
        XCTAssertEqual(h.status("s").counters.outbid, 1)
        var prices: [Double] = []
        for _ in 0..<2 {
            guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
            prices.append(ad.price)
        }
        XCTAssertEqual(prices, [9, 5])

        var none = harness(hybrid(buffer: 2, [("w1", nil), ("w2", nil), ("b1", nil)]))
        none.report(.failed(.noFill, networkCode: 0, message: ""), order(none, "b1")!.adID)
        XCTAssertEqual(none.loads.map(\.plugin), ["b1", "w1", "w1"], "no bid: both places walked at once, each from the top")
    }

    func testAPriceOutOfRangeOrABidWithoutOneIsThePluginsFaultAndTeachesNothing() {
        var h = harness(hybrid([("b1", nil), ("w1", nil)]))
        let bid = order(h, "b1")!.adID
        h.fill(bid)  // no price
        XCTAssertTrue(h.events.contains { $0.kind == .adFailed && $0.errorCode == .pluginFault && $0.adID == bid && ($0.message ?? "").contains("without a price") })
        let walked = order(h, "w1")!.adID
        h.fill(walked, price: -1)
        XCTAssertTrue(h.events.contains { $0.kind == .adFailed && $0.errorCode == .pluginFault && $0.adID == walked && ($0.message ?? "").contains("outside 0.0...100000.0") })
        XCTAssertEqual(h.status("s").ready, 0)
        XCTAssertNil(h.status("s").entries[1].learnedECPM, "a refused price is not learned")
        XCTAssertEqual(h.status("s").counters.errors, 2)
    }

    func testOneAbsurdPriceMovesTheLearnedECPMOnlyABit() {
        var paid = PaidAverage()
        paid.note(2)
        paid.note(100_000)
        XCTAssertEqual(paid.value!, 2 + PaidAverage.newest * (20 - 2), accuracy: 1e-9, "counted as ten times the average")
        paid.note(0)
        XCTAssertGreaterThan(paid.value!, 0, "nor does one zero")
    }

    func testAReloadDropsTheAuctionUnderWay() {
        let config = hybrid([("b1", nil), ("b2", nil), ("w1", 1)])
        var h = harness(config)
        h.fill(order(h, "b1")!.adID, price: 3)  // b2 still bidding
        var plain = config
        for i in plain.waterfall.indices { plain.waterfall[i].bidder = false }
        h.effects += h.engine.reconfigure(slots: [plain], settings: .init(backoffJitter: 0), now: h.now)
        h.effects += h.engine.reconfigure(slots: [config], settings: .init(backoffJitter: 0), now: h.now)
        h.fill(order(h, "b2")!.adID, price: 4)
        XCTAssertEqual(h.status("s").counters.outbid, 0, "the old auction decides nothing")
        var prices: [Double] = []
        for _ in 0..<2 {
            guard case .success(let ad) = h.show("s") else { return XCTFail("both bids stay ready") }
            prices.append(ad.price)
        }
        XCTAssertEqual(prices, [4, 3])
        XCTAssertEqual(h.loads.suffix(from: 2).map(\.plugin), ["b1", "b2"], "a fresh auction asks the bidders first, not the walk")
    }

    func testASlotWithPricesButNoBidderWalksItsWaterfallInOrder() {
        var h = harness(hybrid(buffer: 2, [("w1", 6), ("w2", 2)]))
        XCTAssertEqual(h.loads.map(\.plugin), ["w1", "w1"], "both places at once, each from the top")
        h.report(.failed(.noFill, networkCode: 0, message: ""), h.loads[0].adID)
        XCTAssertEqual(h.loads.map(\.plugin), ["w1", "w1", "w2"], "the failed place goes on below w1, which backs off")
        h.fill(h.loads[2].adID)
        h.fill(h.loads[1].adID)
        guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
        XCTAssertEqual(ad.price, 6, "the higher eCPM first")
    }

    func testNoShowWaitsForABidder() {
        var h = harness(hybrid(buffer: 1, [("b1", nil), ("b2", nil)]))
        guard case .failure(.noAdReady) = h.show("s") else { return XCTFail("a Show with nothing ready must fail at once") }
        let first = order(h, "b1")!.adID
        h.fill(first, price: 2)
        guard case .success(let ad) = h.show("s") else { return XCTFail("a bid in hand is shown while another is coming") }
        XCTAssertEqual(ad.id, first)
        h.fill(order(h, "b2")!.adID, price: 7)
        XCTAssertTrue(h.losses.isEmpty, "the shown ad won its viewer; the other is the round's only ad")
        guard case .success(let second) = h.show("s") else { return XCTFail("no ad") }
        XCTAssertEqual(second.price, 7)
    }

    func testABiddersRateLimitPacesItAsANetworksDoes() {
        var h = harness(hybrid([("b1", nil), ("b2", nil)]))
        h.report(.failed(.rateLimited, networkCode: 429, message: "slow down"), order(h, "b1")!.adID)
        XCTAssertTrue(h.events.contains { $0.kind == .networkPaused && $0.network == "b1" })
        h.fill(order(h, "b2")!.adID, price: 3)
        guard case .success = h.show("s") else { return XCTFail("no ad") }
        XCTAssertEqual(h.loads.suffix(1).map(\.plugin), ["b2"], "the next auction asks only the bidder not paused")
        let pausedUntil = h.now + h.engine.networkStatuses(at: h.now).first { $0.name == "b1" }!.paused
        XCTAssertGreaterThan(pausedUntil, h.now)
        // b2 keeps no-filling; b1 joins the first auction that starts after its pause.
        let asked = h.loads.count
        while h.now < pausedUntil + .seconds(10) {
            if let pending = h.loads.dropFirst(asked - 1).last(where: { $0.plugin == "b2" && !h.destroyed.contains($0.adID) }) {
                h.report(.failed(.noFill, networkCode: 0, message: ""), pending.adID)
            }
            h.advance(.milliseconds(500))
            if h.loads.dropFirst(asked).contains(where: { $0.plugin == "b1" }) { break }
        }
        XCTAssertGreaterThanOrEqual(h.now, pausedUntil, "not asked while paused")
        XCTAssertTrue(h.loads.dropFirst(asked).contains { $0.plugin == "b1" }, "asked again once its pause is over")
    }
}
