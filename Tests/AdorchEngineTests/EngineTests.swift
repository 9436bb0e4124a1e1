import XCTest

@testable import AdorchEngine

/// The reason a report was refused, nil if it was accepted.
private func refusal(_ result: Result<Void, ReportError>) -> String? {
    if case .failure(.adNotValid(let reason)) = result { reason } else { nil }
}

private func slot(
    _ id: String = "s", format: AdFormat = .interstitial, buffer: Int = 1, ttl: Duration = .seconds(600),
    entries: [String] = ["a"], timeout: Duration = .seconds(2)
) -> SlotConfig {
    SlotConfig(id: id, format: format, buffer: buffer, ttl: ttl,
               waterfall: entries.map { WaterfallEntry(plugin: $0, adUnitID: "unit-\($0)", timeout: timeout) })
}

final class FreshObjectTests: XCTestCase {
    func testEveryLoadIsANewObjectWithANewID() {
        var h = Harness(slots: [slot(buffer: 2)])
        XCTAssertEqual(h.loads.count, 2)
        for order in h.loads { h.fill(order.adID) }
        for _ in 0..<5 {
            guard case .success = h.show("s") else { return XCTFail("no ad") }
            let order = h.loads.last!
            h.fill(order.adID)
        }
        let ids = h.loads.map(\.adID)
        XCTAssertEqual(ids.count, 7)
        XCTAssertEqual(Set(ids).count, ids.count, "an ad id was loaded twice")
    }

    func testAShownAdIsNeverShownAgainAndItsObjectEndsOnClose() {
        var h = Harness(slots: [slot()])
        h.fill(h.loads[0].adID)
        guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
        XCTAssertTrue(h.effects.contains(.show(ad.id, plugin: "a", userID: "u1")))
        XCTAssertEqual(h.show("s"), .failure(.noAdReady(slot: "s")), "the only ad was already shown")
        XCTAssertNil(refusal(h.reportViewer(.close, ad.id)))
        XCTAssertTrue(h.destroyed.contains(ad.id))
    }
}

final class AdValidTests: XCTestCase {
    func testALoadingAdIsNotValid() {
        var h = Harness(slots: [slot()])
        XCTAssertEqual(h.status("s").loading, 1)
        XCTAssertEqual(h.show("s"), .failure(.noAdReady(slot: "s")))
        XCTAssertTrue(h.events.contains { $0.kind == .slotEmpty })
    }

    func testASlotRunsDryOnceWhenItsLastAdGoesAndNotOnShutdown() {
        var h = Harness(slots: [slot()])
        h.fill(h.loads[0].adID)
        _ = h.show("s")
        XCTAssertEqual(h.events.filter { $0.kind == .slotEmpty }.count, 1)
        XCTAssertEqual(h.show("s"), .failure(.noAdReady(slot: "s")))
        XCTAssertEqual(h.events.filter { $0.kind == .slotEmpty }.count, 1, "still the same dry spell")
        h.fill(h.loads[1].adID)
        _ = h.show("s")
        XCTAssertEqual(h.status("s").counters.ranDry, 2)
        let before = h.events.count
        h.effects += h.engine.shutdown(now: h.now)
        XCTAssertFalse(h.events.dropFirst(before).contains { $0.kind == .slotEmpty })
    }

    func testShowTakesTheAdOutOfValidityAtOnce() {
        var h = Harness(slots: [slot()])
        h.fill(h.loads[0].adID)
        XCTAssertEqual(h.status("s").ready, 1)
        guard case .success = h.show("s") else { return XCTFail("no ad") }
        XCTAssertEqual(h.status("s").ready, 0)
        XCTAssertEqual(h.status("s").counters.shows, 1)
    }

    func testAnExpiredAdIsNeverShown() {
        // The replacement's network is down, so the old ad reaches its expiry unreplaced.
        var h = Harness(slots: [slot(ttl: .seconds(10))])
        let first = h.loads[0].adID
        h.fill(first)
        h.advance(.seconds(8))  // inside the refresh margin: a replacement load starts
        let replacement = h.loads.last!.adID
        XCTAssertNotEqual(replacement, first)
        XCTAssertEqual(h.status("s").ready, 1, "still valid inside the margin")
        h.report(.failed(.network, networkCode: -2, message: "down"), replacement)
        h.advance(.seconds(2))  // exactly at expiry
        XCTAssertEqual(h.status("s").ready, 0)
        XCTAssertEqual(h.show("s"), .failure(.noAdReady(slot: "s")))
        XCTAssertTrue(h.destroyed.contains(first))
        XCTAssertEqual(h.status("s").counters.expired, 1)
        XCTAssertTrue(h.events.contains { $0.kind == .adExpired && $0.adID == first })
    }

    func testShowChecksExpiryEvenIfNoTimerFiredYet() {
        var h = Harness(slots: [slot(ttl: .seconds(10))])
        h.fill(h.loads[0].adID)
        h.now = h.now + .seconds(11)  // time passes with no advance: the timer is late
        XCTAssertEqual(h.show("s"), .failure(.noAdReady(slot: "s")))
    }

    func testTheNetworksShorterExpiryWinsOverTheSlotTTL() {
        var h = Harness(slots: [slot(ttl: .seconds(600))])
        h.fill(h.loads[0].adID, expiresIn: .seconds(30))
        h.now = h.now + .seconds(31)
        XCTAssertEqual(h.show("s"), .failure(.noAdReady(slot: "s")))
    }

    /// A plugin that says each ad expires at once (expires_in_s 1e-300) gets it ready for
    /// `Engine.shortestLifetime`: its slot reloads about that often, not in a loop.
    func testAnExpiryShorterThanTheFloorIsRaisedToIt() {
        var h = Harness(slots: [slot(ttl: .seconds(600))])
        var filled = 0
        let span = Duration.seconds(10)
        let end = h.now + span
        while h.now < end {
            for load in h.loads.dropFirst(filled) {
                h.fill(load.adID, expiresIn: .zero)
                filled += 1
            }
            h.advance(.milliseconds(10))
        }
        // One load per lifetime, less the refresh margin (a fifth of it) that starts the next early.
        let most = Int(span / (Engine.shortestLifetime * 0.8)) + 2
        XCTAssertGreaterThan(filled, 1)
        XCTAssertLessThanOrEqual(filled, most, "loads in \(span) of ads that expire at once")
        guard case .success = h.show("s") else { return XCTFail("an ad is ready within its floor") }
    }

