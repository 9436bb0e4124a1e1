import XCTest

@testable import AdorchEngine

/// The demand-aware scheduler (docs/scheduler.md) on a manual clock: every network answers at
/// once unless a test says otherwise, so the only time that passes is the test's.
private struct Day {
    var engine: Engine
    var now = Moment(nanoseconds: 1_000_000_000)
    /// Loads asked and not yet answered.
    var pending: [LoadOrder] = []
    var events: [EngineEvent] = []
    /// How the networks answer a load at once; nil leaves every load pending for the test.
    var answer: ((inout Day, LoadOrder) -> PluginReport)?

    init(_ slots: [SlotConfig], plugins: Set<String> = ["a", "b"], settings: SchedulerSettings = .init(backoffJitter: 0),
         answer: ((inout Day, LoadOrder) -> PluginReport)? = { _, _ in .loaded(payloadJSON: "{}", expiresIn: nil, price: nil) }) {
        engine = Engine(slots: slots, plugins: plugins, settings: settings, seed: 3)
        self.answer = answer
        take(engine.advance(to: now))
    }

    mutating func take(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .load(let order): pending.append(order)
            case .emit(let event): events.append(event)
            default: break
            }
        }
        // Answer at once; answers may ask for more loads.
        guard let handler = answer else { return }
        while !pending.isEmpty {
            let order = pending.removeFirst()
            take(engine.pluginReported(handler(&self, order), for: order.adID, from: order.plugin, now: now))
        }
    }

    mutating func advance(_ d: Duration) {
        now = now + d
        take(engine.advance(to: now))
    }

    /// A Show, closing the ad at once as a viewer would; true if it found an ad.
    @discardableResult
    mutating func show(_ slot: String = "s") -> Bool {
        let (result, effects) = engine.show(slot: slot, userID: "u", privacy: nil, now: now)
        take(effects)
        guard case .success(let ad) = result else { return false }
        take(engine.report(.close, for: ad.id, now: now).1)
        return true
    }

    /// Shows every `every` for `duration`.
    mutating func shows(every: Duration, for duration: Duration, slot: String = "s") {
        let end = now + duration
        while now + every <= end {
            advance(every)
            show(slot)
        }
    }

    func status(_ slot: String = "s") -> SlotStatus { engine.slotStatuses(at: now).first { $0.config.id == slot }! }
}

private func demandSlot(_ id: String = "s", min: Int = 1, max: Int = 10, ttl: Duration = .seconds(3600), entries: [String] = ["a"]) -> SlotConfig {
    SlotConfig(id: id, format: .interstitial, buffer: min, bufferMax: max, ttl: ttl,
               waterfall: entries.map { WaterfallEntry(plugin: $0, adUnitID: "unit-\($0)", timeout: .seconds(5)) })
}

