import AdorchEngine
import AdorchNoticeStore
import AdorchStateDatabase
import Foundation

// [engine queue] Bidders' notices (docs/bidding.md, "Notices"): each step the engine takes on
// an ad's notices is written to the outbox before the effects after it are carried out, so a
// win notice is on disk before its Show is answered; the sender sends what is due.

extension EngineRuntime {
    static let noticesFileName = "notices.sqlite"

    /// A past run's outbox: its held notices become what their ads' end makes them, and what
    /// is due is sent. None yet: it is made with the first notice a plugin gives.
    func openNoticesLeftBefore() throws {
        guard FileManager.default.fileExists(atPath: stateDir + "/" + Self.noticesFileName) else { return }
        try openNotices()
    }

    /// Opens the outbox. A damaged one is moved aside, said in the journal; any other failure is thrown.
    @discardableResult
    private func openNotices() throws -> NoticeSender {
        if let notices { return notices }
        let path = stateDir + "/" + Self.noticesFileName
        let outbox: NoticeOutbox
        do {
            outbox = try NoticeOutbox(path: path)
        } catch let error where StateDatabase.isDamage(error) {
            let aside = moveAsideDamaged(path)
            logger.error("notices: \(path) could not be opened (\(error)); moved to \(aside ?? "nowhere: it stays"), and notices start afresh")
            outbox = try NoticeOutbox(path: path)
        } catch {
            throw StateDirectoryError(path: stateDir, reason: "holds the notice outbox, \(Self.noticesFileName), which cannot be opened now: \(error); nothing was changed")
        }
        let recovered = try outbox.recoverHeld(nowMS: NoticeSender.nowMS())
        if recovered > 0 { logger.notice("notices: \(recovered) loss notices of ads the last run held unshown are due (expired)") }
        let sender = NoticeSender(outbox: outbox, logger: logger)
        notices = sender
        sender.wake()
        return sender
    }

    /// The most notice steps waiting in memory for a full disk, and the most bytes of URLs
    /// one plugin's waiting holds may carry (the outbox's own bound): past either a hold is
    /// refused, its ad served without notices, as past the bound on disk.
    static let maxUnwrittenNotices = 4096

    /// Writes one step of an ad's notices, after any of that ad's still waiting; nil when it
    /// is on disk (or refused past a bound), else why not. A win not written is not kept: its
    /// Show is refused, and the ad's end follows as a loss. Any other step waits, and is
    /// written again every second. Another ad's waiting steps do not hold this one's.
    func record(_ step: NoticeStep, of id: AdID, plugin: String) -> String? {
        let reason: String
        if !unwrittenNotices.contains(where: { $0.id == id }) {
            do {
                let sender = try openNotices()
                try sender.outbox.apply(step, ad: id, plugin: plugin, nowMS: NoticeSender.nowMS())
                sender.wake()
                return nil
            } catch let error as NoticeOutbox.OverBound {
                refusedOverBound("\(error)")
                return nil
            } catch {
                reason = "\(error)"
                logger.error("notices: the outbox could not take a \(step.name) of \(plugin)'s ad (\(error)); \(step == .win ? "the ad is not handed out" : "written again every second")")
            }
        } else {
            reason = "this ad's notices written before it are still waiting for the outbox"
        }
        guard step != .win else { return reason }
        if case .hold(let notices) = step {
            let waiting = unwrittenNotices.reduce(0) { sum, w in
                guard w.plugin == plugin, case .hold(let held) = w.step else { return sum }
                return sum + NoticeOutbox.bytes(of: held)
            }
            guard unwrittenNotices.count < Self.maxUnwrittenNotices, waiting + NoticeOutbox.bytes(of: notices) <= NoticeOutbox.maxBytesPerPlugin else {
                refusedOverBound("\(plugin)'s notices waiting for a full disk would pass their bound")
                return reason
            }
        }
        unwrittenNotices.append((id, plugin, step))
        armDurableRetry()
        return reason
    }

    /// An ad's notices refused, past a bound: its ad serves without them; said once a minute.
    private func refusedOverBound(_ why: String) {
        noticesOverBound += 1
        if overBoundLoggedAt.map({ Date().timeIntervalSince($0) >= 60 }) ?? true {
            overBoundLoggedAt = Date()
            logger.warning("notices: \(why); the notices of new ads are refused until what waits is sent (\(noticesOverBound) ads so far)")
        }
    }

    /// Writes the waiting steps in order, each ad's after its earlier ones; a step past a
    /// bound is dropped (its ad's later steps then find nothing to move).
    func retryUnwrittenNotices() {
        guard !unwrittenNotices.isEmpty, let sender = try? openNotices() else { return }
        let before = unwrittenNotices.count
        var blocked: Set<AdID> = []
        var left: [(id: AdID, plugin: String, step: NoticeStep)] = []
        for waiting in unwrittenNotices {
            guard !blocked.contains(waiting.id) else {
                left.append(waiting)
                continue
            }
            do {
                try sender.outbox.apply(waiting.step, ad: waiting.id, plugin: waiting.plugin, nowMS: NoticeSender.nowMS())
            } catch let error as NoticeOutbox.OverBound {
                refusedOverBound("\(error)")
            } catch {
                blocked.insert(waiting.id)
                left.append(waiting)
            }
        }
        unwrittenNotices = left
        if left.count < before {
            logger.notice("notices: \(before - left.count) waiting steps written to the outbox; \(left.count) still waiting")
            sender.wake()
        }
    }

    /// How long a clean stop waits for the notices in flight.
    static let noticesStopGrace: Duration = .seconds(2)

    /// For a clean stop: no more notices are sent in this run.
    func closeNotices() {
        guard let notices else { return }
        let left = notices.close(grace: Self.noticesStopGrace)
        if left > 0 { logger.warning("notices: \(left) notices were still unanswered at stop; the next start sends them again") }
    }

    /// Merges the outbox's WAL into its file, for a clean stop.
    func checkpointNotices() {
        if !unwrittenNotices.isEmpty {
            logger.error("notices: \(unwrittenNotices.count) notice steps could not be written to the outbox and are lost with this stop")
        }
        do { try notices?.outbox.checkpoint() } catch { logger.warning("notices: the outbox could not be checkpointed at stop: \(error)") }
    }
}

extension NoticeStep {
    /// The step in a word, for the journal.
    var name: String {
        switch self {
        case .hold: "hold"
        case .win: "win"
        case .billing: "billing"
        case .loss: "loss"
        case .settle: "settle"
        }
    }
}