    func testShowPicksTheHighestPriceThenTheEarliestExpiry() {
        var h = Harness(slots: [slot(buffer: 3)])
        let (x, y, z) = (h.loads[0].adID, h.loads[1].adID, h.loads[2].adID)
        h.fill(x, expiresIn: .seconds(500), price: 2)
        h.fill(y, expiresIn: .seconds(100), price: 1)
        h.fill(z, expiresIn: .seconds(300), price: 2)
        var order: [AdID] = []
        for _ in 0..<3 {
            guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
            order.append(ad.id)
        }
        XCTAssertEqual(order, [z, x, y])
    }

    func testARewardedShowNeedsAUserID() {
        var h = Harness(slots: [slot("r", format: .rewarded)])
        h.fill(h.loads[0].adID)
        XCTAssertEqual(h.show("r", user: nil), .failure(.invalidParameter(name: "user_id", reason: "a rewarded slot needs a non-empty user_id")))
        XCTAssertEqual(h.show("r", user: ""), .failure(.invalidParameter(name: "user_id", reason: "a rewarded slot needs a non-empty user_id")))
        XCTAssertEqual(h.status("r").ready, 1, "a refused show changes nothing")
        guard case .success = h.show("r", user: "u1") else { return XCTFail("no ad") }
    }

    func testAnUnknownSlot() {
        var h = Harness(slots: [slot()])
        XCTAssertEqual(h.show("nope"), .failure(.slotNotFound("nope")))
    }
}

final class CompletionOnceTests: XCTestCase {
    func testASecondLoadedIsIgnoredAndCounted() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        h.fill(id)
        h.fill(id)
        XCTAssertEqual(h.status("s").ready, 1, "not counted twice")
        XCTAssertEqual(h.status("s").counters.fills, 1)
        XCTAssertEqual(h.status("s").counters.ignoredCallbacks, 1)
        XCTAssertTrue(h.events.contains { $0.kind == .callbackIgnored && $0.adID == id })
    }

    func testFailedAfterLoadedIsIgnored() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        h.fill(id)
        h.report(.failed(.internal, networkCode: 0, message: "late"), id)
        XCTAssertEqual(h.status("s").ready, 1)
        XCTAssertEqual(h.status("s").counters.errors, 0)
        XCTAssertEqual(h.status("s").counters.ignoredCallbacks, 1)
    }

    func testAReportAfterTheDeadlineIsIgnored() {
        var h = Harness(slots: [slot(timeout: .seconds(2))])
        let id = h.loads[0].adID
        h.advance(.seconds(2))
        XCTAssertTrue(h.destroyed.contains(id))
        h.fill(id)
        XCTAssertEqual(h.status("s").ready, 0)
        XCTAssertEqual(h.status("s").counters.ignoredCallbacks, 1)
        XCTAssertEqual(h.status("s").counters.timeouts, 1)
    }

    func testMediaCachedIsAnEventOncePerAd() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        h.fill(id)
        for _ in 0..<1000 { h.report(.mediaCached, id) }
        XCTAssertEqual(h.events.filter { $0.kind == .mediaCached }.count, 1, "said once, a repeat says nothing")
        XCTAssertEqual(h.status("s").counters.ignoredCallbacks, 0, "a repeat is no breach")
    }

    func testAReportCrossingTheDestroyIsNotThePluginsFaultButOneAfterItIs() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        h.fill(id)
        guard case .success = h.show("s") else { return XCTFail("no ad") }
        _ = h.reportViewer(.close, id)
        XCTAssertTrue(h.destroyed.contains(id))
        h.report(.mediaCached, id)  // sent before the plugin's ad_destroy ran
        XCTAssertEqual(h.status("s").counters.ignoredCallbacks, 0)
        h.report(.destroyed, id)
        h.report(.mediaCached, id)  // after it: a contract breach
        XCTAssertEqual(h.status("s").counters.ignoredCallbacks, 1)
    }

    func testALateAnswerAfterTheDeadlineCountsEvenBeforeTheDestroyReturned() {
        var h = Harness(slots: [slot(timeout: .seconds(1))])
        let id = h.loads[0].adID
        h.advance(.seconds(1))
        h.fill(id)
        XCTAssertEqual(h.status("s").counters.ignoredCallbacks, 1)
    }

    func testAReportForAnotherPluginsAdIsIgnored() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), id, from: "b")
        XCTAssertEqual(h.status("s").ready, 0)
        XCTAssertEqual(h.engine.unattributedCallbacks, 1)
        h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil), 999_999, from: "a")
        XCTAssertEqual(h.engine.unattributedCallbacks, 2)
    }

    func testAnInvalidPayloadIsAContractViolationAndAFailure() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        h.report(.loadedInvalid(reason: "loaded with an empty payload"), id)
        XCTAssertEqual(h.status("s").ready, 0)
        XCTAssertEqual(h.status("s").counters.contractViolations, 1)
        XCTAssertTrue(h.destroyed.contains(id))
        XCTAssertTrue(h.events.contains { $0.kind == .contractViolation && $0.errorCode == .pluginFault })
    }
}

final class DeadlineTests: XCTestCase {
    func testEveryLoadCarriesADeadlineAndTimesOutThere() {
        var h = Harness(slots: [slot(timeout: .milliseconds(1500))])
        let order = h.loads[0]
        XCTAssertEqual(order.deadline, h.now + .milliseconds(1500))
        h.advance(.milliseconds(1499))
        XCTAssertFalse(h.destroyed.contains(order.adID))
        h.advance(.milliseconds(1))
        XCTAssertTrue(h.destroyed.contains(order.adID))
        XCTAssertTrue(h.events.contains { $0.kind == .adTimedOut && $0.errorCode == .timeout })
    }

