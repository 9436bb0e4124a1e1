import XCTest

@testable import AdorchEngine

/// docs/rules.md, "Fair share" on a manual clock: a uid taking a slot's ad leaves one for
/// each other uid that asked within the window and took fewer, and the slot loads those on
/// top of its buffer.
final class FairShareTests: XCTestCase {
    private var engine = Engine(slots: [], plugins: [])
    private var now = Moment(nanoseconds: 1_000_000_000)
    /// Loads started and not answered yet, oldest first.
    private var loading: [AdID] = []
    private let greedy: UInt32 = 1001
    private let polite: UInt32 = 1002

    /// An interstitial slot of `buffer` ads, all loaded.
    private func start(buffer: Int = 2, window: Duration = .seconds(60)) {
        var settings = SchedulerSettings(backoffJitter: 0, maxLoadsInFlightPerNetwork: 100)
        settings.budgets.fairShareWindow = window
        let config = SlotConfig(id: "s", format: .interstitial, buffer: buffer, ttl: .seconds(3600),
                                waterfall: [WaterfallEntry(plugin: "a", adUnitID: "u", timeout: .seconds(2))])
        engine = Engine(slots: [config], plugins: ["a"], settings: settings, seed: 3)
        loading = []
        note(engine.advance(to: now))
        fill()
    }

    private func note(_ effects: [Effect]) {
        loading += effects.compactMap { if case .load(let order) = $0 { order.adID } else { nil } }
    }

