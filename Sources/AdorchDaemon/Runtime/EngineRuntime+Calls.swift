import AdorchEngine
import AdorchPaths
import AdorchPluginHost
import AdorchVarlink
import Dispatch
import Foundation

// [engine queue] What the control API asks of the engine side. Each call hops onto the
// engine queue once and answers through its completion: the Varlink queue never waits for
// the engine queue, so neither can deadlock the other.

extension EngineRuntime {
    /// Every slot, with the frequency rule that would hold a Show for `user`, if any.
    func slotStatuses(capsFor user: CapUser = CapUser(uid: nil, id: nil), completion: @escaping @Sendable ([SlotStatus]) -> Void) {
        queue.async { [self] in completion(engine.slotStatuses(at: now(), capsFor: user)) }
    }

    /// Each rule of the slot and its networks, with what it counts for `user` now; nil for no such slot.
    func capUses(slot: String, user: CapUser, completion: @escaping @Sendable ([CapUse]?) -> Void) {
        queue.async { [self] in completion(engine.capUses(slot: slot, user: user, now: now())) }
    }

    /// A Show call, decided by the engine (its fallbacks, retry limit and `holder`'s budgets
    /// included); the answer carries the ad's expiry as wall-clock time. `perCall`: the call's
    /// own privacy, over what `holder` set (`PrivacyBook.resolve`).
    func show(slot: String, userID: String?, reward: RewardModel?, holder: UInt32?, privacy perCall: ViewerPrivacy?,
              completion: @escaping @Sendable (Result<(ad: ShownAd, expiresAt: Date), ShowError>) -> Void) {
        queue.async { [self] in
            let privacy = privacyBook?.resolve(call: perCall, uid: holder, userID: userID).privacy ?? perCall
            let waiting = rewardsWaiting(for: holder, slot: slot)
            let request = issueRequest()
            let started = now()
            pendingShows[request] = { [self] result in
                // Runs on the engine queue, as every effect does: showStats needs no lock.
                if ShowStats.result(of: result) != nil { showStats[slot, default: ShowStats()].note(result, took: now() - started) }
                completion(result.map { ($0, wallTime($0.expiresAt)) })
            }
            apply(engine.requestShow(slot: slot, userID: userID, privacy: privacy, reward: reward, holder: holder, rewardsWaiting: waiting,
                                     request: request, now: now()))
        }
    }

    /// The rewards of ads handed to `holder` that wait for its AckReward, for the engine's
    /// bound on them (docs/rules.md, "A bound on unacknowledged rewards"): those in the ledger
    /// and those granted but not written to it yet. Counted only for a rewarded slot's Show
    /// by a uid the bound binds: a query on every Show would be for nothing.
    private func rewardsWaiting(for holder: UInt32?, slot: String) -> Int {
        guard let holder, UIDBudgets.bind(holder), let rewards,
              config.slots.first(where: { $0.id == slot })?.format == .rewarded else { return 0 }
        let unwritten = unrecordedRewards.count { $0.holder == holder }
        // A ledger that cannot even be read is failing as a whole: the Show is let through to
        // the promise its ad needs, whose write then answers it LedgerFailed.
        return unwritten + ((try? rewards.ledger.unacknowledgedCount(heldBy: Int64(holder))) ?? 0)
    }

    /// An on-demand Load: `refused` answers at once (bad parameters, `holder`'s open-ads
    /// budget), `completion` when the waterfall gave ads or ran out. `targeting` is the
    /// app's: its keys go over the slot's (which holds the daemon-wide ones).
    /// `perCall`: the call's own privacy, over what `holder` set for itself (Load has no user id).
    func load(slot: String, _ asked: LoadParameters, targeting: [String: JSONValue]?, holder: UInt32?, privacy perCall: ViewerPrivacy?,
              refused: @escaping @Sendable (ShowError) -> Void,
              completion: @escaping @Sendable (Result<[(ad: ShownAd, expiresAt: Date)], LoadFailure>) -> Void) {
        queue.async { [self] in
            let privacy = privacyBook?.resolve(call: perCall, uid: holder, userID: nil).privacy ?? perCall
            var parameters = asked
            if let targeting {
                let base = config.slots.first { $0.id == slot }.flatMap { JSONValue.parse(Data($0.targetingJSON.utf8))?.objectValue } ?? [:]
                parameters.targetingJSON = JSONValue.object(Targeting.merge(base, targeting)).jsonString
            }
            let request = issueRequest()
            pendingLoads[request] = { [self] result in completion(result.map { $0.map { ($0, wallTime($0.expiresAt)) } }) }
            let (result, effects) = engine.load(slot: slot, parameters, holder: holder, privacy: privacy, request: request, now: now())
            if case .failure(let error) = result {
                pendingLoads[request] = nil
                refused(error)
            }
            apply(effects)
        }
    }