    func testASilentEntryCostsTimeoutsWhileTheNextEntryServes() {
        var h = Harness(slots: [slot(entries: ["a", "b"], timeout: .seconds(1))])
        XCTAssertEqual(h.loads[0].plugin, "a")
        h.advance(.seconds(1))  // a never answers
        let next = h.loads.last!
        XCTAssertEqual(next.plugin, "b", "the waterfall moves on while a backs off")
        h.fill(next.adID)
        XCTAssertEqual(h.status("s").ready, 1)
        XCTAssertEqual(h.status("s").counters.timeouts, 1)
    }
}

final class PreloadTests: XCTestCase {
    func testBuffersFillAndRefillAfterAShow() {
        var h = Harness(slots: [slot(buffer: 3)])
        XCTAssertEqual(h.loads.count, 3)
        for order in h.loads { h.fill(order.adID) }
        XCTAssertEqual(h.status("s").ready, 3)
        _ = h.show("s")
        XCTAssertEqual(h.loads.count, 4, "one refill load right after the show")
        h.fill(h.loads[3].adID)
        XCTAssertEqual(h.status("s").ready, 3)
    }

    func testAReplacementLoadsBeforeExpiryAndTheOldAdGoes() {
        let settings = SchedulerSettings(refreshAhead: .seconds(60), backoffJitter: 0)
        var h = Harness(slots: [slot(ttl: .seconds(1000))], settings: settings)
        let first = h.loads[0].adID
        h.fill(first)
        h.advance(.seconds(939))
        XCTAssertEqual(h.loads.count, 1)
        h.advance(.seconds(1))  // 60 s before expiry
        XCTAssertEqual(h.loads.count, 2)
        h.fill(h.loads[1].adID)
        XCTAssertEqual(h.status("s").ready, 1, "back to the buffer, not above it")
        XCTAssertTrue(h.destroyed.contains(first))
        XCTAssertEqual(h.status("s").counters.replaced, 1)
        XCTAssertEqual(h.status("s").counters.expired, 0)
    }

    func testTheRefreshMarginIsAtMostAFifthOfTheAdsLife() {
        var h = Harness(slots: [slot(ttl: .seconds(10))])
        h.fill(h.loads[0].adID)
        h.advance(.milliseconds(7999))
        XCTAssertEqual(h.loads.count, 1)
        h.advance(.milliseconds(1))
        XCTAssertEqual(h.loads.count, 2)
    }

    func testBackoffDoublesPerFailureAndResetsOnSuccess() {
        let settings = SchedulerSettings(backoffBase: .seconds(1), backoffMax: .seconds(8), backoffJitter: 0)
        var h = Harness(slots: [slot()], settings: settings)
        var gaps: [Duration] = []
        for _ in 0..<5 {
            let order = h.loads.last!
            let failedAt = h.now
            h.report(.failed(.noFill, networkCode: 20001, message: "no ads"), order.adID)
            while h.loads.last!.adID == order.adID { h.advance(.milliseconds(100)) }
            gaps.append(h.now - failedAt)
        }
        XCTAssertEqual(gaps, [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8)])
        XCTAssertEqual(h.status("s").counters.noFills, 5)
        h.fill(h.loads.last!.adID)
        _ = h.show("s")
        XCTAssertEqual(h.loads.count, 7, "after a success the entry is tried again at once")
    }

    func testJitterSpreadsBackoffsWithinItsShare() {
        let settings = SchedulerSettings(backoffBase: .seconds(10), backoffJitter: 0.2, maxLoadsInFlightPerNetwork: 100)
        var h = Harness(slots: (0..<20).map { slot("s\($0)") }, settings: settings)
        for order in h.loads { h.report(.failed(.network, networkCode: -2, message: ""), order.adID) }
        let backoffs = h.engine.slotStatuses(at: h.now).map { $0.entries[0].backoff.seconds }
        XCTAssertTrue(backoffs.allSatisfy { (8.0...12.0).contains($0) }, "\(backoffs)")
        XCTAssertGreaterThan(Set(backoffs).count, 10, "jitter spreads them")
    }

    func testAllEntriesBackingOffWakesAtTheEarliestEnd() {
        let settings = SchedulerSettings(backoffBase: .seconds(5), backoffJitter: 0)
        var h = Harness(slots: [slot(entries: ["a", "b"])], settings: settings)
        h.report(.failed(.noFill, networkCode: 0, message: ""), h.loads[0].adID)
        h.report(.failed(.noFill, networkCode: 0, message: ""), h.loads[1].adID)
        XCTAssertEqual(h.loads.count, 2)
        XCTAssertEqual(h.engine.nextWakeup(after: h.now), h.now + .seconds(5))
        h.advance(.seconds(5))
        XCTAssertEqual(h.loads.count, 3)
    }

    func testAMissingPluginsEntriesAreSkipped() {
        let h = Harness(slots: [slot(entries: ["gone", "a"])], plugins: ["a"])
        XCTAssertEqual(h.loads.map(\.plugin), ["a"])
    }

    /// The shell asks for its next wakeup a little after it advanced: a shown ad whose end fell
    /// in between must still wake it (the million-cycle run once left hundreds with the plugin).
    func testAMomentDueSinceTheLastAdvanceWakesAtOnce() throws {
        var h = Harness(slots: [slot(buffer: 1, entries: ["a"])], settings: SchedulerSettings(shownLifetime: .seconds(1)))
        h.fill(h.loads[0].adID)
        let shown = try h.show("s").get()
        h.fill(h.loads.last!.adID)  // the refill, so nothing else is pending
        let later = h.now + .milliseconds(1001)
        XCTAssertEqual(h.engine.nextWakeup(after: later), later, "the shown ad's end is due")
        XCTAssertFalse(h.destroyed.contains(shown.id))
        h.advance(.milliseconds(1001))
        XCTAssertTrue(h.destroyed.contains(shown.id))
    }

    /// Ended ads are remembered up to a count, so memory does not grow with the rate of ads.
    func testEndedAdsAreRememberedUpToTheLimitOldestForgottenFirst() throws {
        let settings = SchedulerSettings(shownLifetime: .seconds(1), retiredMemoryLimit: 3)
        var h = Harness(slots: [slot(buffer: 1, entries: ["a"])], settings: settings)
        var shown: [AdID] = []
        for _ in 0..<5 {
            h.fill(h.loads.last!.adID)
            shown.append(try h.show("s").get().id)
            h.advance(.milliseconds(1500))  // its shown life ends (the refill is still in time)
        }
        func reason(_ id: AdID) -> String? {
            if case .failure(.adNotValid(let reason)) = h.engine.report(.click, for: id, now: h.now).0 { return reason }
            return nil
        }
        XCTAssertEqual(reason(shown[0]), "is not known", "the oldest went first")
        XCTAssertEqual(reason(shown[1]), "is not known")
        XCTAssertEqual(reason(shown[4]), "has ended (shown and done)")
        XCTAssertEqual(reason(shown[2]), "has ended (shown and done)")
    }

    func testNextWakeupIsNeverInThePast() {
        var h = Harness(slots: [slot(buffer: 2, ttl: .seconds(10), entries: ["a", "b"])])
        for _ in 0..<200 {
            if let order = h.loads.last, h.engine.isShown(order.adID) == false {
                h.fill(order.adID)
            }
            _ = h.show("s")
            let wake = h.engine.nextWakeup(after: h.now)
            XCTAssertTrue(wake.map { $0 > h.now } ?? true)
            h.advance(.milliseconds(700))
        }
    }
}

