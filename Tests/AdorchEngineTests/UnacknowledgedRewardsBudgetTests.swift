import XCTest

@testable import AdorchEngine

/// max_unacknowledged_rewards_per_uid on a manual clock (docs/rules.md, "A bound on
/// unacknowledged rewards"): at the bound a uid's rewarded Show is refused before any ad is
/// taken; its other Shows, other uids and root are not held; a reward already earned is
/// granted whatever the count.
final class UnacknowledgedRewardsBudgetTests: XCTestCase {
    private var engine = Engine(slots: [], plugins: [])
    private let now = Moment(nanoseconds: 1_000_000_000)
    private let app: UInt32 = 1000
    private let bound = 3

    /// A rewarded slot "r" and an interstitial slot "i", four valid ads each.
    override func setUp() {
        let entry = WaterfallEntry(plugin: "a", adUnitID: "u", timeout: .seconds(2))
        let slots = [SlotConfig(id: "r", format: .rewarded, buffer: 4, ttl: .seconds(600), waterfall: [entry]),
                     SlotConfig(id: "i", format: .interstitial, buffer: 4, ttl: .seconds(600), waterfall: [entry])]
        var settings = SchedulerSettings(backoffJitter: 0, shownLifetime: .seconds(100), maxLoadsInFlightPerNetwork: 100)
        settings.budgets.maxUnacknowledgedRewards = bound
        engine = Engine(slots: slots, plugins: ["a"], settings: settings, seed: 3)
        for order in engine.advance(to: now).compactMap({ if case .load(let o) = $0 { o } else { nil } }) {
            _ = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1), for: order.adID, from: "a", now: now)
        }
    }

    private func show(_ slot: String, _ uid: UInt32, waiting: Int) -> Result<ShownAd, ShowError> {
        engine.show(slot: slot, userID: "viewer", privacy: nil, holder: uid, rewardsWaiting: waiting, now: now).0
    }

    private func status(_ slot: String) -> SlotStatus { engine.slotStatuses(at: now).first { $0.config.id == slot }! }

    func testARewardedShowIsRefusedAtTheBoundBeforeAnyAdIsTaken() {
        XCTAssertNoThrow(try show("r", app, waiting: bound - 1).get(), "below the bound")
        let before = status("r")
        XCTAssertEqual(show("r", app, waiting: bound).failureValue, .tooManyUnacknowledgedRewards(uid: app, waiting: bound, limit: bound))
        XCTAssertEqual(show("r", app, waiting: bound + 7).failureValue,
                       .tooManyUnacknowledgedRewards(uid: app, waiting: bound + 7, limit: bound), "past it, as when ads held were rewarded")
        XCTAssertEqual(status("r").ready, before.ready, "a refused Show takes no ad")
        XCTAssertEqual(status("r").counters.shows, before.counters.shows)

        // The same call through requestShow answers at once, with nothing for a plugin to present.
        let effects = engine.requestShow(slot: "r", userID: "viewer", privacy: nil, holder: app, rewardsWaiting: bound, request: 9, now: now)
        XCTAssertEqual(effects, [.completeShow(9, .failure(.tooManyUnacknowledgedRewards(uid: app, waiting: bound, limit: bound)))])
    }

    func testOnlyTheUidsRewardedShowsAreHeld() {
        XCTAssertNoThrow(try show("i", app, waiting: bound).get(), "an interstitial earns nothing: not held")
        XCTAssertNoThrow(try show("r", app + 1, waiting: 0).get(), "another uid has a bound of its own")
        XCTAssertNoThrow(try show("r", 0, waiting: bound * 10).get(), "root, the operator, is exempt")
    }

    func testARewardEarnedOnAnAdAlreadyShownIsGrantedPastTheBound() throws {
        // Two ads handed out below the bound; by their completes the uid is past it.
        let first = try show("r", app, waiting: bound - 1).get()
        let second = try show("r", app, waiting: bound - 1).get()
        for ad in [first, second] {
            let (result, effects) = engine.report(.complete, for: ad.id, now: now)
            XCTAssertNoThrow(try result.get())
            XCTAssertTrue(effects.contains { if case .grantReward(let grant) = $0 { grant.adID == ad.id } else { false } },
                          "the complete of an ad on screen is rewarded whatever the count: \(effects)")
        }
        XCTAssertNotNil(show("r", app, waiting: bound + 1).failureValue)
    }
}