    /// SetPrivacy: `uid`'s record for `userID` ("" for its own) set, or cleared when `privacy`
    /// is nil; answered once it is on disk, or refused with nothing changed. The line it
    /// logs says whose and whether per user, never the user id, each string redacted.
    func setPrivacy(_ privacy: ViewerPrivacy?, uid: UInt32, userID: String,
                    completion: @escaping @Sendable (Result<Void, PrivacyBook.Refusal>) -> Void) {
        queue.async { [self] in
            guard let book = privacyBook else { return completion(.failure(.notStored("the daemon is starting"))) }
            do throws(PrivacyBook.Refusal) {
                try book.set(privacy, uid: uid, userID: userID, limit: config.maxPrivacyRecordsPerUID)
            } catch {
                return completion(.failure(error))
            }
            engine.forgetViewers(uid: uid, userID: userID)
            let whose = userID.isEmpty ? "the app" : "one of its users"
            logger.info("privacy: uid \(uid) \(privacy == nil ? "cleared" : "set") the signals of \(whose)\(privacy.map { ": \($0.signals.logDescription)" } ?? "")",
                        metadata: ["peer_uid": "\(uid)"])
            completion(.success(()))
        }
    }

    /// GetPrivacy: what applies to `uid`'s calls for `userID`, and where it came from.
    func privacy(uid: UInt32?, userID: String?, completion: @escaping @Sendable (ViewerPrivacy?, PrivacyBook.Source) -> Void) {
        queue.async { [self] in
            let (privacy, source) = privacyBook?.resolve(call: nil, uid: uid, userID: userID) ?? (nil, .none)
            completion(privacy, source)
        }
    }

    /// A viewer report by `caller` (nil or 0: root, who may report on any ad). `refused` is
    /// told, for the operator's log, when the ad lives and was handed to another uid; the
    /// caller's answer is then an unknown id's (`Engine.report`).
    func report(_ event: ViewerEvent, adID: String, caller: UInt32?, refused: @escaping @Sendable (String) -> Void,
                completion: @escaping @Sendable (Result<Void, ReportCallError>) -> Void) {
        guard let id = ids.internal(adID) else {
            return completion(.failure(.adNotValid(reason: "is not an ad id of this daemon run")))
        }
        queue.async { [self] in
            let reporter = caller == 0 ? nil : caller
            if let reporter, let holder = engine.holder(of: id), holder != reporter { refused("not the user ad \(adID) was handed to") }
            let (result, effects) = engine.report(event, for: id, by: reporter, now: now())
            apply(effects)
            switch result {
            case .failure(.adNotValid(let reason)): completion(.failure(.adNotValid(reason: reason)))
            // The viewer earned it and it is counted, but it is not on disk yet: said so, not OK.
            case .success where isUnrecorded(id): completion(.failure(.rewardNotRecorded))
            case .success: completion(.success(()))
            }
        }
    }

    /// Why a Report was not taken, or not wholly.
    enum ReportCallError: Error {
        case adNotValid(reason: String)
        /// The reward it granted could not be written to the ledger yet: it is written again until it is.
        case rewardNotRecorded
    }