final class DemandAwareBufferTests: XCTestCase {
    /// Acceptance: a burst raises the target within 10 s of simulated time, and it falls back.
    func testABurstRaisesTheTargetWithinTenSecondsAndItFallsBackAfter() {
        // Loads take 4 s: long enough that a burst needs more ads on hand.
        var day = Day([demandSlot(max: 40)], answer: nil)
        var due: [(Moment, LoadOrder)] = []
        func step(_ day: inout Day, _ d: Duration) {
            for _ in 0..<Int(d.seconds) {
                day.advance(.seconds(1))
                due += day.pending.map { (day.now + .seconds(4), $0) }
                day.pending = []
                while let first = due.firstIndex(where: { $0.0 <= day.now }) {
                    let (_, order) = due.remove(at: first)
                    day.take(day.engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), for: order.adID, from: order.plugin, now: day.now))
                    due += day.pending.map { (day.now + .seconds(4), $0) }
                    day.pending = []
                }
            }
        }
        // An hour of one Show a minute: the steady target.
        for _ in 0..<60 {
            step(&day, .seconds(60))
            day.show()
        }
        let steady = day.status().target
        XCTAssertGreaterThanOrEqual(steady.count, 1)
        XCTAssertEqual(steady.shortPerMinute, 1, accuracy: 0.5, "the last Shows came a minute apart")
        // The burst: a Show a second. Within 10 s the target is up.
        for _ in 0..<10 {
            step(&day, .seconds(1))
            day.show()
        }
        let burst = day.status().target
        XCTAssertGreaterThan(burst.count, steady.count, "10 s into the burst: \(burst.reason)")
        XCTAssertTrue(burst.reason.hasPrefix("burst:"), burst.reason)
        XCTAssertGreaterThan(burst.shortPerMinute, 30)
        // Back to one a minute: within minutes the target is what it was.
        for _ in 0..<15 {
            step(&day, .seconds(60))
            day.show()
        }
        XCTAssertEqual(day.status().target.count, steady.count, "after the burst: \(day.status().target.reason)")
        XCTAssertFalse(day.status().target.reason.hasPrefix("burst:"))
    }

    /// Acceptance: a cold slot with a 30-minute TTL and one request a day holds no ad most of the day.
    func testAColdSlotWithShortLivedAdsAndOneShowADayHoldsNoAdMostOfTheDay() {
        var day = Day([demandSlot(min: 0, max: 5, ttl: .seconds(1800))])
        var minutesHolding = 0, minutes = 0
        for dayNumber in 0..<3 {
            for minute in 0..<(24 * 60) {
                day.advance(.seconds(60))
                if minute == 12 * 60 { day.show() }
                if dayNumber > 0 {
                    minutes += 1
                    if day.status().ready + day.status().loading > 0 { minutesHolding += 1 }
                }
            }
        }
        XCTAssertLessThan(Double(minutesHolding) / Double(minutes), 0.1, "held an ad \(minutesHolding) of \(minutes) minutes")
        XCTAssertEqual(day.status().target.count, 0)
        XCTAssertTrue(day.status().target.reason.hasPrefix("rare:"), day.status().target.reason)
    }

    /// The same slot with ads that live four hours and a Show an hour keeps one ready.
    func testASlowSlotWhoseAdsOutliveItsGapsKeepsOneReady() {
        var day = Day([demandSlot(min: 0, max: 5, ttl: .seconds(4 * 3600))])
        day.shows(every: .seconds(3600), for: .seconds(12 * 3600))
        XCTAssertEqual(day.status().target.count, 1, "\(day.status().target)")
        XCTAssertEqual(day.status().ready, 1)
        day.advance(.seconds(1800))
        XCTAssertTrue(day.show(), "the next Show finds its ad")
    }

    /// A rare slot's preload skips a network whose ads would expire before the next Show.
    func testARareSlotIsFilledFromTheNetworkWhoseAdsOutliveItsGaps() {
        var day = Day([demandSlot(min: 1, max: 5, ttl: .seconds(4 * 3600), entries: ["a", "b"])]) { _, order in
            .loaded(payloadJSON: "{}", expiresIn: order.plugin == "a" ? .seconds(600) : .seconds(4 * 3600), price: nil)
        }
        day.shows(every: .seconds(2 * 3600), for: .seconds(24 * 3600))
        let entries = day.status().entries
        XCTAssertLessThanOrEqual(entries[0].fills, 2, "a's 10-minute ads are learned, then passed over")
        XCTAssertGreaterThanOrEqual(entries[1].fills, 10)
        XCTAssertEqual(entries[0].estimate.lifetimeSeconds, 600, accuracy: 60)
    }

    /// Acceptance: `buffer = N` is a fixed buffer: no demand moves it and the waterfall is
    /// asked in order whatever its ads' lifetimes.
    func testAFixedBufferIgnoresDemandAndKeepsTheWaterfallOrder() {
        let fixed = SlotConfig(id: "s", format: .interstitial, buffer: 2, ttl: .seconds(4 * 3600),
                               waterfall: ["a", "b"].map { WaterfallEntry(plugin: $0, adUnitID: "unit-\($0)", timeout: .seconds(5)) })
        XCTAssertFalse(fixed.isDemandAware)
        var day = Day([fixed]) { _, order in .loaded(payloadJSON: "{}", expiresIn: order.plugin == "a" ? .seconds(600) : nil, price: nil) }
        day.shows(every: .seconds(3600), for: .seconds(6 * 3600))
        day.shows(every: .seconds(1), for: .seconds(20))
        XCTAssertEqual(day.status().target.count, 2)
        XCTAssertEqual(day.status().target.reason, "fixed buffer")
        XCTAssertEqual(day.status().entries[1].loads, 0, "every load went to the first entry, which always fills")
        XCTAssertEqual(day.status().ready, 2)
    }

    /// Acceptance: a network answering rate_limited is paced so that it answers it at most
    /// once per pause, and its limit is learned.
    func testARateLimitedNetworkIsPacedBelowWhatItAllows() {
        var starts: [Moment] = []
        var limitedAnswers = 0
        var day = Day([demandSlot(min: 2, max: 10, entries: ["a", "b"])], settings: .init(backoffJitter: 0, rateLimitPause: .seconds(120))) { day, order in
            guard order.plugin == "a" else { return .loaded(payloadJSON: "{}", expiresIn: nil, price: nil) }
            // Network a allows 12 loads in any 60 s.
            starts = starts.filter { $0 > day.now - .seconds(60) } + [day.now]
            if starts.count > 12 {
                limitedAnswers += 1
                return .failed(.rateLimited, networkCode: 40020, message: "slow down")
            }
            return .loaded(payloadJSON: "{}", expiresIn: nil, price: nil)
        }
        day.shows(every: .seconds(2), for: .seconds(3 * 3600))
        let pauses = day.events.filter { $0.kind == .networkPaused }
        XCTAssertEqual(pauses.count, 1, "learned from the first answer: \(pauses.map { $0.message ?? "" })")
        XCTAssertEqual(limitedAnswers, pauses.count, "at most one rate_limited answer per pause")
        let limit = day.engine.networkStatuses(at: day.now).first { $0.name == "a" }?.learnedLimit
        XCTAssertNotNil(limit)
        XCTAssertLessThanOrEqual(limit ?? 99, 12)
        XCTAssertGreaterThan(day.status().entries[0].fills, 1000, "a kept serving, below its limit")
    }

    /// A network that punishes longer than the configured pause: the answer after the pause
    /// comes to one of only a few loads, so the pause doubles and the limit stays.
    func testANetworkStillPunishingAfterThePauseLengthensThePauseNotTheLimit() {
        var starts: [Moment] = []
        var punishedUntil = Moment.zero
        var day = Day([demandSlot(min: 2, max: 10, entries: ["a", "b"])], settings: .init(backoffJitter: 0, rateLimitPause: .seconds(120))) { day, order in
            guard order.plugin == "a" else { return .loaded(payloadJSON: "{}", expiresIn: nil, price: nil) }
            // Network a allows 12 loads in any 60 s, then refuses everything for 10 minutes.
            starts = starts.filter { $0 > day.now - .seconds(60) } + [day.now]
            if starts.count > 12 { punishedUntil = max(punishedUntil, day.now + .seconds(600)) }
            if day.now < punishedUntil { return .failed(.rateLimited, networkCode: 40020, message: "slow down") }
            return .loaded(payloadJSON: "{}", expiresIn: nil, price: nil)
        }
        day.shows(every: .seconds(2), for: .seconds(3600))
        let pauses = day.events.filter { $0.kind == .networkPaused }.compactMap(\.message)
        XCTAssertEqual(pauses.count, 3, "120 s, then 240 s, then 480 s, which outlasts the 10 minutes: \(pauses)")
        XCTAssertTrue(pauses.last?.hasPrefix("paused for 480.0 seconds") == true, "\(pauses)")
        let limit = day.engine.networkStatuses(at: day.now).first { $0.name == "a" }?.learnedLimit
        XCTAssertNotNil(limit)
        XCTAssertGreaterThan(limit ?? 0, 6, "the limit learned from the first answer stands: \(pauses)")
    }

    /// A network that fills one load in five is asked again after a no-fill at the base
    /// backoff, not an ever-doubling one: its runs of no-fills are what its fill rate says.
    func testALowFillNetworkIsNotBackedOffForItsOrdinaryNoFills() {
        var count = 0
        var day = Day([demandSlot(min: 1, max: 10)]) { _, _ in
            count += 1
            return count % 5 == 0 ? .loaded(payloadJSON: "{}", expiresIn: nil, price: nil) : .failed(.noFill, networkCode: 0, message: "")
        }
        var found = 0
        for _ in 0..<360 {
            // Time passes a second at a time, so backoffs that end are seen when they end.
            for _ in 0..<10 { day.advance(.seconds(1)) }
            if day.show() { found += 1 }
        }
        XCTAssertEqual(day.status().entries[0].estimate.fillRate, 0.2, accuracy: 0.05)
        XCTAssertGreaterThanOrEqual(found, 350, "a Show every 10 s, an ad every 5 loads a second apart")
        XCTAssertLessThanOrEqual(day.status().entries[0].backoff, .seconds(2))
    }

    /// The engine's estimates survive a restart: a new engine that restores them plans the
    /// same demand before it sees any Show.
    func testEstimatesRestoredIntoANewEngineKeepTheDemand() {
        var day = Day([demandSlot()])
        day.shows(every: .seconds(10), for: .seconds(1800))
        let before = day.status().target
        let saved = day.engine.estimates(at: day.now)
        var fresh = Day([demandSlot()])
        XCTAssertLessThan(fresh.status().target.longPerMinute, 1)
        let (effects, refused) = fresh.engine.restore(saved, away: .seconds(5), now: fresh.now)
        fresh.take(effects)
        XCTAssertEqual(refused, 0)
        let after = fresh.status().target
        XCTAssertEqual(after.longPerMinute, before.longPerMinute, accuracy: before.longPerMinute * 0.05)
        XCTAssertEqual(after.count, before.count)
        XCTAssertEqual(fresh.status().entries[0].estimate, day.status().entries[0].estimate)
    }
}