final class NetworkTests: XCTestCase {
    func testRateLimitedPausesTheWholeNetworkWhileOthersFill() {
        let settings = SchedulerSettings(backoffBase: .seconds(1), backoffJitter: 0, rateLimitPause: .seconds(60))
        var h = Harness(slots: [slot("x", entries: ["a", "b"]), slot("y", entries: ["a"])], settings: settings)
        let first = h.loads.first { $0.slotID == "x" }!
        XCTAssertEqual(first.plugin, "a")
        h.report(.failed(.rateLimited, networkCode: 40020, message: "daily limit"), first.adID)
        XCTAssertTrue(h.events.contains { $0.kind == .networkPaused && $0.network == "a" })
        XCTAssertEqual(h.loads.last!.plugin, "b", "x fills from b meanwhile")
        h.fill(h.loads.last!.adID)
        // y's load to a is still in flight; when it fails, a is not asked again until the pause ends.
        let yLoad = h.loads.first { $0.slotID == "y" }!
        h.report(.failed(.noFill, networkCode: 20001, message: ""), yLoad.adID)
        let before = h.loads.count
        h.advance(.seconds(59))
        XCTAssertEqual(h.loads.count, before, "no load to a during the pause, from any slot")
        XCTAssertEqual(h.engine.networkStatuses(at: h.now).first { $0.name == "a" }?.paused, .seconds(1))
        h.advance(.seconds(1))
        XCTAssertEqual(h.loads.count, before + 1)
        XCTAssertEqual(h.loads.last!.plugin, "a")
    }

    func testLoadsInFlightToOneNetworkAreCapped() {
        let settings = SchedulerSettings(backoffJitter: 0, maxLoadsInFlightPerNetwork: 2)
        var h = Harness(slots: [slot("x", buffer: 3), slot("y", buffer: 2)], settings: settings)
        XCTAssertEqual(h.loads.count, 2, "two in flight to a, whatever the slots want")
        h.fill(h.loads[0].adID)
        XCTAssertEqual(h.loads.count, 3, "a finished load frees a place")
        XCTAssertEqual(h.engine.networkStatuses(at: h.now).first?.loadsInFlight, 2)
    }

    func testParallelModeAsksTheFirstEntriesAtOnceAndKeepsEveryAd() {
        var config = slot(buffer: 1, entries: ["a", "b", "c"])
        config.parallel = 3
        var h = Harness(slots: [config], plugins: ["a", "b", "c"])
        XCTAssertEqual(h.loads.map(\.plugin), ["a", "b", "c"], "one round, three networks at once")
        for (order, price) in zip(h.loads, [1.0, 5.0, 3.0]) { h.fill(order.adID, price: price) }
        XCTAssertEqual(h.status("s").ready, 3, "the rest stay valid")
        var prices: [Double] = []
        for _ in 0..<3 {
            guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
            prices.append(ad.price)
            if prices.count < 3 { XCTAssertEqual(h.loads.count, 3, "no new round while valid ads remain") }
        }
        XCTAssertEqual(prices, [5, 3, 1], "the highest price first")
        XCTAssertEqual(h.loads.count, 6, "a new round once the slot is below its buffer")
    }

    func testEntryCountersShowTheOrderEntriesWereTried() {
        var h = Harness(slots: [slot(entries: ["a", "b"], timeout: .seconds(1))])
        h.report(.failed(.noFill, networkCode: 20001, message: ""), h.loads[0].adID)
        h.fill(h.loads[1].adID)
        let entries = h.status("s").entries
        XCTAssertEqual(entries.map(\.loads), [1, 1])
        XCTAssertEqual(entries.map(\.fills), [0, 1])
        XCTAssertEqual(entries[0].lastError, .noFill)
        XCTAssertEqual(entries[0].failuresInRow, 1)
    }
}

