import AdorchEngine
import AdorchPluginHost
import AdorchVarlink
import Foundation
import Logging
import XCTest

@testable import AdorchDaemon

/// The event feed's journal lines and the events ListEvents keeps, as a plugin floods them.
final class EventFeedTests: XCTestCase {
    private let lines = LoggedLines()

    private func feed() -> EventFeed {
        EventFeed(logger: lines.logger, ids: ExternalIDs())
    }

    /// Root, who sees every event.
    private var root: Viewer {
        Viewer(peer: PeerCredentials(pid: 1, uid: 0, gid: 0, groups: []),
               gate: CallGate(DaemonConfig.embeddedDefault(), logger: Logger(label: "test")))
    }

    func testEveryLineAboutAPluginCountsAgainstItsBudgetButRewardsAndPausesAreAlwaysLogged() {
        let feed = feed()
        let flood = 5 * CallbackBounds.logLinesPerSecond
        let started = ContinuousClock.now
        for n in 0..<flood {
            // What a plugin whose ads expire at once makes: loaded, shown, expired, replaced.
            let kinds: [EngineEvent.Kind] = [.adLoaded, .adShown, .adExpired, .adReplaced, .adFailed]
            feed.publish(EngineEvent(kinds[n % kinds.count], slot: "s", adID: AdID(n), network: "a"))
        }
        for n in 0..<3 {
            feed.publish(EngineEvent(.rewardGranted, slot: "s", adID: AdID(flood + n), network: "a", userID: "u"))
            feed.publish(EngineEvent(.networkPaused, slot: "s", network: "a", message: "paused for 300 s"))
            feed.publish(EngineEvent(.adLoaded, slot: "t", adID: AdID(flood + 10 + n), network: "b"))
        }
        // Each second the flood spans admits the budget again.
        let seconds = Int((ContinuousClock.now - started) / .seconds(1)) + 1
        let logged = lines.all
        let aboutA = logged.filter { $0.hasPrefix("ad") && $0.contains(" in s") }
        XCTAssertLessThanOrEqual(aboutA.count, seconds * CallbackBounds.logLinesPerSecond, "lines about plugin a's ads in \(seconds) s")
        XCTAssertGreaterThanOrEqual(aboutA.count, CallbackBounds.logLinesPerSecond)
        XCTAssertEqual(logged.filter { $0.hasPrefix("reward granted") }.count, 3, "every reward granted is logged")
        XCTAssertEqual(logged.filter { $0.hasPrefix("network a rate-limited") }.count, 3, "every pause is logged")
        XCTAssertEqual(logged.filter { $0.hasPrefix("ad") && $0.contains(" in t") }.count, 3, "another plugin's lines have a budget of their own")
        // Subscribers and ListEvents still have every event.
        XCTAssertEqual(feed.recentEvents(slots: ["t"], limit: 10, viewer: root).count, 3)
    }

    func testAFloodInOneSlotLeavesTheOtherSlotsLatestEventsListed() throws {
        let feed = feed()
        feed.publish(EngineEvent(.adLoaded, slot: "b", adID: 1, network: "n"))
        feed.publish(EngineEvent(.adShown, slot: "b", adID: 1, network: "n", userID: "u"))
        feed.publish(EngineEvent(.slotEmpty, slot: "c", message: "no valid ad ready"))
        for n in 0..<5000 { feed.publish(EngineEvent(.adExpired, slot: "a", adID: AdID(100 + n), network: "n")) }
        let all = feed.recentEvents(slots: nil, limit: EventFeed.recentKept, viewer: root)
        XCTAssertEqual(all.count, EventFeed.recentKept, "the ring is full, not over")
        let b = feed.recentEvents(slots: ["b"], limit: EventFeed.recentKept, viewer: root)
        XCTAssertEqual(b.compactMap { $0["kind"]?.stringValue }, ["ad_loaded", "ad_shown"], "slot b's events outlive slot a's flood")
        XCTAssertEqual(feed.recentEvents(slots: ["c"], limit: 10, viewer: root).count, 1)
        // Slot a keeps the rest, its latest, oldest first.
        let a = feed.recentEvents(slots: ["a"], limit: EventFeed.recentKept, viewer: root)
        XCTAssertEqual(a.count, EventFeed.recentKept - 3)
        XCTAssertEqual(a.last?["kind"]?.stringValue, "ad_expired")
        XCTAssertTrue(all.last.map { $0 == a.last } ?? false, "all events come oldest first across slots")
    }

    /// Each slot keeps at least its share, recentKept over the slots with events kept, of its latest.
    func testEverySlotKeepsItsShareWhenAllFlood() {
        var ring = RecentEvents(capacity: 12)
        for n in 0..<100 {
            ring.append(Recent(event: EngineEvent(.adLoaded, slot: "s\(n % 3)", adID: AdID(n)), time: Date()))
        }
        ring.append(Recent(event: EngineEvent(.adLoaded, slot: nil, adID: 1000), time: Date()))
        let kept = ring.elements
        XCTAssertEqual(kept.count, 12)
        XCTAssertEqual(kept.last?.event.adID, 1000, "an event of no slot is kept as one more slot's")
        for slot in ["s0", "s1", "s2"] {
            let ids = kept.filter { $0.event.slot == slot }.compactMap(\.event.adID)
            XCTAssertGreaterThanOrEqual(ids.count, 12 / 4, slot)
            XCTAssertEqual(ids, ids.sorted(), "oldest first")
            XCTAssertEqual(ids.last, (97...99).first { "s\($0 % 3)" == slot }, "\(slot) keeps its latest")
        }
        XCTAssertEqual(kept.map(\.event.adID!), kept.map(\.event.adID!).sorted(), "oldest first across slots")
    }
}
