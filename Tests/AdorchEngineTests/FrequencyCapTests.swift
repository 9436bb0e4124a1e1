import XCTest

@testable import AdorchEngine

/// Frequency caps and pacing (docs/caps.md) on a manual clock: what a Show is let in, what
/// Capped says, what counts, and what the scheduler holds.
final class FrequencyCapTests: XCTestCase {
    private var engine = Engine(slots: [], plugins: [])
    private var now = Moment(nanoseconds: 1_000_000_000)
    /// Every effect since the last `clear`, loads included.
    private var effects: [Effect] = []
    /// Networks that fill every load at once, at these prices; others leave loads pending.
    private var filling: [String: Double] = ["a": 2, "b": 1]

    private func start(_ slots: [SlotConfig]) {
        engine = Engine(slots: slots, plugins: ["a", "b"], settings: .init(backoffJitter: 0, maxLoadsInFlightPerNetwork: 100), seed: 5)
        run(engine.advance(to: now))
    }

    private func slot(_ id: String = "s", caps: [FrequencyRule] = [], counting: CapCounting = .impression, buffer: Int = 2,
                      parallel: Int = 1, ttl: Duration = .seconds(4 * 86_400),
                      waterfall: [WaterfallEntry] = [WaterfallEntry(plugin: "a")]) -> SlotConfig {
        var config = SlotConfig(id: id, format: .interstitial, buffer: buffer, ttl: ttl, waterfall: waterfall,
                                parallel: parallel)
        config.caps = caps
        config.capCounting = counting
        return config
    }

