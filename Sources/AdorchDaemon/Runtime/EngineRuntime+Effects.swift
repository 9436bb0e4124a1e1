import AdorchEngine
import AdorchPluginHost
import Dispatch

// [engine queue] The engine's effects carried out: plugin calls, events, rewards and the
// answers to waiting calls; and what plugins report, fed back to the engine.

extension EngineRuntime {
    /// Carries out the effects in order, then re-arms the timer.
    func apply(_ effects: [Effect]) {
        // Ads whose promise or win notice could not be written in this batch, and why: their Show is refused.
        var unwritten: [AdID: (why: String, error: (_ slot: String) -> ShowError)] = [:]
        // An impression of this batch not in the caps history: a promise kept after it must not
        // say it counted, so that a restart counts it (docs/rules.md, "Across a restart").
        var impressionUnwritten = false
        for effect in effects {
            switch effect {
            case .load(let order): plugins[order.plugin]?.load(order)
            case .show(let id, let plugin, let userID): present(id, plugin: plugin, userID: userID)
            case .withdrawShow(let id, let plugin): plugins[plugin]?.withdrawShow(id)
            case .notify(let id, let plugin, let event): plugins[plugin]?.notify(id, event: event)
            case .lose(let id, let plugin, let loss): plugins[plugin]?.lose(id, loss)
            case .destroy(let id, let plugin): plugins[plugin]?.destroy(id)
            case .notice(let id, _, .win) where unwritten[id] != nil:
                // Its Show is refused already (its reward could not be promised): no win to write.
                engine.winUnwritten(id)
            case .notice(let id, let plugin, let step):
                if let reason = record(step, of: id, plugin: plugin), step == .win {
                    engine.winUnwritten(id)
                    unwritten[id] = ("its win notice could not be written to the notice outbox", { .noticeUnwritten(slot: $0, reason: reason) })
                }
            case .emit(let event): feed.publish(event)
            case .completeShow(let request, .success(let ad)) where unwritten[ad.id] != nil:
                // A restart would cost its viewer the reward, or its network the bill: the ad goes, and the call says why.
                let (why, error) = unwritten[ad.id]!
                apply(engine.displayFailed(ad.id, reason: why, now: now()))
                pendingShows.removeValue(forKey: request)?(.failure(error(ad.slot)))
            case .completeShow(let request, let result):
                pendingShows.removeValue(forKey: request)?(result)
            case .completeLoad(let request, let result):
                pendingLoads.removeValue(forKey: request)?(result)
            case .grantReward(let grant):
                guard let rewards else { break }
                record(UnrecordedReward(row: rewards.row(for: grant, holder: grant.holder, ids: ids), adID: grant.adID, holder: grant.holder))
            case .startSession(let id, let plugin):
                // A plugin stuck for longer than this is as good as a refusal; the start timeout covers the rest.
                plugins[plugin]?.show(id, userID: nil, timeout: .seconds(5)) { [self] started in
                    guard !started else { return }
                    queue.async { [self] in apply(sessions.startRefused(id, now: now())) }
                }
            case .controlSession(let id, let plugin, let control): plugins[plugin]?.control(id, control)
            case .recordImpression(let impression):
                if capHistory?.record(impression, now: now()) == false {
                    impressionUnwritten = true
                    armDurableRetry()
                }
            case .keepPromise(var promise):
                if impressionUnwritten { promise.counted = false }
                if let reason = keep(promise) {
                    unwritten[promise.adID] = ("its reward could not be promised in the ledger", { .promiseUnwritten(slot: $0, reason: reason) })
                }
            case .dropPromise(let id): dropPromise(id)
            }
        }
        rearm()
    }

    /// ad_show, and its answer back to the engine, which decides what the Show call gets. A
    /// plugin in the daemon that declared its ad_show safe on any thread (ABI 1.2) is called
    /// right here, so the call is answered in this same turn of the engine queue; any other on
    /// its own queue (an isolated one's, in its host).
    private func present(_ id: AdID, plugin name: String, userID: String?) {
        guard let plugin = plugins[name] else { return apply(engine.showAnswered(id, presented: false, now: now())) }
        if let plugin = plugin as? LoadedPlugin, plugin.showsOnAnyThread {
            return apply(engine.showAnswered(id, presented: plugin.showNow(id, userID: userID), now: now()))
        }
        plugin.show(id, userID: userID) { [self] shown in
            queue.async { [self] in apply(engine.showAnswered(id, presented: shown, now: now())) }
        }
    }

    /// What plugins report, from their own threads: one hop to the engine queue.
    var reportHandler: PluginReportHandler {
        { [weak self] plugin, id, report in
            guard let self else { return }
            queue.async { [self] in
                apply(sessions.owns(id) ? sessions.pluginReported(report, for: id, from: plugin, now: now())
                                        : engine.pluginReported(report, for: id, from: plugin, now: now()))
            }
        }
    }
}