final class ViewerReportTests: XCTestCase {
    func testTheHostTellsAPluginOfImpressionsAndClicksOnlyIfItDoesNotTrackThemItself() {
        var h = Harness(slots: [slot("host", entries: ["a"]), slot("self", entries: ["b"])])
        let hostAd = h.loads.first { $0.slotID == "host" }!.adID
        let selfAd = h.loads.first { $0.slotID == "self" }!.adID
        h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, tracksItself: false), hostAd)
        h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, tracksItself: true), selfAd)
        for slot in ["host", "self"] {
            guard case .success(let ad) = h.show(slot) else { return XCTFail("no ad in \(slot)") }
            XCTAssertNil(refusal(h.reportViewer(.impression, ad.id)))
            XCTAssertNil(refusal(h.reportViewer(.click, ad.id)))
            XCTAssertNil(refusal(h.reportViewer(.click, ad.id)), "a second click is accepted")
        }
        func notified(_ id: AdID) -> [ViewerEvent] {
            h.effects.compactMap { if case .notify(id, _, let e) = $0 { e } else { nil } }
        }
        XCTAssertEqual(notified(hostAd), [.impression, .click], "once each, never twice")
        XCTAssertEqual(notified(selfAd), [], "a self-tracking plugin is never notified")
        XCTAssertEqual(h.status("host").counters.clicks, 1)
        XCTAssertEqual(h.status("host").counters.duplicateReports, 1)
        XCTAssertEqual(h.events.filter { $0.adID == selfAd && $0.viewerEvent == .click }.count, 1, "subscribers hear it once")
    }

    func testOnceEventsAreAcceptedOnceAndClicksAlways() {
        var h = Harness(slots: [slot()])
        h.fill(h.loads[0].adID)
        guard case .success(let ad) = h.show("s") else { return XCTFail("no ad") }
        XCTAssertNil(refusal(h.reportViewer(.impression, ad.id)))
        XCTAssertEqual(refusal(h.reportViewer(.impression, ad.id)), "already reported impression")
        XCTAssertEqual(h.status("s").counters.duplicateReports, 1, "a refused repeat counts as a duplicate report")
        XCTAssertNil(refusal(h.reportViewer(.click, ad.id)))
        XCTAssertNil(refusal(h.reportViewer(.click, ad.id)))
        XCTAssertEqual(h.effects.filter { if case .notify(ad.id, _, .click) = $0 { true } else { false } }.count, 1, "one click per ad")
        XCTAssertEqual(h.status("s").counters.duplicateReports, 2, "and so does a second click")
        XCTAssertNil(refusal(h.reportViewer(.close, ad.id)))
        XCTAssertEqual(refusal(h.reportViewer(.click, ad.id)), "has ended (closed)")
    }

    /// plugin.h, ADORCH_EVENT_IMPRESSION: a self-tracking plugin's impression and click count in
    /// the slot's counters once per ad, whichever side reports first; one before the Show does not.
    func testSelfTrackedImpressionsAndClicksCountOncePerAdWhoeverReportsFirst() {
        var h = Harness(slots: [slot(buffer: 3)])
        var filled: [AdID] = []
        while filled.count < 3, let load = h.loads.first(where: { !filled.contains($0.adID) }) {
            h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, tracksItself: true), load.adID)
            filled.append(load.adID)
        }
        for id in filled { h.report(.other(name: "impression"), id) }
        XCTAssertEqual(h.status("s").counters.impressions, 0, "an impression of an ad not on screen is not one")
        guard case .success(let first) = h.show("s"), case .success(let second) = h.show("s") else { return XCTFail("no ads") }
        // The plugin first, twice, then the app: one impression.
        h.report(.other(name: "impression"), first.id)
        h.report(.other(name: "impression"), first.id)
        XCTAssertEqual(h.status("s").counters.impressions, 1)
        XCTAssertNil(refusal(h.reportViewer(.impression, first.id)), "the app's report is still taken")
        XCTAssertEqual(h.status("s").counters.impressions, 1)
        // The app first, then the plugin: one more.
        XCTAssertNil(refusal(h.reportViewer(.impression, second.id)))
        h.report(.other(name: "impression"), second.id)
        XCTAssertEqual(h.status("s").counters.impressions, 2)
        h.report(.other(name: "click"), second.id)
        XCTAssertNil(refusal(h.reportViewer(.click, second.id)))
        XCTAssertEqual(h.status("s").counters.clicks, 1)
        XCTAssertEqual(h.status("s").counters.duplicateReports, 0, "no side reported anything twice")
        XCTAssertEqual(h.events.filter { $0.adID == first.id && $0.message == "impression" }.count, 3, "subscribers hear each of the plugin's three reports, counted or not")
    }

    func testReportsForAdsNotShownAreRefused() {
        var h = Harness(slots: [slot()])
        let id = h.loads[0].adID
        XCTAssertEqual(refusal(h.reportViewer(.impression, id)), "has not been shown")
        XCTAssertEqual(refusal(h.reportViewer(.impression, 4242)), "is not known")
    }
}

final class RewardTests: XCTestCase {
    private func grants(_ h: Harness) -> [RewardGrant] {
        h.effects.compactMap { if case .grantReward(let g) = $0 { g } else { nil } }
    }

    func testTheAppsCompleteGrantsTheRewardOnceWithTheSlotsModelOrTheShowsOverride() {
        var config = slot("r", format: .rewarded, buffer: 2)
        config.reward = RewardModel(name: "coins", amount: 10, extra: "")
        var h = Harness(slots: [config])
        for order in h.loads { h.fill(order.adID) }
        guard case .success(let first) = h.show("r", user: "u1") else { return XCTFail("no ad") }
        XCTAssertNil(refusal(h.reportViewer(.complete, first.id)))
        XCTAssertNotNil(refusal(h.reportViewer(.complete, first.id)), "complete is reported once")
        let (result, effects) = h.engine.show(slot: "r", userID: "u2", privacy: nil, reward: RewardModel(name: "gems", amount: 3, extra: "x"), now: h.now)
        h.effects += effects
        guard case .success(let second) = result else { return XCTFail("no ad") }
        XCTAssertNil(refusal(h.reportViewer(.complete, second.id)))
        XCTAssertEqual(grants(h).map { "\($0.userID) \($0.reward.amount) \($0.reward.name)" }, ["u1 10 coins", "u2 3 gems"])
        XCTAssertEqual(h.status("r").counters.rewards, 2)
    }