    /// InitInteractive: a new session in the slot, fetching at once; answers its id. The
    /// session is `owner`'s, within its sessions budget, and fetched under the privacy `owner`
    /// set for its app (InitInteractive names no user).
    func initInteractive(slot slotID: String, _ request: InteractiveRequest, owner: UInt32?,
                         completion: @escaping @Sendable (Result<String, SessionCallError>) -> Void) {
        queue.async { [self] in
            guard let slot = config.slots.first(where: { $0.id == slotID }) else { return completion(.failure(.slotNotFound(slotID))) }
            let entry = slot.waterfall.first { plugins[$0.plugin]?.info.formats.contains(.interactive) == true }
            let id = engine.issueID()
            let viewer = privacyBook?.resolve(call: nil, uid: owner, userID: nil).privacy
            switch sessions.initiate(id, slot: slot, plugin: entry, viewer: viewer, request: request, owner: owner, now: now()) {
            case .success(let effects):
                logger.info("session \(ids.external(id)) initialized in \(slotID) (\(request.slotType.rawValue)) with \(entry?.plugin ?? "?")",
                            metadata: ["slot": "\(slotID)", "session_id": "\(ids.external(id))"])
                apply(effects)
                completion(.success(ids.external(id)))
            case .failure(let error):
                completion(.failure(.session(error)))
            }
        }
    }

    /// Start, Pause, Resume or Stop on a session, by `caller`: refused unless the session is
    /// its own and its slot's [access] rule still admits it (root may act on any session).
    func session(_ operation: SessionCall, _ sessionID: String, caller call: VarlinkCall,
                 completion: @escaping @Sendable (Result<Void, SessionCallError>) -> Void) {
        queue.async { [self] in
            guard let id = ids.internal(sessionID) else { return completion(.failure(.session(.sessionNotFound(0)))) }
            if let slot = sessions.slot(of: id), let refusal = gate.refusal(of: call, slot: slot) {
                return completion(.failure(.denied(refusal)))
            }
            let caller = call.peer?.uid
            let result = switch operation {
            case .start: sessions.start(id, by: caller, now: now())
            case .pause: sessions.control(.pause, id, by: caller)
            case .resume: sessions.control(.resume, id, by: caller)
            case .stop: sessions.stop(id, by: caller, now: now())
            }
            switch result {
            case .success(let effects):
                logger.debug("session \(sessionID): \(operation.rawValue)", metadata: ["session_id": "\(sessionID)"])
                apply(effects)
                completion(.success(()))
            case .failure(let error):
                completion(.failure(.session(error)))
            }
        }
    }

    func recentEvents(slots: Set<String>?, limit: Int, viewer: Viewer, completion: @escaping @Sendable ([JSONValue]) -> Void) {
        queue.async { [self] in completion(feed.recentEvents(slots: slots, limit: limit, viewer: viewer)) }
    }

    /// Streams the events `viewer` may see to `replier`, starting with the newest of its own
    /// rewards that no app acknowledged yet; `subscribed` says how many more wait.
    func subscribe(slots: Set<String>?, viewer: Viewer, replier: VarlinkReplier) {
        queue.async { [self] in
            let redelivery = rewards?.redeliveries(slots: slots, viewer: viewer) ?? (events: [], waiting: 0)
            let id = feed.subscribe(slots: slots, viewer: viewer, replier: replier, rewardsWaiting: redelivery.waiting)
            replier.onClose { [weak self] in
                guard let self else { return }
                queue.async { [self] in feed.unsubscribe(id) }
            }
            for event in redelivery.events { replier.reply(["event": event], continues: true) }
        }
    }

    /// The ledger's calls run on the engine queue, behind the grants already being written.
    func withRewards<T: Sendable>(_ body: @escaping @Sendable (RewardDesk) -> T, completion: @escaping @Sendable (T) -> Void) {
        queue.async { [self] in completion(body(rewards!)) }
    }

    /// The metrics as text in `format` (GetMetrics, the metrics listener): the status without
    /// the plugins' own counters, which would cost every plugin a call at every scrape.
    func metrics(_ format: MetricsFormat, server: VarlinkServer?, socket: String, completion: @escaping @Sendable (String) -> Void) {
        status(server: server, socket: socket, pluginStats: false) { status in
            // Rendered off the engine queue: a scrape every second must not hold up Shows.
            DispatchQueue.global().async { completion(MetricsText.render(DaemonMetrics.families(status), as: format)) }
        }
    }

