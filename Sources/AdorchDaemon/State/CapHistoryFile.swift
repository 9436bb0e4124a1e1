import AdorchCapStore
import AdorchStateDatabase
import AdorchEngine
import Foundation
import Logging

/// [engine queue] The frequency rules' impressions in the state directory (docs/caps.md,
/// "Durable"): written as the engine counts them, read back at start, so that a cap does not
/// reset when the daemon does. The engine keeps time on the monotonic clock and the file on
/// the wall clock; the two are tied at each read and write.
final class CapHistoryFile {
    static let fileName = "caps.sqlite"
    /// At most one line a minute about failed writes: a full disk fails every impression.
    private static let failureLogInterval: TimeInterval = 60

    private let store: ImpressionStore?
    let path: String
    private let logger: Logger
    private var lastFailureLog: Date?

    /// Opens the file. One that is damaged (not SQLite, corrupt, not this store's schema) is
    /// moved aside with its WAL and a new one started, so caps count from now on and the daemon
    /// serves: said in the journal. Any other failure (too many open files, no memory, an I/O
    /// error) may pass: it touches nothing and is thrown, in words, so the start fails rather
    /// than forget who was capped.
    init(stateDir: String, logger: Logger) throws(StateDirectoryError) {
        path = stateDir + "/" + Self.fileName
        self.logger = logger
        do {
            store = try ImpressionStore(path: path)
        } catch let first {
            guard StateDatabase.isDamage(first) else {
                throw StateDirectoryError(path: stateDir, reason: "holds the frequency caps' history, \(Self.fileName), which cannot be opened now: \(first); nothing was changed")
            }
            // Its WAL goes with it: the impressions not yet merged are in there.
            let aside = moveAsideDamaged(path)
            store = try? ImpressionStore(path: path)
            let outcome = store == nil ? "caps hold in memory only, until the daemon stops"
                : aside.map { "moved to \($0); caps count from now on" } ?? "caps count from now on"
            logger.error("frequency caps: \(path) could not be opened (\(first)): \(outcome)")
        }
    }

    /// Merges the WAL into the file, for a clean stop: the state directory then holds one file.
    func checkpoint() {
        do { try store?.checkpoint() } catch { logger.warning("frequency caps: \(path) could not be checkpointed at stop: \(error)") }
    }

    /// Impressions counted that the file could not take yet (a full disk), oldest first:
    /// written again, in order, until it does (`retryWaiting`).
    private var waiting: [StoredImpression] = []

    /// Whether impressions wait for the file: a reward granted after them waits too, since its
    /// grant removes the promise that would count its ad's impression after a restart.
    var hasWaiting: Bool { !waiting.isEmpty }

    /// Writes the impression, after any still waiting. One that cannot be written is kept and
    /// written again (logged at most once a minute); the cap holds meanwhile in the engine.
    /// Whether it is in the file.
    @discardableResult
    func record(_ impression: CountedImpression, now: Moment) -> Bool {
        guard store != nil else { return false }
        waiting.append(StoredImpression(slot: impression.slot, plugin: impression.network.plugin, adUnitID: impression.network.adUnitID,
                                        uid: impression.user.uid, userID: impression.user.id,
                                        atMilliseconds: Self.nowMilliseconds() &- (now.capTime &- impression.at) / 1_000_000))
        return retryWaiting()
    }

    /// Writes the waiting impressions in order, up to the first that still fails; whether none waits.
    @discardableResult
    func retryWaiting() -> Bool {
        guard let store else { return waiting.isEmpty }
        let before = waiting.count
        do {
            while let first = waiting.first {
                try store.record(first)
                waiting.removeFirst()
            }
            if before > 1 { logger.notice("frequency caps: \(before) impressions that had waited were written to \(path)") }
            return true
        } catch {
            if let last = lastFailureLog, Date().timeIntervalSince(last) < Self.failureLogInterval { return false }
            logger.error("frequency caps: \(waiting.count) impressions could not be written to \(path) yet (\(error)); they are written again every second, and their caps hold meanwhile")
            lastFailureLog = Date()
            return false
        }
    }

    /// What the rules in force can still count, on the engine's clock. Rows written by a
    /// clock that was ahead count as now (never longer than their window); rows from further
    /// ahead than any window, and damaged ones, are left for `prune`. Nothing is deleted
    /// here: a daemon that then fails to start must not cost the running one its history.
    func restore(keeping kept: Duration, now: Moment) -> [CountedImpression] {
        guard let store else { return [] }
        let nowMS = Self.nowMilliseconds(), keptMS = kept.nanosecondsClamped / 1_000_000
        do {
            let rows = try store.impressions(since: nowMS &- keptMS, until: nowMS &+ keptMS)
            if !rows.isEmpty { logger.info("frequency caps: \(rows.count) impressions read back from \(path)") }
            return rows.map { row in
                let ageNS = max(0, nowMS &- row.atMilliseconds).multipliedReportingOverflow(by: 1_000_000)
                return CountedImpression(slot: row.slot, network: CapNetwork(plugin: row.plugin, adUnitID: row.adUnitID),
                                         user: CapUser(uid: row.uid, id: row.userID),
                                         at: now.capTime &- (ageNS.overflow ? .max : ageNS.partialValue))
            }
        } catch {
            logger.error("frequency caps: \(path) could not be read (\(error)); caps count from now on")
            return []
        }
    }

    /// Rows the rules in force no longer count go: once the daemon serves, at each reload, and hourly.
    func prune(keeping kept: Duration) {
        guard let store else { return }
        let nowMS = Self.nowMilliseconds(), keptMS = kept.nanosecondsClamped / 1_000_000
        do {
            let gone = try store.prune(since: nowMS &- keptMS, until: nowMS &+ keptMS, now: nowMS)
            if gone > 0 { logger.debug("frequency caps: \(gone) impressions no rule counts any more deleted from \(path)") }
        } catch {
            logger.warning("frequency caps: old impressions in \(path) could not be deleted: \(error)")
        }
    }

    private static func nowMilliseconds() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
}
