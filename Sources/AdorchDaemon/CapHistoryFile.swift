import AdorchCapStore
import AdorchEngine
import Foundation
import Logging

/// [engine queue] The frequency rules' impressions in the state directory (docs/caps.md,
/// "Durable"): written as the engine counts them, read back at start, so that a cap does not
/// reset when the daemon does. The engine keeps time on the monotonic clock and the file on
/// the wall clock; the two are tied at each read and write.
final class CapHistoryFile: Sendable {
    static let fileName = "caps.sqlite"
    let store: ImpressionStore
    private let logger: Logger

    init(stateDir: String, logger: Logger) throws {
        store = try ImpressionStore(path: stateDir + "/" + Self.fileName)
        self.logger = logger
    }

    /// A failed write is logged and the cap still holds for this run: it lives in the engine.
    func record(_ impression: CountedImpression, now: Moment) {
        let row = StoredImpression(slot: impression.slot, plugin: impression.network.plugin, adUnitID: impression.network.adUnitID,
                                   userID: impression.userID, at: Self.wall(impression.at, now: now))
        do {
            try store.record(row)
        } catch {
            logger.error("the impression of \(row.slot) could not be written to \(store.path): \(error); its caps hold until the daemon restarts")
        }
    }

    /// Drops what the rules no longer count, then reads the rest back onto the engine's clock.
    func restore(keeping kept: Duration, now: Moment) -> [CountedImpression] {
        let since = Date(timeIntervalSinceNow: -kept.seconds)
        do {
            let pruned = try store.prune(before: since)
            let rows = try store.impressions(since: since)
            if !rows.isEmpty || pruned > 0 {
                logger.info("frequency caps: \(rows.count) impressions read back from \(store.path), \(pruned) older than \(FrequencyRule.text(kept)) dropped")
            }
            return rows.map { row in
                CountedImpression(slot: row.slot, network: CapNetwork(plugin: row.plugin, adUnitID: row.adUnitID), userID: row.userID,
                                  at: now.capTime &- Int64(clamping: Int64(Date().timeIntervalSince(row.at) * 1e9)))
            }
        } catch {
            logger.error("frequency caps: \(store.path) could not be read: \(error); caps count from now on")
            return []
        }
    }

    /// Rows the rules in force no longer count go (at start, at each reload, and hourly).
    func prune(keeping kept: Duration) {
        do {
            try store.prune(before: Date(timeIntervalSinceNow: -kept.seconds))
        } catch {
            logger.warning("frequency caps: old impressions in \(store.path) could not be deleted: \(error)")
        }
    }

    private static func wall(_ at: Int64, now: Moment) -> Date {
        Date(timeIntervalSinceNow: -Double(now.capTime &- at) / 1e9)
    }
}
