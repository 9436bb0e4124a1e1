import XCTest

@testable import AdorchEngine

/// docs/rules.md, "Loads in flight per network": one slot, or one app's Loads, cannot hold
/// every load a network admits while another slot waits for one. Issue 31: an app looping
/// Loads on a banner slot of network a left a preloaded slot of a no load to refill with.
final class InFlightShareTests: XCTestCase {
    private var engine: Engine!
    private var now = Moment(nanoseconds: 1_000_000_000)
    private var effects: [Effect] = []
    private var nextRequest: RequestID = 1

    private func start(_ slots: [SlotConfig], inFlight: Int) {
        engine = Engine(slots: slots, plugins: ["a"], settings: .init(backoffJitter: 0, maxLoadsInFlightPerNetwork: inFlight), seed: 3)
        effects = engine.advance(to: now)
    }

    /// A banner slot whose waterfall is `units` ad units, all of network a.
    private func banner(_ id: String, units: Int) -> SlotConfig {
        SlotConfig(id: id, format: .banner, buffer: 0, waterfall: (1...units).map { WaterfallEntry(plugin: "a", adUnitID: "u-\(id)-\($0)") },
                   width: 320, height: 50)
    }

    private func preloaded(_ id: String, buffer: Int) -> SlotConfig {
        SlotConfig(id: id, format: .interstitial, buffer: buffer, waterfall: [WaterfallEntry(plugin: "a", adUnitID: "u-\(id)")])
    }

    private var loads: [LoadOrder] { effects.compactMap { if case .load(let o) = $0 { o } else { nil } } }

    /// Load orders of `slot` the plugin has not answered yet, oldest first.
    private func inFlight(_ slot: String) -> [LoadOrder] {
        loads.filter { $0.slotID == slot && engine.ads[$0.adID]?.isLoading == true }
    }

    private var networkInFlight: Int { engine.networkStatuses(at: now).first { $0.name == "a" }!.loadsInFlight }

    /// The greedy app's next Load on `slot`: it calls again the moment one is answered.
    private func load(_ slot: String) {
        effects += engine.load(slot: slot, LoadParameters(), privacy: nil, request: nextRequest, now: now).1
        nextRequest += 1
    }