/// What an outside test found: a crafted estimates file, a floor that waited for a paused
/// network, a network that stopped filling and was never asked again.
final class DemandAwareEdgeTests: XCTestCase {
    func testRestoredValuesNoRunCouldWriteAreRefusedAndNothingTraps() throws {
        var day = Day([demandSlot()])
        day.shows(every: .seconds(10), for: .seconds(600))
        let good = day.engine.estimates(at: day.now)
        var bad = good
        bad.slots["s"]!.demand = SavedDemand(shows: [1e308, .infinity, -1], exposureSeconds: [1, 1, 1])
        let json = try JSONEncoder().encode(bad.slots["s"]!.entries[0].estimate)
        var fields = try JSONSerialization.jsonObject(with: json) as! [String: Any]
        fields["attemptSeconds"] = -10
        bad.slots["s"]!.entries[0].estimate = try JSONDecoder().decode(EntryEstimate.self, from: JSONSerialization.data(withJSONObject: fields))
        bad.networkLimits = ["a": Int.max, "b": 0]
        var fresh = Day([demandSlot()])
        let (_, refused) = fresh.engine.restore(bad, away: .zero, now: fresh.now)
        XCTAssertEqual(refused, 4, "the demand, the entry and both limits")
        let target = fresh.status().target
        XCTAssertTrue(target.longPerMinute.isFinite && target.refillSeconds >= 0, "\(target)")
        XCTAssertNil(fresh.engine.networkStatuses(at: fresh.now).first { $0.name == "a" }?.learnedLimit)
        XCTAssertTrue(fresh.show(), "the slot serves on its priors")
    }

