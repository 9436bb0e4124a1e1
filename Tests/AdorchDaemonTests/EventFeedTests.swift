import AdorchEngine
import AdorchPluginHost
import AdorchVarlink
import Foundation
import Logging
import XCTest

@testable import AdorchDaemon

/// The event feed's journal lines and the events ListEvents keeps, as a plugin floods them.
final class EventFeedTests: XCTestCase {
    /// The lines a logger wrote.
    private final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    private struct Collector: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.add("\(event.message)") }
    }

    private let lines = Lines()

    private func feed() -> EventFeed {
        let lines = self.lines
        return EventFeed(logger: Logger(label: "test") { _ in Collector(lines: lines) }, ids: ExternalIDs())
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
}