    private func fill(_ order: LoadOrder) {
        let items = order.format.isOnDemand ? [PayloadItem(json: "{}", hasHeadline: false)] : []
        effects += engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, items: items),
                                         for: order.adID, from: order.plugin, now: now)
    }

    private func show(_ slot: String) -> Bool {
        let (result, out) = engine.show(slot: slot, userID: "polite", privacy: nil, now: now)
        effects += out
        if case .success = result { return true }
        return false
    }

    private func ready(_ slot: String) -> Int { engine.slotStatuses(at: now).first { $0.config.id == slot }!.ready }

    /// The attack of issue 31: every time one of the flood's Loads is answered, the app calls
    /// Load again at once. The banner comes first in the config, so the config's order alone
    /// would favour its Loads.
    func testALoadFloodOnAnotherSlotOfTheNetworkLeavesAPreloadedSlotLoadsToRefillWith() {
        start([banner("feed", units: 1), preloaded("reward", buffer: 2)], inFlight: 4)
        for order in inFlight("reward") { fill(order) }
        XCTAssertEqual(ready("reward"), 2)
        for _ in 0..<5 { load("feed") }
        XCTAssertEqual(inFlight("feed").count, 4, "alone, the Loads take every load the network admits")

        var polite = 0
        for round in 0..<20 {
            now = now + .milliseconds(100)
            if show("reward") { polite += 1 }
            fill(inFlight("feed")[0])
            load("feed")
            XCTAssertEqual(networkInFlight, 4, "round \(round): the network stays at its limit")
            guard let refill = inFlight("reward").first else { return XCTFail("round \(round): the preloaded slot got no load") }
            fill(refill)
            XCTAssertEqual(ready("reward"), 2, "round \(round): refilled while the flood goes on")
        }
        XCTAssertEqual(polite, 20, "every polite Show found an ad")
        XCTAssertEqual(inFlight("feed").count, 3, "the flood keeps the rest of the network's loads")
    }

    /// A Load whose attempt failed goes on to its next entry at once, before any slot looks
    /// again: here another ad unit of the same network. The load that ended is the waiting
    /// slot's, not the Load's.
    func testALoadMovingToAnotherUnitOfTheNetworkDoesNotTakeTheLoadAWaitingSlotIsOwed() {
        start([banner("feed", units: 2), preloaded("reward", buffer: 1)], inFlight: 2)
        for order in inFlight("reward") { fill(order) }
        for _ in 0..<2 { load("feed") }
        XCTAssertEqual(inFlight("feed").count, 2)
        XCTAssertTrue(show("reward"))
        XCTAssertTrue(inFlight("reward").isEmpty, "the network is at its limit: the slot waits")
        let failed = inFlight("feed")[0]
        effects += engine.pluginReported(.failed(.noFill, networkCode: 0, message: ""), for: failed.adID, from: "a", now: now)
        XCTAssertEqual(inFlight("reward").count, 1, "the freed load went to the waiting slot")
        XCTAssertEqual(inFlight("feed").count, 1, "the failed Load did not take it through its second unit")
    }

    /// Between preloaded slots: a slot short of many ads, first in the config, does not take
    /// every freed load while another slot waits holding none.
    func testASlotShortOfManyAdsLeavesAFreedLoadToASlotHoldingNone() {
        start([preloaded("burst", buffer: 6), preloaded("quiet", buffer: 1)], inFlight: 2)
        XCTAssertEqual(inFlight("burst").count, 1, "round by round: one load each")
        fill(inFlight("quiet")[0])
        XCTAssertEqual(inFlight("burst").count, 2, "nobody else waits: the short slot takes the free load")
        XCTAssertTrue(show("quiet"))
        XCTAssertTrue(inFlight("quiet").isEmpty)
        fill(inFlight("burst")[0])
        XCTAssertEqual(inFlight("quiet").count, 1, "the slot holding none goes first")
        XCTAssertEqual(inFlight("burst").count, 1)
    }

    /// Two slots waiting for the network, neither holding a load: the one that waited longer
    /// gets the first freed load, whatever the config's order, and the other the next, both
    /// before the flood's Loads.
    func testWaitingSlotsTakeFreedLoadsInTheOrderTheyBeganToWait() {
        start([banner("feed", units: 1), preloaded("late", buffer: 1), preloaded("early", buffer: 1)], inFlight: 2)
        for order in inFlight("late") + inFlight("early") { fill(order) }
        for _ in 0..<2 { load("feed") }
        XCTAssertTrue(show("early"))
        now = now + .milliseconds(10)
        XCTAssertTrue(show("late"))
        fill(inFlight("feed")[0])
        load("feed")
        XCTAssertEqual(inFlight("early").count, 1, "waiting longest, it goes first")
        XCTAssertEqual(inFlight("late").count, 0)
        fill(inFlight("feed")[0])
        load("feed")
        XCTAssertEqual(inFlight("late").count, 1, "then the next waiting slot")
        XCTAssertTrue(inFlight("feed").isEmpty)
    }

    /// One slot alone on its network is not held back: it may hold every load in flight.
    func testASlotAloneOnItsNetworkStillTakesEveryLoadInFlight() {
        start([preloaded("reward", buffer: 6)], inFlight: 4)
        XCTAssertEqual(inFlight("reward").count, 4)
        fill(inFlight("reward")[0])
        XCTAssertEqual(inFlight("reward").count, 4, "a finished load frees a place for the same slot")

        start([banner("feed", units: 1)], inFlight: 4)
        for _ in 0..<5 { load("feed") }
        XCTAssertEqual(inFlight("feed").count, 4, "a Load alone takes every place, the fifth finds none")
        let refused = effects.contains {
            if case .completeLoad(_, .failure(let failure)) = $0 { failure.code == .noFill } else { false }
        }
        XCTAssertTrue(refused)
    }
}