    func testASlotBelowItsFloorDoesNotWaitForAPausedNetworkItNeverSawFill() {
        // a has answered nothing but rate_limited; b fills with ads of 10 minutes; the
        // slot's TTL is an hour, the prior of an entry that never filled.
        let slot = SlotConfig(id: "s", format: .interstitial, buffer: 1, bufferMax: 4, ttl: .seconds(3600),
                              waterfall: ["a", "b"].map { WaterfallEntry(plugin: $0, adUnitID: "unit-\($0)", timeout: .seconds(5)) })
        var day = Day([slot], settings: .init(backoffJitter: 0, rateLimitPause: .seconds(300))) { _, order in
            order.plugin == "a" ? .failed(.rateLimited, networkCode: 40020, message: "no") : .loaded(payloadJSON: "{}", expiresIn: .seconds(600), price: nil)
        }
        for _ in 0..<10 {
            day.advance(.seconds(30))
            XCTAssertTrue(day.show(), "every Show finds the ad b refilled: \(day.status().target.reason)")
            day.advance(.seconds(1))
            XCTAssertGreaterThanOrEqual(day.status().ready, 1, "back at buffer_min or above within a second")
        }
    }

    func testANetworkThatStoppedFillingIsAskedAgainAndFillsWhenItRecovers() {
        var filling = false
        var day = Day([demandSlot(min: 0, max: 5)], settings: .init(backoffBase: .milliseconds(1), backoffMax: .seconds(1), backoffJitter: 0)) { _, _ in
            filling ? .loaded(payloadJSON: "{}", expiresIn: nil, price: nil) : .failed(.noFill, networkCode: 0, message: "")
        }
        day.shows(every: .seconds(1), for: .seconds(600))
        XCTAssertLessThan(day.status().entries[0].estimate.fillRate, 0.001, "it learned the network fills nothing")
        filling = true
        day.shows(every: .seconds(1), for: .seconds(60))
        XCTAssertGreaterThan(day.status().entries[0].fills, 10, "asked again, and served: \(day.status().target.reason)")
        XCTAssertTrue(day.show())
    }
}