    /// Carries out the engine's effects as a network that fills at once would.
    private func run(_ new: [Effect]) {
        effects += new
        for case .load(let order) in new {
            guard let price = filling[order.plugin] else { continue }
            run(engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: price), for: order.adID, from: order.plugin, now: now))
        }
    }

    private func at(_ offset: Duration) { now = Moment(nanoseconds: 1_000_000_000) + offset }

    private func advance(to offset: Duration) {
        at(offset)
        run(engine.advance(to: now))
    }

    /// A Show for `user`, and on success the app's impression report.
    @discardableResult
    private func watch(_ user: String?, slot: String = "s", impression: Bool = true) -> Result<ShownAd, ShowError> {
        let (result, shown) = engine.show(slot: slot, userID: user, privacy: nil, now: now)
        run(shown)
        if impression, case .success(let ad) = result {
            let (reported, more) = engine.report(.impression, for: ad.id, now: now)
            XCTAssertNoThrow(try reported.get())
            run(more)
        }
        return result
    }

    private func assertCapped(_ result: Result<ShownAd, ShowError>, rule: String, retryAfterMS: Int64,
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.failure, .capped(slot: "s", rule: rule, retryAfter: .milliseconds(retryAfterMS)), file: file, line: line)
    }

    private func assertShown(_ result: Result<ShownAd, ShowError>, file: StaticString = #filePath, line: UInt = #line) {
        if case .failure(let error) = result { XCTFail("expected an ad, got \(error)", file: file, line: line) }
    }

    private var loadsStarted: [LoadOrder] { effects.compactMap { if case .load(let order) = $0 { order } else { nil } } }
    private var recorded: [CountedImpression] { effects.compactMap { if case .recordImpression(let i) = $0 { i } else { nil } } }

    // MARK: Rules

    func testAnHourlyCapLetsThreeInAndThenAnswersCappedUntilTheOldestLeavesTheWindow() {
        start([slot(caps: [.cap(3, per: .seconds(3600))])])
        for minute in [0, 10, 20] {
            advance(to: .seconds(60 * minute))
            assertShown(watch("u"))
        }
        advance(to: .seconds(30 * 60))
        assertCapped(watch("u"), rule: "3 per 1h per user", retryAfterMS: 30 * 60_000)
        advance(to: .seconds(3600) - .milliseconds(1))
        assertCapped(watch("u"), rule: "3 per 1h per user", retryAfterMS: 1)
        advance(to: .seconds(3600))
        assertShown(watch("u"))
        assertCapped(watch("u"), rule: "3 per 1h per user", retryAfterMS: 10 * 60_000)
    }

    func testADailyCapCountsTheWholeDay() {
        start([slot(caps: [.cap(10, per: .seconds(86_400))])])
        for hour in 0..<10 {
            advance(to: .seconds(3600 * hour))
            assertShown(watch("u"))
        }
        advance(to: .seconds(23 * 3600))
        assertCapped(watch("u"), rule: "10 per 1d per user", retryAfterMS: 3600 * 1000)
        advance(to: .seconds(86_400))
        assertShown(watch("u"))
    }

    func testPacingSpacesTheShowsOfOneUser() {
        start([slot(caps: [.pacing(.seconds(30))])])
        assertShown(watch("u"))
        advance(to: .milliseconds(10_500))
        assertCapped(watch("u"), rule: "pacing 30s per user", retryAfterMS: 19_500)
        advance(to: .seconds(30))
        assertShown(watch("u"))
    }

    func testPerUserRulesCountEachUserAloneAndPerSlotRulesCountEveryone() {
        start([slot(caps: [.cap(1, per: .seconds(3600))]), slot("all", caps: [.cap(2, per: .seconds(3600), scope: .slot)])])
        assertShown(watch("u"))
        assertShown(watch("v"))
        assertShown(watch(nil))
        assertCapped(watch("u"), rule: "1 per 1h per user", retryAfterMS: 3_600_000)
        assertCapped(watch(nil), rule: "1 per 1h per user", retryAfterMS: 3_600_000)  // Shows without a user id are one user
        assertShown(watch("w"))

        advance(to: .seconds(60))
        assertShown(watch("u", slot: "all"))
        advance(to: .seconds(120))
        assertShown(watch("v", slot: "all"))
        let third = watch("w", slot: "all")
        XCTAssertEqual(third.failure, .capped(slot: "all", rule: "2 per 1h per slot", retryAfter: .seconds(3540)))
    }

    func testTheStricterRuleWins() {
        start([slot(caps: [.cap(3, per: .seconds(3600)), .pacing(.seconds(600))])])
        assertShown(watch("u"))
        advance(to: .seconds(60))
        assertCapped(watch("u"), rule: "pacing 10m per user", retryAfterMS: 540_000)
        advance(to: .seconds(1200))
        assertShown(watch("u"))
        advance(to: .seconds(2400))
        assertShown(watch("u"))
        // Pacing frees at 50 min, the cap only at 60: the cap is the stricter now.
        advance(to: .seconds(2700))
        assertCapped(watch("u"), rule: "3 per 1h per user", retryAfterMS: 900_000)
        advance(to: .seconds(3599))
        assertCapped(watch("u"), rule: "3 per 1h per user", retryAfterMS: 1000)
    }

    func testRetryAfterIsExactToTheMillisecondAndRoundsUpWhatIsLess() {
        start([slot(caps: [.pacing(.seconds(2))])])
        at(.nanoseconds(1_234_567))
        assertShown(watch("u"))
        // Frees at 2.001234567 s from the start: 1 ms and 234,567 ns after 2 s.
        at(.seconds(1))
        assertCapped(watch("u"), rule: "pacing 2s per user", retryAfterMS: 1002)  // 1001.234567 ms, up
        at(.nanoseconds(2_001_234_567 - 1_000_000))
        assertCapped(watch("u"), rule: "pacing 2s per user", retryAfterMS: 1)
        at(.nanoseconds(2_001_234_566))
        assertCapped(watch("u"), rule: "pacing 2s per user", retryAfterMS: 1)  // 1 ns, up to 1 ms
        at(.nanoseconds(2_001_234_567))
        assertShown(watch("u"))
    }

    func testACappedShowChangesNothing() {
        start([slot(caps: [.cap(1, per: .seconds(60))])])
        assertShown(watch("u"))
        let before = engine.slotStatuses(at: now)[0]
        let (result, capped) = engine.show(slot: "s", userID: "u", privacy: nil, now: now)
        XCTAssertEqual(result.failure, .capped(slot: "s", rule: "1 per 1m per user", retryAfter: .seconds(60)))
        XCTAssertEqual(capped, [])
        let after = engine.slotStatuses(at: now)[0]
        XCTAssertEqual(after.readyAds, before.readyAds)
        XCTAssertEqual(after.counters, before.counters)
        XCTAssertEqual(after.target.demandPerMinute, before.target.demandPerMinute, "a capped Show is no demand")
    }

    func testShowsInFlightTogetherPassARuleOnlyAsOftenAsItAllows() {
        // Plugins answer ad_show later (an isolated plugin): every Show waits on its answer.
        start([slot(caps: [.cap(1, per: .seconds(3600))], counting: .show, buffer: 20)])
        for request in 1...20 { run(engine.requestShow(slot: "s", userID: "racer", privacy: nil, request: RequestID(request), now: now)) }
        let taken = effects.compactMap { if case .show(let id, _, _) = $0 { id } else { nil } }
        XCTAssertEqual(taken.count, 1, "the first Show's ad counts from the moment it is taken")
        let capped = effects.filter { if case .completeShow(_, .failure(.capped)) = $0 { true } else { false } }
        XCTAssertEqual(capped.count, 19)
        run(engine.showAnswered(taken[0], presented: true, now: now))
        XCTAssertEqual(recorded.count, 1)
    }

    func testAShownAdCountsUntilItIsSeenOrEndsUnseen() {
        start([slot(caps: [.pacing(.seconds(30))])])
        let first = try! watch("u", impression: false).get()
        // A double tap: the first ad is not reported yet, and still holds the second Show.
        assertCapped(watch("u"), rule: "pacing 30s per user", retryAfterMS: 30_000)
        advance(to: .seconds(5))
        // Closed unseen: it never counted, and the user may see another at once.
        run(engine.report(.close, for: first.id, now: now).1)
        assertShown(watch("u"))
        XCTAssertEqual(recorded.count, 1, "only the ad seen is stored")
    }

    func testUsersOfDifferentAppsAreApartAndIDsAreBytes() {
        start([slot(caps: [.cap(1, per: .seconds(60))], counting: .show, buffer: 4)])
        func show(_ user: String, _ app: UInt32) -> Result<ShownAd, ShowError> {
            let (result, shown) = engine.show(slot: "s", userID: user, privacy: nil, holder: app, now: now)
            run(shown)
            return result
        }
        assertShown(show("alice", 1001))
        XCTAssertEqual(show("alice", 1001).failure, .capped(slot: "s", rule: "1 per 1m per user", retryAfter: .seconds(60)))
        assertShown(show("alice", 1002))
        // Canonically equivalent, other bytes: another user, as the app sent them.
        assertShown(show("\u{E9}", 1001))
        assertShown(show("e\u{301}", 1001))
    }

    // MARK: Networks

    func testAnEntryCapMakesAShowSkipThatNetworksAdsForTheUserItHolds() {
        let entries = [WaterfallEntry(plugin: "a", adUnitID: "hi", caps: [.cap(1, per: .seconds(3600))]), WaterfallEntry(plugin: "b")]
        // Parallel: both networks fill every refill; a's ads pay more, so a Show takes them first.
        start([slot(buffer: 2, parallel: 2, waterfall: entries)])
        XCTAssertEqual(try watch("u").get().network, "a")
        let ready = engine.slotStatuses(at: now)[0].readyAds.compactMap { engine.ads[$0]?.plugin }
        XCTAssertTrue(ready.contains("a"), "an ad of a is ready: \(ready)")
        XCTAssertEqual(try watch("u").get().network, "b", "a's rule holds u: its ads are skipped")
        XCTAssertEqual(try watch("v").get().network, "a", "a holds only the user it counted")
    }

    func testAnEntryCapOnTheWholeSlotMakesTheWaterfallSkipThatNetwork() {
        let entries = [WaterfallEntry(plugin: "a", caps: [.cap(2, per: .seconds(600), scope: .slot)]), WaterfallEntry(plugin: "b")]
        start([slot(buffer: 1, waterfall: entries)])
        XCTAssertEqual(loadsStarted.map(\.plugin), ["a"])
        effects = []
        assertShown(watch("u"))
        XCTAssertEqual(loadsStarted.map(\.plugin), ["a"], "one impression of two: a is still asked")
        effects = []
        advance(to: .seconds(100))
        // The ad v takes is a's second in the window: a holds from now, and the waterfall goes to b.
        XCTAssertEqual(try watch("v").get().network, "a")
        XCTAssertEqual(loadsStarted.map(\.plugin), ["b"])
        effects = []
        advance(to: .seconds(200))
        XCTAssertEqual(try watch("w").get().network, "b")
        XCTAssertEqual(loadsStarted.map(\.plugin), ["b"], "the waterfall skips a")
        effects = []
        advance(to: .seconds(600))
        XCTAssertEqual(try watch("x").get().network, "b")
        XCTAssertEqual(loadsStarted.map(\.plugin), ["a"], "a's first impression left the window: a is asked again")
        effects = []
        advance(to: .seconds(601))
        XCTAssertEqual(try watch("y").get().network, "a", "its ad pays more")
        XCTAssertEqual(loadsStarted.map(\.plugin), ["b"], "a holds again: its impressions of 100 s and 601 s")
    }

    func testWhenEveryNetworkHoldsTheUserTheShowIsCappedUntilTheSoonestFrees() {
        let entries = [WaterfallEntry(plugin: "a", caps: [.cap(1, per: .seconds(600))]),
                       WaterfallEntry(plugin: "b", adUnitID: "x", caps: [.pacing(.seconds(300))])]
        start([slot(buffer: 2, parallel: 2, waterfall: entries)])
        XCTAssertEqual(try watch("u").get().network, "a")
        advance(to: .seconds(10))
        XCTAssertEqual(try watch("u").get().network, "b")
        advance(to: .seconds(20))
        assertCapped(watch("u"), rule: "b/x: pacing 5m per user", retryAfterMS: 290_000)
        XCTAssertEqual(engine.capHold(slot: "s", user: CapUser(uid: nil, id: "u"), now: now)?.ruleName, "b/x: pacing 5m per user")
        XCTAssertNil(engine.capHold(slot: "s", user: CapUser(uid: nil, id: "v"), now: now))
        assertShown(watch("v"))
    }

    func testASlotRuleAndEveryNetworksRuleTogetherGiveTheLaterTime() {
        let entries = [WaterfallEntry(plugin: "a", adUnitID: "n1", caps: [.cap(1, per: .seconds(8))])]
        start([slot(caps: [.cap(1, per: .seconds(3))], counting: .show, buffer: 2, waterfall: entries)])
        assertShown(watch("u"))
        assertCapped(watch("u"), rule: "a/n1: 1 per 8s per user", retryAfterMS: 8000)
        advance(to: .seconds(3))
        assertCapped(watch("u"), rule: "a/n1: 1 per 8s per user", retryAfterMS: 5000)
        XCTAssertEqual(engine.capHold(slot: "s", user: CapUser(uid: nil, id: "u"), now: now)?.retryAfter, .seconds(5))
    }

    func testAUserEveryReadyAdIsHeldForGetsALoadFromANetworkThatMayServeThem() {
        let entries = [WaterfallEntry(plugin: "a", adUnitID: "premium", caps: [.cap(1, per: .seconds(3600))]),
                       WaterfallEntry(plugin: "b", adUnitID: "standard")]
        start([slot(buffer: 2, waterfall: entries)])
        XCTAssertEqual(try watch("p1").get().network, "a")
        XCTAssertEqual(engine.slotStatuses(at: now)[0].readyAds.compactMap { engine.ads[$0]?.plugin }, ["a", "a"])
        effects = []
        filling = ["a": 2]  // b answers later
        // Two premium ads ready, neither for p1: a load from b, once, and p1 is told to wait for it.
        XCTAssertEqual(watch("p1").failure, .noAdReady(slot: "s"))
        XCTAssertEqual(watch("p1").failure, .noAdReady(slot: "s"))
        XCTAssertEqual(loadsStarted.map(\.plugin), ["b"])
        run(engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1), for: loadsStarted[0].adID, from: "b", now: now))
        XCTAssertEqual(try watch("p1").get().network, "b")
    }

    // MARK: Counting

    func testAnImpressionCountsOnceWhoeverReportsIt() {
        start([slot(caps: [.cap(2, per: .seconds(60))])])
        let ad = try! watch("u", impression: false).get()
        XCTAssertEqual(engine.capUses(slot: "s", user: CapUser(uid: nil, id: "u"), now: now)?.first?.counted, 1, "handed out: counted until it is seen or ends")
        XCTAssertEqual(recorded, [], "not stored before it is seen")
        run(engine.pluginReported(.other(name: "impression"), for: ad.id, from: "a", now: now))
        run(engine.report(.impression, for: ad.id, now: now).1)
        XCTAssertEqual(engine.capUses(slot: "s", user: CapUser(uid: nil, id: "u"), now: now)?.first?.counted, 1)
        XCTAssertEqual(recorded, [CountedImpression(slot: "s", network: CapNetwork(plugin: "a", adUnitID: ""), user: CapUser(uid: nil, id: "u"), at: now.capTime)])
    }

    func testASlotThatCountsOnShowCountsTheAdItsPluginPresentedOnce() {
        start([slot(caps: [.cap(1, per: .seconds(60))], counting: .show)])
        run(engine.requestShow(slot: "s", userID: "u", privacy: nil, request: 1, now: now))
        let first = effects.compactMap { if case .show(let id, _, _) = $0 { id } else { nil } }.last!
        XCTAssertEqual(recorded, [], "not before the plugin presented it")
        // Not presented: the call takes the next ad, and only the one presented counts.
        run(engine.showAnswered(first, presented: false, now: now))
        let second = effects.compactMap { if case .show(let id, _, _) = $0 { id } else { nil } }.last!
        run(engine.showAnswered(second, presented: true, now: now))
        XCTAssertEqual(recorded.count, 1)
        run(engine.report(.impression, for: second, now: now).1)
        XCTAssertEqual(recorded.count, 1, "the impression does not count it again")
        assertCapped(watch("u"), rule: "1 per 1m per user", retryAfterMS: 60_000)
    }

    func testAClickACompleteOrARewardCountsAnAdNeverReportedAsSeen() {
        start([slot(caps: [.cap(1, per: .seconds(3600))], buffer: 3)])
        for (user, event) in [("u", ViewerEvent.click), ("v", .complete)] {
            let ad = try! watch(user, impression: false).get()
            run(engine.report(event, for: ad.id, now: now).1)
            run(engine.report(.close, for: ad.id, now: now).1)
            assertCapped(watch(user), rule: "1 per 1h per user", retryAfterMS: 3_600_000)
        }
        XCTAssertEqual(recorded.count, 2)
    }

    func testAnImpressionReportedLateCountsWhenItsShowTookTheAd() {
        start([slot(caps: [.cap(1, per: .seconds(20))], buffer: 3)])
        let first = try! watch("u", impression: false).get()
        advance(to: .seconds(5))
        assertCapped(watch("u"), rule: "1 per 20s per user", retryAfterMS: 15_000)
        // Reported at 5 s, it counts at 0 s, where it counted while in flight: the promise holds.
        run(engine.report(.impression, for: first.id, now: now).1)
        XCTAssertEqual(recorded.map(\.at), [Moment(nanoseconds: 1_000_000_000).capTime])
        advance(to: .seconds(20))
        let second = try! watch("u", impression: false).get()
        // The first ad, reported now, still counts at 0 s: it cannot push the second out.
        run(engine.report(.close, for: first.id, now: now).1)
        run(engine.report(.impression, for: second.id, now: now).1)
        XCTAssertEqual(engine.capUses(slot: "s", user: CapUser(uid: nil, id: "u"), now: now)?.first?.counted, 1)
    }

    func testASlotHeldForAUserFillsAgainWhenTheirAdIsClosedUnseen() {
        start([slot(caps: [.cap(1, per: .seconds(3600), scope: .slot)], buffer: 1, ttl: .seconds(600))])
        let ad = try! watch("u", impression: false).get()
        XCTAssertEqual(engine.slotStatuses(at: now)[0].target.count, 0, "the ad in flight holds everyone")
        effects = []
        run(engine.report(.close, for: ad.id, now: now).1)
        XCTAssertEqual(loadsStarted.count, 1, "closed unseen, it holds no one: the slot fills at once")
        assertShown(watch("v"))
    }

    func testASlotWithoutRulesRecordsNothing() {
        start([slot()])
        assertShown(watch("u"))
        XCTAssertEqual(recorded, [])
        XCTAssertTrue(engine.history.isEmpty)
    }

    // MARK: Durable

    func testAReloadChangingTheRulesKeepsTheHistory() {
        let first = slot(caps: [.cap(3, per: .seconds(3600))])
        start([first])
        assertShown(watch("u"))
        advance(to: .seconds(60))
        assertShown(watch("u"))
        run(engine.reconfigure(slots: [slot(caps: [.cap(2, per: .seconds(3600)), .pacing(.seconds(30))])], settings: engine.settings, now: now))
        assertCapped(watch("u"), rule: "2 per 1h per user", retryAfterMS: 3_540_000)
        run(engine.reconfigure(slots: [first], settings: engine.settings, now: now))
        assertShown(watch("u"))
    }

    func testImpressionsReadBackAtStartHoldAsBeforeEvenFromBeforeTheClocksOrigin() {
        start([slot(caps: [.cap(2, per: .seconds(86_400))])])
        let network = CapNetwork(plugin: "a", adUnitID: "")
        // Two impressions: 20 h and 1 h before now, the first before the engine clock's origin.
        engine.restoreImpressions([
            CountedImpression(slot: "s", network: network, user: CapUser(uid: nil, id: "u"), at: now.capTime - 3600 * 1_000_000_000),
            CountedImpression(slot: "s", network: network, user: CapUser(uid: nil, id: "u"), at: now.capTime - 20 * 3600 * 1_000_000_000),
        ])
        XCTAssertLessThan(now.capTime - 20 * 3600 * 1_000_000_000, 0)
        assertCapped(watch("u"), rule: "2 per 1d per user", retryAfterMS: 4 * 3_600_000)
        assertShown(watch("v"))
    }

    func testHistoryIsKeptForTheLongestWindowOnly() {
        start([slot(caps: [.pacing(.seconds(10)), .cap(5, per: .seconds(60))])])
        assertShown(watch("u"))
        advance(to: .seconds(59))
        XCTAssertFalse(engine.history.isEmpty)
        advance(to: .seconds(61))
        XCTAssertTrue(engine.history.isEmpty, "past the longest window nothing is kept")
    }

    // MARK: The scheduler

    func testNewUsersKeepTheSlotStockedWhileTheUsersItKnowsAreCapped() {
        start([slot(caps: [.cap(1, per: .seconds(3600))], buffer: 1)])
        // A user an hour for a day: each is capped after their ad, and the next one is new.
        for n in 0..<24 {
            advance(to: .seconds(3600 * n))
            assertShown(watch("user\(n)"))
            XCTAssertEqual(engine.slotStatuses(at: now)[0].target.count, 1, "a new user is likely within the hour: hold an ad for them")
        }
    }

    func testAStreamOfNewUsersMissesOnlyWhileTheSlotLearnsThatTheyCome() {
        start([slot(caps: [.cap(1, per: .seconds(600))], buffer: 1)])
        var misses: [Int] = []
        for n in 0..<300 {
            advance(to: .seconds(n))
            if case .failure(.noAdReady) = watch("user\(n)") {
                misses.append(n)
                assertShown(watch("user\(n)"))
            }
        }
        XCTAssertLessThan(misses.count, DemandEstimate.recentCount, "misses: \(misses)")
        XCTAssertTrue(misses.allSatisfy { $0 < DemandEstimate.recentCount }, "only the first users: \(misses)")
        XCTAssertEqual(engine.slotStatuses(at: now)[0].target.count, 1)
    }

    func testAnAdThatOutlivesTheHoldIsHeldAsUsual() {
        // Ads live 4 days, the cap an hour: an ad loaded now is shown after the hold, and a new
        // user finds it meanwhile.
        start([slot(caps: [.cap(2, per: .seconds(3600), scope: .slot)], buffer: 2)])
        assertShown(watch("u"))
        assertShown(watch("v"))
        XCTAssertEqual(engine.slotStatuses(at: now)[0].target.count, 2)
        XCTAssertEqual(engine.slotStatuses(at: now)[0].ready, 2)
    }

    func testTheSchedulerHoldsNoAdsForASlotEveryoneIsCappedOnAndFillsItBeforeTheCapEnds() {
        // Ads live 10 minutes: loaded now, they would expire before anyone may see them.
        start([slot(caps: [.cap(2, per: .seconds(3600), scope: .slot)], buffer: 2, ttl: .seconds(600))])
        assertShown(watch("u"))
        effects = []
        assertShown(watch("v"))
        XCTAssertEqual(loadsStarted.count, 0, "every user is capped for an hour: no ad is loaded to wait for it")
        XCTAssertEqual(engine.slotStatuses(at: now)[0].target.count, 0)
        XCTAssertTrue(engine.slotStatuses(at: now)[0].target.reason.hasPrefix("capped"), engine.slotStatuses(at: now)[0].target.reason)
        advance(to: .seconds(2900))
        XCTAssertEqual(loadsStarted.count, 0, "an ad loaded now would still expire before the hour is up")
        // The cap ends at 1 h: from 50 minutes on, an ad loaded lives past it, and the buffer
        // fills then, without any input but time.
        XCTAssertEqual(engine.ads.timers.moment(of: .capLifts("s")), Moment(nanoseconds: 1_000_000_000) + .seconds(3000))
        advance(to: .seconds(3000))
        XCTAssertEqual(loadsStarted.count, 2)
    }

    func testTheSchedulerHoldsNoAdsWhenTheUsersItKnowsAreCappedAndNewOnesAreRareButHoldsThemForANewOne() {
        start([slot(caps: [.cap(1, per: .seconds(600))], buffer: 1, ttl: .seconds(300))])
        // Two users, each an ad every 10 minutes for 8 hours, and no one else. The second
        // user of all misses once: a new user is rare on what the slot has seen by then.
        var misses = 0
        for round in 0..<48 {
            for user in ["u", "v"] {
                advance(to: .seconds(600 * round + (user == "u" ? 0 : 1)))
                if case .failure(.noAdReady) = watch(user) {
                    misses += 1
                    assertShown(watch(user))
                }
            }
        }
        XCTAssertEqual(misses, 1)
        XCTAssertEqual(engine.slotStatuses(at: now)[0].target.count, 0, "both are capped for 10 minutes and no one new came for hours")
        assertCapped(watch("u"), rule: "1 per 10m per user", retryAfterMS: 599_000)
        effects = []
        // A new user finds nothing, once: from then on the slot is held for them too.
        XCTAssertEqual(watch("w").failure, .noAdReady(slot: "s"))
        XCTAssertEqual(engine.slotStatuses(at: now)[0].target.count, 1)
        XCTAssertEqual(loadsStarted.count, 1)
    }
}

extension Result {
    fileprivate var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