    func testANetworkThatDecidesTheRewardIsTheOnlyGrantAndASecondIsRefused() {
        var h = Harness(slots: [slot("r", format: .rewarded)])
        let id = h.loads[0].adID
        h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, rewardByNetwork: true), id)
        guard case .success = h.show("r", user: "u1") else { return XCTFail("no ad") }
        XCTAssertNil(refusal(h.reportViewer(.complete, id)))
        XCTAssertTrue(grants(h).isEmpty, "the app's complete does not grant what the network decides")
        h.report(.reward(transID: "net-1"), id)
        h.report(.reward(transID: "net-2"), id)
        XCTAssertEqual(grants(h).map(\.networkTransID), ["net-1"])
        XCTAssertEqual(h.status("r").counters.duplicateRewards, 1)
    }

    /// A network's reward that comes after the app's close, within `networkRewardGrace`, is
    /// granted; to the app the ad has ended at its close. One after the grace is refused, named.
    func testANetworkRewardWithinTheGraceAfterCloseIsGrantedOneAfterItRefused() {
        var h = Harness(slots: [slot("r", format: .rewarded, buffer: 2)])
        let (early, late) = (h.loads[0].adID, h.loads[1].adID)
        for id in [early, late] { h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, rewardByNetwork: true), id) }
        for _ in 0..<2 { guard case .success = h.show("r", user: "u1") else { return XCTFail("no ad") } }
        for id in [early, late] { XCTAssertNil(refusal(h.reportViewer(.close, id))) }
        XCTAssertEqual(refusal(h.reportViewer(.complete, early)), "has ended (closed)", "to the app the ad ended at its close")
        XCTAssertFalse(h.destroyed.contains(early), "kept for its network's reward")

        h.advance(h.engine.settings.networkRewardGrace - .seconds(1))
        h.report(.reward(transID: "net-in-time"), early)
        XCTAssertEqual(grants(h).map(\.networkTransID), ["net-in-time"])
        XCTAssertTrue(h.destroyed.contains(early), "rewarded, it has nothing left to wait for")

        h.advance(.seconds(2))
        XCTAssertTrue(h.destroyed.contains(late), "ended once the grace passed")
        h.report(.destroyed, late)
        h.report(.reward(transID: "net-too-late"), late)
        XCTAssertEqual(grants(h).map(\.networkTransID), ["net-in-time"])
        XCTAssertTrue(h.events.contains { $0.message?.contains("reward after the app closed the ad and the \(h.engine.settings.networkRewardGrace) its network had for it passed: refused") == true },
                      "\(h.events.compactMap(\.message))")
    }
}

/// A rewarded ad's reward survives a restart (docs/rules.md, "Across a restart"): the engine
/// says what to keep on disk, and takes an earlier run's promises back.
final class PromisedRewardTests: XCTestCase {
    private func promises(_ h: Harness) -> [PromisedReward] {
        h.effects.compactMap { if case .keepPromise(let p) = $0 { p } else { nil } }
    }

    private func dropped(_ h: Harness) -> [AdID] {
        h.effects.compactMap { if case .dropPromise(let id) = $0 { id } else { nil } }
    }

    private func grants(_ h: Harness) -> [RewardGrant] {
        h.effects.compactMap { if case .grantReward(let g) = $0 { g } else { nil } }
    }

    func testARewardedShowIsPromisedUntilGrantedAndAnEndWithoutTheRewardVoidsIt() {
        var config = slot("r", format: .rewarded, buffer: 2)
        config.reward = RewardModel(name: "coins", amount: 10, extra: "x")
        var h = Harness(slots: [config, slot("i")])
        for order in h.loads { h.fill(order.adID) }
        guard case .success(let watched) = h.show("r", user: "u1"), case .success(let skipped) = h.show("r", user: "u2") else {
            return XCTFail("no ad")
        }
        guard case .success(let interstitial) = h.show("i") else { return XCTFail("no ad") }
        XCTAssertEqual(promises(h).map { "\($0.adID) \($0.userID ?? "-") \($0.reward.amount) \($0.reward.name)" },
                       ["\(watched.id) u1 10 coins", "\(skipped.id) u2 10 coins"], "only rewarded ads are promised")
        XCTAssertNil(refusal(h.reportViewer(.complete, watched.id)))
        for id in [watched.id, skipped.id, interstitial.id] { XCTAssertNil(refusal(h.reportViewer(.close, id))) }
        XCTAssertEqual(dropped(h), [skipped.id], "the grant takes the watched one's promise with it; the skipped one's is void")
    }

    func testANetworkRewardedAdIsNotPromised() {
        var h = Harness(slots: [slot("r", format: .rewarded)])
        h.report(.loaded(payloadJSON: "{}", expiresIn: nil, price: nil, rewardByNetwork: true), h.loads[0].adID)
        guard case .success = h.show("r", user: "u1") else { return XCTFail("no ad") }
        XCTAssertTrue(promises(h).isEmpty, "its reward comes from its network's host, which a restart ends")
    }

    func testAnEarlierRunsPromiseIsGrantedOnceByItsCompleteWithinItsLife() {
        var h = Harness(slots: [slot("r", format: .rewarded)])
        let reward = RewardModel(name: "gems", amount: 3, extra: "")
        let alive = PromisedReward(adID: 41, slot: "r", network: "a", userID: "u1", reward: reward, holder: 1000,
                                   endsAt: h.now + .seconds(60), impression: nil, counted: false)
        var gone = alive
        gone.endsAt = h.now
        let (ids, effects) = h.engine.restorePromises([alive, gone], now: h.now)
        XCTAssertTrue(effects.isEmpty)
        XCTAssertEqual(ids.count, 2)
        XCTAssertNil(ids[1], "a promise past its ad's life is dropped")
        guard let id = ids[0] else { return XCTFail("the live promise was not restored") }
        XCTAssertNotEqual(id, 41, "it gets an id of this run")
        XCTAssertEqual(h.engine.holder(of: id), 1000, "only its holder may report on it")
        XCTAssertNil(refusal(h.reportViewer(.impression, id)), "taken, with nothing left to do")
        XCTAssertNil(refusal(h.reportViewer(.complete, id)))
        XCTAssertEqual(refusal(h.reportViewer(.complete, id)), "already reported complete")
        XCTAssertEqual(grants(h).map { "\($0.adID) \($0.userID) \($0.reward.amount) \($0.reward.name) \($0.holder ?? 0)" },
                       ["\(id) u1 3 gems 1000"])
        XCTAssertEqual(h.status("r").counters.rewards, 1)
        XCTAssertNil(refusal(h.reportViewer(.close, id)))
        XCTAssertTrue(dropped(h).isEmpty, "its grant removes it from the ledger")
        XCTAssertEqual(refusal(h.reportViewer(.complete, id)), "is not known")
    }