    /// Every load under way fills (and whatever those start, too).
    private func fill() {
        while !loading.isEmpty {
            let id = loading.removeFirst()
            note(engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1), for: id, from: "a", now: now))
        }
    }

    private func show(_ uid: UInt32) -> Result<ShownAd, ShowError> {
        let (result, effects) = engine.show(slot: "s", userID: nil, privacy: nil, holder: uid, now: now)
        note(effects)
        return result
    }

    private var status: SlotStatus { engine.slotStatuses(at: now)[0] }

    func testASingleUidTakesEveryReadyAd() throws {
        start(buffer: 3)
        for _ in 0..<3 { XCTAssertNoThrow(try show(greedy).get()) }
        XCTAssertEqual(show(greedy).failureValue, .noAdReady(slot: "s"), "an empty slot, not the fair share")
        XCTAssertEqual(status.target.count, 3, "no other uid: nothing held on top of the buffer")
        fill()
        for _ in 0..<3 { XCTAssertNoThrow(try show(greedy).get()) }
    }

    /// The greedy uid has taken more than the polite one: it must leave it one ready ad.
    private func greedyAhead() throws {
        start()
        XCTAssertNoThrow(try show(polite).get())
        XCTAssertNoThrow(try show(greedy).get(), "equal shares: nothing held")
        fill()
        XCTAssertNoThrow(try show(greedy).get(), "equal shares again: nothing held")
        XCTAssertEqual(status.ready, 1)
    }

    func testAGreedyUidLeavesOneReadyAdForAPoliteOne() throws {
        try greedyAhead()
        let shows = status.counters.shows
        XCTAssertEqual(show(greedy).failureValue, .fairShare(slot: "s"))
        XCTAssertEqual(status.ready, 1, "a refused Show takes no ad")
        XCTAssertEqual(status.counters.shows, shows)
        XCTAssertNoThrow(try show(polite).get(), "the held ad is the polite uid's")
        // Root, the operator, is exempt, as from the budgets per uid; and holds nothing.
        fill()
        for _ in 0..<status.ready { XCTAssertNoThrow(try show(0).get()) }
    }

    func testTheHoldEndsWhenThePoliteUidHasNotAskedForAWindow() throws {
        try greedyAhead()
        now = now + .seconds(59)
        note(engine.advance(to: now))
        XCTAssertEqual(show(greedy).failureValue, .fairShare(slot: "s"), "the polite uid asked within the window")
        now = now + .seconds(1)
        note(engine.advance(to: now))
        XCTAssertNoThrow(try show(greedy).get(), "it asked a window ago: forgotten")
        XCTAssertEqual(status.target.count, 2, "nothing held on top of the buffer any more")
    }

    func testHeldAdsAreLoadedOnTopOfTheBufferSoTheGreedyUidIsStillServed() throws {
        try greedyAhead()
        XCTAssertEqual(show(greedy).failureValue, .fairShare(slot: "s"))
        XCTAssertEqual(status.target.count, 3, "the buffer of 2, and 1 held for the polite uid")
        XCTAssertTrue(status.target.reason.hasSuffix("plus ads held for other apps by the fair share"), status.target.reason)
        XCTAssertEqual(status.ready + status.loading, 3, "the refill loads the held ad on top")
        fill()
        XCTAssertEqual(status.ready, 3)
        // The buffer's worth for the greedy uid, the held one left.
        XCTAssertNoThrow(try show(greedy).get())
        XCTAssertNoThrow(try show(greedy).get())
        XCTAssertEqual(show(greedy).failureValue, .fairShare(slot: "s"))
        XCTAssertNoThrow(try show(polite).get())
    }

    func testEveryUidThatTookFewerIsLeftOneAndEqualSharesHoldNothing() throws {
        start(buffer: 4)
        let third: UInt32 = 1003
        for uid in [polite, third, greedy, greedy] { XCTAssertNoThrow(try show(uid).get()) }
        XCTAssertEqual(status.ready, 0)
        fill()
        XCTAssertEqual(status.target.count, 6, "two held, for the two uids that took fewer than the greedy one")
        fill()
        XCTAssertEqual(status.ready, 6)
        for _ in 0..<4 { XCTAssertNoThrow(try show(greedy).get()) }
        XCTAssertEqual(show(greedy).failureValue, .fairShare(slot: "s"), "two left, one for each")
        XCTAssertNoThrow(try show(polite).get())
        XCTAssertNoThrow(try show(third).get())
    }

    /// Uids that asked once and never came back hold at most the buffer's bound between them:
    /// the slot does not load an ad more for each.
    func testWhatIsHeldIsBoundedByTheBuffer() throws {
        start(buffer: 2)
        let oneShot = (2000..<2010).map { UInt32($0) }
        for uid in oneShot {
            _ = show(uid)
            fill()
        }
        for _ in 0..<2 {
            XCTAssertNoThrow(try show(greedy).get())
            fill()
        }
        XCTAssertEqual(status.target.count, 4, "the buffer of 2, and at most 2 held for ten uids")
        fill()
        XCTAssertEqual(status.ready, 4)
        XCTAssertNoThrow(try show(greedy).get())
        XCTAssertNoThrow(try show(greedy).get())
        XCTAssertEqual(show(greedy).failureValue, .fairShare(slot: "s"), "2 left, the most it must leave")
    }

    func testTheUidsRememberedPerSlotAreBounded() {
        var share = FairShare()
        let window = Duration.seconds(60)
        for uid in 1...UInt32(FairShare.uidsAtMost) {
            share.asked(uid, at: now, window: window)
            now = now + .milliseconds(1)
        }
        share.asked(greedy, at: now, window: window)
        share.took(greedy, at: now, window: window)
        XCTAssertEqual(share.held(from: greedy, at: now, window: window), FairShare.uidsAtMost - 1,
                       "uid 1, the one that asked longest ago, was dropped for the newcomer")
        XCTAssertEqual(share.mostHeld(at: now, window: window), FairShare.uidsAtMost - 1)
        // 70 s of Shows, each a take, counted in groups of a tenth of the window: the uids that
        // asked at the start are forgotten, and one that asks now is left one ad.
        for _ in 0..<10_000 {
            share.asked(greedy, at: now, window: window)
            share.took(greedy, at: now, window: window)
            now = now + .milliseconds(7)
        }
        XCTAssertEqual(share.held(from: greedy, at: now, window: window), 0, "no other uid asked within the window")
        share.asked(2, at: now, window: window)
        XCTAssertEqual(share.held(from: greedy, at: now, window: window), 1)
        XCTAssertEqual(share.held(from: 2, at: now, window: window), 0, "uid 2 took fewer than no one")
    }
}