    /// Where a plugin runs and, isolated, how its host is doing.
    private func host(of name: String) -> DaemonStatus.Host? {
        guard let config = plugins.configs[name] else { return nil }
        let record = plugins.supervisor.records[name]
        let process = plugins[name] as? PluginProcess
        return DaemonStatus.Host(isolation: config.isolation, pid: process?.pid, state: record?.state ?? .running,
                                 crashes: record?.crashes ?? 0, lastExit: record?.lastExit, confinement: process?.confinement)
    }

    /// Everything GetStatus reports; plugin counters are asked of each plugin's own queue,
    /// unless `pluginStats` is false (the metrics do not serve them).
    func status(server: VarlinkServer?, socket: String, pluginStats: Bool = true, completion: @escaping @Sendable (DaemonStatus) -> Void) {
        queue.async { [self] in
            let loaded = plugins.loaded.values.sorted { $0.info.name < $1.info.name }
            // Down plugins (a host restarting, or disabled) are listed by what they last were.
            let down = plugins.infos.filter { plugins.loaded[$0.key] == nil }.values.sorted { $0.name < $1.name }
            let base = DaemonStatus(
                version: AdorchVersion.current, pid: getpid(), uptime: Date().timeIntervalSince(startedAt), socket: socket,
                configSource: config.source, connections: server?.counts ?? VarlinkCounts(),
                limits: server?.limits ?? config.limits, showRate: config.showRate, loadRate: config.loadRate, listRate: config.listRate,
                reportRate: config.reportRate,
                budgets: config.scheduler.budgets, maxPrivacyRecords: config.maxPrivacyRecordsPerUID, refused: gate.refusedCounts,
                plugins: (loaded.map(\.info) + down).sorted { $0.name < $1.name }.map { .init(info: $0, refusal: nil, statsJSON: nil, host: host(of: $0.name)) }
                    + plugins.refusals.values.sorted { $0.name < $1.name }.map { .init(info: nil, refusal: $0, statsJSON: nil) },
                slots: engine.slotStatuses(at: now()), networks: engine.networkStatuses(at: now()),
                unattributedCallbacks: engine.unattributedCallbacks, subscribers: feed.subscriberCount,
                sessions: Dictionary(uniqueKeysWithValues: config.slots.filter { $0.format == .interactive }.map { slot in
                    (slot.id, (sessions.liveCount(in: slot.id), sessions.counters[slot.id] ?? SessionCounters()))
                }),
                networkLoads: engine.networkLoads, showStats: showStats, metrics: metricsEndpoint?.state,
                notices: notices.map { sender in
                    let (due, held) = (try? sender.outbox.counts()) ?? (0, 0)
                    return DaemonStatus.Notices(due: due, held: held, unwritten: unwrittenNotices.count,
                                                 overBound: noticesOverBound, sent: sender.snapshot())
                }
            )
            guard pluginStats else { return completion(base) }
            let group = DispatchGroup()
            let stats = StatsCollector()
            for plugin in loaded {
                group.enter()
                // The name, not the plugin: the timeout's closure keeps this one for a second, and
                // a plugin a reload removes must let go of its library (PluginLibrary) at once.
                let name = plugin.info.name
                plugin.stats(timeout: .seconds(1)) { json in
                    stats.set(name, json)
                    group.leave()
                }
            }
            group.notify(queue: queue) {
                var status = base
                for i in status.plugins.indices {
                    if let name = status.plugins[i].info?.name { status.plugins[i].statsJSON = stats.get(name) }
                }
                completion(status)
            }
        }
    }
}

enum SessionCall: String { case start, pause, resume, stop }

/// Why a session call was refused, as the control API names it.
enum SessionCallError: Error {
    case slotNotFound(String)
    case session(SessionError)
    /// Refused by the call gate (the slot's [access] rule), already logged.
    case denied(VarlinkError)
}