    func testAPromiseIsRefusedOnceItsLifeEnds() {
        var h = Harness(slots: [slot("r", format: .rewarded)])
        let promise = PromisedReward(adID: 1, slot: "r", network: "a", userID: "u1", reward: RewardModel(), holder: nil,
                                     endsAt: h.now + .seconds(10), impression: nil, counted: false)
        guard let id = h.engine.restorePromises([promise], now: h.now).ids[0] else { return XCTFail("not restored") }
        h.advance(.seconds(10))
        XCTAssertEqual(refusal(h.reportViewer(.complete, id)), "has ended (shown and done)")
        XCTAssertTrue(grants(h).isEmpty)
        XCTAssertEqual(dropped(h), [id])
    }

    /// An impression the earlier run had not counted counts at start, at the moment its Show
    /// took the ad; one it had counted is not counted again.
    func testAnUncountedImpressionCountsOnceAtRestore() {
        var config = slot("r", format: .rewarded, buffer: 2)
        config.caps = [.cap(5, per: .seconds(3600))]
        var h = Harness(slots: [config])
        let user = CapUser(uid: 1000, id: "u1")
        let network = CapNetwork(plugin: "a", adUnitID: "unit-a")
        let impression = CountedImpression(slot: "r", network: network, user: user, at: h.now.capTime - 1_000_000_000)
        let uncounted = PromisedReward(adID: 1, slot: "r", network: "a", userID: "u1", reward: RewardModel(), holder: 1000,
                                       endsAt: h.now + .seconds(60), impression: impression, counted: false)
        var counted = uncounted
        counted.counted = true
        let (_, effects) = h.engine.restorePromises([uncounted, counted], now: h.now)
        let recorded = effects.compactMap { if case .recordImpression(let i) = $0 { i } else { nil } }
        XCTAssertEqual(recorded, [impression])
        XCTAssertEqual(effects.compactMap { if case .keepPromise(let p) = $0 { p.counted } else { nil } }, [true],
                       "kept again as counted, so a second restart does not count it again")
        XCTAssertEqual(h.engine.capUses(slot: "r", user: user, now: h.now)?.first?.counted, 1)
    }

    func testAnAdWhosePluginStoppedKeepsItsPromise() {
        var h = Harness(slots: [slot("r", format: .rewarded)])
        h.fill(h.loads[0].adID)
        guard case .success(let ad) = h.show("r", user: "u1") else { return XCTFail("no ad") }
        h.effects += h.engine.pluginLost("a", reason: "crashed", now: h.now)
        XCTAssertTrue(dropped(h).isEmpty, "the viewer may still finish it")
        XCTAssertNil(refusal(h.reportViewer(.complete, ad.id)))
        XCTAssertEqual(grants(h).map(\.adID), [ad.id])
    }
}

final class ReconfigureTests: XCTestCase {
    func testRemovedSlotsEndTheirAdsAndKeptSlotsKeepThem() {
        var h = Harness(slots: [slot("keep"), slot("drop")])
        for order in h.loads { h.fill(order.adID) }
        let dropAd = h.loads.first { $0.slotID == "drop" }!.adID
        let keepAd = h.loads.first { $0.slotID == "keep" }!.adID
        h.effects += h.engine.reconfigure(slots: [slot("keep"), slot("new")], settings: .init(), now: h.now)
        XCTAssertTrue(h.destroyed.contains(dropAd))
        XCTAssertFalse(h.destroyed.contains(keepAd))
        XCTAssertEqual(h.engine.slotStatuses(at: h.now).map(\.config.id), ["keep", "new"])
        XCTAssertEqual(h.loads.last!.slotID, "new")
    }

    func testAChangedSlotKeepsTheAdsStillValidUnderItsNewSettings() {
        var h = Harness(slots: [slot(buffer: 3, ttl: .seconds(600), entries: ["a", "b"])])
        for order in h.loads { h.fill(order.adID) }
        let before = h.status("s").readyAds
        XCTAssertEqual(before.count, 3)
        h.advance(.seconds(100))
        // Same entries reordered, a TTL cut to 300 s, and a buffer of 2.
        h.effects += h.engine.reconfigure(slots: [slot(buffer: 2, ttl: .seconds(300), entries: ["b", "a"])],
                                          settings: .init(backoffJitter: 0), now: h.now)
        let after = h.status("s").readyAds
        XCTAssertEqual(after.count, 2)
        XCTAssertTrue(Set(after).isSubset(of: Set(before)), "no new ads: the old ones stay")
        h.advance(.seconds(200))  // 300 s after loading: the new TTL ends them
        XCTAssertTrue(Set(after).isDisjoint(with: h.status("s").readyAds))
    }

    func testAnAdFromARemovedEntryGoesAndTheSlotRefillsFromTheNewOne() {
        var h = Harness(slots: [slot(entries: ["a"])])
        let old = h.loads[0].adID
        h.fill(old)
        h.effects += h.engine.reconfigure(slots: [slot(entries: ["b"])], settings: .init(), now: h.now)
        XCTAssertTrue(h.destroyed.contains(old))
        XCTAssertEqual(h.loads.last!.plugin, "b")
    }

    func testShutdownDestroysEveryLiveObject() {
        var h = Harness(slots: [slot(buffer: 2)])
        h.fill(h.loads[0].adID)
        let live = Set(h.loads.map(\.adID))
        h.effects += h.engine.shutdown(now: h.now)
        XCTAssertEqual(Set(h.destroyed), live)
    }
}