final class BufferTargetRuleTests: XCTestCase {
    func testPoissonCounts() {
        // With no ad every Show misses: whatever the demand, one is needed.
        XCTAssertEqual(BufferTarget.smallestCount(mean: 0.0005, tailAtMost: 0.001, upTo: 100), 1)
        // Mean 1.35 (a burst of 27/min and 3 s refills): P(X ≥ 6) ≈ 0.0028, P(X ≥ 7) ≈ 0.0006.
        XCTAssertEqual(BufferTarget.smallestCount(mean: 1.35, tailAtMost: 0.001, upTo: 100), 7)
        XCTAssertEqual(BufferTarget.smallestCount(mean: 1000, tailAtMost: 0.001, upTo: 12), 12, "bounded")
        // Mean 0.5: P(X ≥ 1) = 0.39, less likely than not.
        XCTAssertEqual(BufferTarget.largestCount(mean: 0.5, tailAtLeast: 0.5, upTo: 100), 0)
        // Mean 4: P(X ≥ 4) = 0.57, P(X ≥ 5) = 0.37.
        XCTAssertEqual(BufferTarget.largestCount(mean: 4, tailAtLeast: 0.5, upTo: 100), 4)
        XCTAssertEqual(BufferTarget.largestCount(mean: 1e6, tailAtLeast: 0.5, upTo: 11), 11, "bounded, and no underflow")
    }

    func testTheWaterfallChain() {
        // a fills half its loads in 1 s; b all of them in 2 s: 1 + 0.5 × 2 = 2 s to an ad.
        var a = EntryEstimate(timeout: .seconds(2), ttl: .seconds(600)), b = EntryEstimate(timeout: .seconds(4), ttl: .seconds(600))
        for _ in 0..<200 {
            a.note(attempt: .seconds(1), lifetime: .seconds(300))
            a.note(attempt: .seconds(1), lifetime: nil)
            b.note(attempt: .seconds(2), lifetime: .seconds(600))
        }
        let (refill, lifetime) = BufferTarget.chain([a, b], ttl: .seconds(600))
        XCTAssertEqual(refill, 2, accuracy: 0.15)
        XCTAssertEqual(lifetime, 450, accuracy: 30, "half the ads from each")
    }
}