/// The metrics' loads per network: every load's end counts once, under its outcome, with
/// its latency read from the moments the engine was given.
final class NetworkLoadsTests: XCTestCase {
    func testEveryLoadEndCountsOnceByOutcomeWithItsLatency() {
        var h = Harness(slots: [slot(timeout: .seconds(2))])
        h.advance(.milliseconds(300))
        h.fill(h.loads[0].adID)
        guard case .success = h.show("s") else { return XCTFail("no ad") }
        let second = h.loads.last!.adID
        h.advance(.milliseconds(50))
        h.report(.failed(.noFill, networkCode: 0, message: "none"), second)
        h.fill(second)  // a second completion: ignored, not counted again
        let third = h.loads.count
        h.advance(.seconds(10))  // the backoff passes and the next load starts...
        XCTAssertGreaterThan(h.loads.count, third)
        h.advance(.seconds(2))  // ...and reaches its deadline

        let loads = h.engine.networkLoads["a"]
        XCTAssertEqual(loads?.ended, [NetworkLoads.filled: 1, "no_fill": 1, "timeout": 1])
        let latency = try! XCTUnwrap(loads?.latency)
        XCTAssertEqual(latency.count, 3)
        XCTAssertEqual(latency.cumulative[LatencyHistogram.bounds.firstIndex(of: 0.05)!], 1, "the no_fill after 50 ms")
        XCTAssertEqual(latency.cumulative[LatencyHistogram.bounds.firstIndex(of: 0.5)!], 2, "and the fill after 300 ms")
        XCTAssertEqual(latency.cumulative.last, 3)
        XCTAssertNil(h.engine.networkLoads["b"], "a network never asked has no series")
    }

    func testARemovedNetworksSeriesGoAndItsLateLoadEndsAreNotCounted() {
        var h = Harness(slots: [slot(buffer: 2)])
        XCTAssertEqual(h.loads.count, 2)
        let pending = h.loads[1].adID
        h.fill(h.loads[0].adID)
        XCTAssertNotNil(h.engine.networkLoads["a"])
        h.effects = h.engine.setAvailablePlugins(["b"], now: h.now)
        XCTAssertNil(h.engine.networkLoads["a"], "a removed network's series go with it")
        h.report(.failed(.noFill, networkCode: 0, message: "late"), pending, from: "a")
        XCTAssertNil(h.engine.networkLoads["a"], "and do not come back")
    }
}

/// How often a slot may load when its plugin answers at once, whatever it answers: the
/// attacker-plugin review's payload with expires_in_s = 1e-300 made one slot load, expire and
/// load again 73,636 times in 9 s. With the lifetime floor (`Engine.shortestLifetime`) and the
/// entries' backoff, a slot loads about its buffer target per lifetime when its ads fill, and
/// each entry about once per backoff when they fail.
final class ReloadRateTests: XCTestCase {
    private let span = Duration.seconds(10)

    /// Runs `span` in 10 ms steps, answering every load the moment it starts; its load count.
    private func loads(_ h: inout Harness, answer: (inout Harness, LoadOrder) -> Void) -> Int {
        var answered = 0
        let end = h.now + span
        while h.now < end {
            // Loads an answer starts are answered too, in the same instant.
            while answered < h.loads.count {
                let order = h.loads[answered]
                answer(&h, order)
                answered += 1
            }
            h.advance(.milliseconds(10))
        }
        return answered
    }

    func testASlotWhoseAdsExpireAtOnceLoadsAboutItsBufferPerLifetime() {
        let buffer = 3
        var h = Harness(slots: [slot(buffer: buffer)])
        let count = loads(&h) { h, order in h.fill(order.adID, expiresIn: .nanoseconds(1)) }
        // Each ad is replaced once its refresh margin (a fifth of its floor) begins.
        let most = buffer * (Int(span / (Engine.shortestLifetime * 0.8)) + 1)
        XCTAssertGreaterThan(count, buffer * 5)
        XCTAssertLessThanOrEqual(count, most, "loads in \(span) of a buffer of \(buffer) whose ads expire at once")
        XCTAssertEqual(h.status("s").ready, buffer, "the buffer stays full meanwhile")
    }

    func testASlotWhoseLoadsFailAtOnceAsksEachEntryAtMostOncePerBackoff() {
        let entries = ["a", "a", "b"]
        let settings = SchedulerSettings()  // the defaults: 1 s doubling, spread by a fifth
        for code in [AdErrorCode.noFill, .pluginFault, .network] {
            var h = Harness(slots: [slot(entries: entries)], settings: settings)
            let count = loads(&h) { h, order in h.report(.failed(code, networkCode: 0, message: "at once"), order.adID) }
            let shortest = settings.backoff(doublings: 0, spread: -1)
            XCTAssertLessThanOrEqual(count, entries.count * (Int(span / shortest) + 1), "\(code)")
            // Doubling from the first failure (1, 2, 4 s, each within a fifth): four tries of an entry at most.
            XCTAssertGreaterThanOrEqual(count, entries.count, "\(code): every entry is asked")
            XCTAssertLessThanOrEqual(count, entries.count * 4, "\(code): loads in \(span) of entries that always fail")
        }
    }

    /// A demand-aware slot does not double its backoff for a low-fill entry's ordinary run of
    /// no-fills (docs/scheduler.md): its entry is still asked no more than once per backoff.
    func testADemandAwareSlotsFailingEntryIsAskedAtMostOncePerBackoff() {
        let settings = SchedulerSettings(backoffJitter: 0.2)
        var config = slot(buffer: 1)
        config.bufferMax = 5
        var h = Harness(slots: [config], settings: settings)
        let count = loads(&h) { h, order in h.report(.failed(.noFill, networkCode: 0, message: "at once"), order.adID) }
        XCTAssertGreaterThan(count, 5, "its entry is asked again and again")
        XCTAssertLessThanOrEqual(count, Int(span / settings.backoff(doublings: 0, spread: -1)) + 1)
    }
}
