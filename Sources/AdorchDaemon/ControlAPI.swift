import AdorchEngine
import AdorchRewards
import AdorchVarlink
import Foundation

/// Turns io.adorch.Ads and io.adorch.Manager calls into daemon operations and replies.
struct ControlAPI: Sendable {
    let daemon: Daemon

    /// The calls that name a slot its users/groups rule applies to.
    private static let slotCalls: Set<String> = ["io.adorch.Ads.Show", "io.adorch.Ads.Load", "io.adorch.Ads.InitInteractive"]

    func handle(_ call: VarlinkCall, _ replier: VarlinkReplier) {
        let slot = Self.slotCalls.contains(call.method) ? call.parameters["slot"]?.stringValue : nil
        if let reason = daemon.refusal(of: call, slot: slot) { return replier.fail(permissionDenied(call, reason)) }
        @Sendable func denied(_ call: VarlinkCall, _ reason: String, _ replier: VarlinkReplier) {
            daemon.logDenied(call, reason)
            replier.fail(permissionDenied(call, reason))
        }
        do throws(VarlinkError) {
            switch call.method {
            case "io.adorch.Ads.ListSlots":
                try call.onlyParameters([])
                daemon.slotStatuses { statuses in
                    replier.reply(["slots": .array(statuses.map { s in
                        var slot = bufferJSON(s)
                        (slot["id"], slot["format"]) = (.string(s.config.id), .string(s.config.format.rawValue))
                        (slot["ready"], slot["loading"]) = (.int(Int64(s.ready)), .int(Int64(s.loading)))
                        return .object(slot)
                    })])
                }
            case "io.adorch.Ads.Show":
                try call.onlyParameters(["slot", "user_id", "reward"])
                if let wait = daemon.showWait(call.peer?.uid) {
                    throw VarlinkError("io.adorch.Ads.RateLimited", [
                        "retry_after_ms": .int(Int64(wait / .milliseconds(1)) + 1),
                        "message": .string("uid \(call.peer.map { "\($0.uid)" } ?? "unknown") called Show faster than the [limits] allow; try again in \(wait)"),
                    ])
                }
                let slot = try call.string("slot")
                let userID = try call.optionalString("user_id")
                var reward: RewardModel?
                switch call.parameters["reward"] {
                case nil, .null?: break
                case .object(let r)?:
                    guard r.keys.allSatisfy(["name", "amount", "extra"].contains),
                          r["name"].map({ $0.stringValue != nil }) ?? true, r["extra"].map({ $0.stringValue != nil }) ?? true,
                          r["amount"].map({ ($0.intValue ?? -1) >= 0 }) ?? true
                    else { throw invalidParameter("reward", "expected {name: string, amount: int >= 0, extra: string}") }
                    reward = RewardModel(name: r["name"]?.stringValue ?? "", amount: r["amount"]?.intValue ?? 0, extra: r["extra"]?.stringValue ?? "")
                default: throw invalidParameter("reward", "expected an object")
                }
                daemon.show(slot: slot, userID: userID, reward: reward, holder: call.peer?.uid) { result, expiresAt in
                    switch result {
                    case .success(let ad): replier.reply(["ad": adJSON(ad, expiresAt: expiresAt ?? Date())])
                    case .failure(let error): replier.fail(varlinkError(error))
                    }
                }
            case "io.adorch.Ads.Load":
                try call.onlyParameters(["slot", "count", "width", "height", "timeout_ms", "targeting"])
                let slot = try call.string("slot")
                var targeting: [String: JSONValue]?
                switch call.parameters["targeting"] {
                case nil, .null?: break
                case .object(let object)?:
                    if let (key, message) = Targeting.problem(object) { throw invalidParameter("targeting.\(key)", message) }
                    targeting = object
                default: throw invalidParameter("targeting", "expected an object")
                }
                let parameters = LoadParameters(
                    count: try call.optionalInt("count").map { Int(clamping: $0) },
                    width: try call.optionalInt("width").map { Int(clamping: $0) },
                    height: try call.optionalInt("height").map { Int(clamping: $0) },
                    timeout: try call.optionalInt("timeout_ms").map { .milliseconds($0) }
                )
                daemon.load(slot: slot, parameters, targeting: targeting, holder: call.peer?.uid, accepted: { replier.fail(varlinkError($0)) }) { result in
                    switch result {
                    case .success(let ads):
                        replier.reply(["ads": .array(ads.map { adJSON($0, expiresAt: daemon.wallTime($0.expiresAt)) })])
                    case .failure(let failure):
                        replier.fail(VarlinkError("io.adorch.Ads.LoadFailed", [
                            "slot": .string(slot), "error": .string(failure.code.rawValue), "message": .string(failure.message),
                            "attempts": .array(failure.attempts.map {
                                ["network": .string($0.plugin), "ad_unit_id": .string($0.adUnitID), "error": .string($0.code.rawValue)]
                            }),
                        ]))
                    }
                }
            case "io.adorch.Ads.Report":
                try call.onlyParameters(["ad_id", "event"])
                let adID = try call.string("ad_id")
                let name = try call.string("event")
                guard let event = ViewerEvent(rawValue: name) else {
                    throw invalidParameter("event", "expected one of \(ViewerEvent.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name)\"")
                }
                daemon.report(event, adID: adID, caller: call.peer?.uid, denied: { denied(call, $0, replier) }) { result in
                    switch result {
                    case .success: replier.reply([:])
                    case .failure(.adNotValid(let reason)):
                        replier.fail(VarlinkError("io.adorch.Ads.AdNotValid", ["ad_id": .string(adID), "message": .string(reason)]))
                    }
                }
            case "io.adorch.Ads.Subscribe":
                try call.onlyParameters(["slots"])
                guard call.more else { throw .expectedMore }
                daemon.subscribe(slots: try call.optionalStringArray("slots").map(Set.init), replier: replier)
            case "io.adorch.Ads.ListEvents":
                try call.onlyParameters(["slots", "limit"])
                let limit = try call.optionalInt("limit") ?? 50
                guard (1...Int64(Daemon.recentEventsKept)).contains(limit) else {
                    throw invalidParameter("limit", "expected 1 to \(Daemon.recentEventsKept), got \(limit)")
                }
                daemon.recentEvents(slots: try call.optionalStringArray("slots").map(Set.init), limit: Int(limit)) {
                    replier.reply(["events": .array($0)])
                }
            case "io.adorch.Ads.ListRewards":
                try call.onlyParameters(["user_id", "since"])
                var since: Date?
                if let text = try call.optionalString("since") {
                    guard let date = try? Date(text, strategy: .iso8601) else { throw invalidParameter("since", "expected an RFC 3339 time, got \"\(text)\"") }
                    since = date
                }
                daemon.rewards(userID: try call.optionalString("user_id"), since: since) { result in
                    switch result {
                    case .success(let rows): replier.reply(["rewards": .array(rows)])
                    case .failure(let error): replier.fail(VarlinkError("io.adorch.Ads.LedgerFailed", ["message": .string("\(error)")]))
                    }
                }
            case "io.adorch.Ads.AckReward":
                try call.onlyParameters(["trans_id"])
                let transID = try call.string("trans_id")
                daemon.acknowledgeReward(transID, caller: call.peer?.uid, denied: { denied(call, $0, replier) }) { result in
                    switch result {
                    case .success(true): replier.reply([:])
                    case .success(false):
                        replier.fail(VarlinkError("io.adorch.Ads.RewardNotFound", ["trans_id": .string(transID), "message": "no reward has this transaction id"]))
                    case .failure(let error): replier.fail(VarlinkError("io.adorch.Ads.LedgerFailed", ["message": .string("\(error)")]))
                    }
                }
            case "io.adorch.Ads.InitInteractive":
                try call.onlyParameters(["slot", "creative_url", "ad_parameters", "slot_type"])
                let slot = try call.string("slot")
                let creativeURL = try call.string("creative_url")
                guard !creativeURL.isEmpty, creativeURL.utf8.count <= 8192 else {
                    throw invalidParameter("creative_url", "expected a URL of 1 to 8192 bytes")
                }
                guard case .object(let adParameters)? = call.parameters["ad_parameters"] else {
                    throw invalidParameter("ad_parameters", "expected an object (the ad's AdParameters, {} if it has none)")
                }
                let typeName = try call.string("slot_type")
                guard let slotType = InteractiveRequest.SlotType(rawValue: typeName) else {
                    throw invalidParameter("slot_type", "expected preroll or midroll, got \"\(typeName)\"")
                }
                let request = InteractiveRequest(creativeURL: creativeURL, adParametersJSON: JSONValue.object(adParameters).jsonString,
                                                 slotType: slotType)
                daemon.initInteractive(slot: slot, request) { result in
                    switch result {
                    case .success(let id): replier.reply(["session_id": .string(id)])
                    case .failure(let error): replier.fail(varlinkError(error, sessionID: nil))
                    }
                }
            case "io.adorch.Ads.Start", "io.adorch.Ads.Pause", "io.adorch.Ads.Resume", "io.adorch.Ads.Stop":
                try call.onlyParameters(["session_id"])
                let sessionID = try call.string("session_id")
                let operation = Daemon.SessionCall(rawValue: call.method.dropFirst("io.adorch.Ads.".count).lowercased())!
                daemon.session(operation, sessionID) { result in
                    switch result {
                    case .success: replier.reply([:])
                    case .failure(let error): replier.fail(varlinkError(error, sessionID: sessionID))
                    }
                }
            case "io.adorch.Manager.VerifyRewardCallback":
                try call.onlyParameters(["query"])
                daemon.verifyRewardCallback(try call.string("query")) { result in
                    switch result {
                    case .success(let verdict):
                        var reply: [String: JSONValue] = ["is_valid": .bool(verdict.valid), "body": .string(RewardCallback.body(isValid: verdict.valid))]
                        if let reason = verdict.reason { reply["reason"] = .string(reason) }
                        replier.reply(reply)
                    case .failure(let error): replier.fail(error)
                    }
                }
            case "io.adorch.Manager.GetStatus":
                try call.onlyParameters([])
                daemon.status { replier.reply(statusJSON($0)) }
            case "io.adorch.Manager.Reload":
                try call.onlyParameters([])
                daemon.reload { result in
                    switch result {
                    case .success(let summary): replier.reply(["summary": .string(summary)])
                    case .failure(let error):
                        replier.fail(VarlinkError("io.adorch.Manager.ReloadFailed", ["message": .string(error.description)]))
                    }
                }
            case "io.adorch.Debug.FreezeEngine":
                try call.onlyParameters(["seconds"])
                guard let seconds = call.parameters["seconds"]?.doubleValue, (0...60).contains(seconds) else {
                    throw .invalidParameter("seconds")
                }
                daemon.freezeEngine(for: .milliseconds(Int64(seconds * 1000))) { replier.reply([:]) }
            default:
                throw .methodNotImplemented(call.method)
            }
        } catch {
            replier.fail(error)
        }
    }

    private func permissionDenied(_ call: VarlinkCall, _ reason: String) -> VarlinkError {
        VarlinkError("\(call.interface).PermissionDenied", [
            "method": .string(call.method), "uid": .int(Int64(call.peer?.uid ?? UInt32.max)),
            "message": .string("uid \(call.peer.map { "\($0.uid)" } ?? "unknown") is \(reason)"),
        ])
    }

    private func invalidParameter(_ name: String, _ message: String) -> VarlinkError {
        VarlinkError("io.adorch.Ads.InvalidParameter", ["parameter": .string(name), "message": .string(message)])
    }

    private func varlinkError(_ error: ShowError) -> VarlinkError {
        switch error {
        case .slotNotFound(let slot):
            VarlinkError("io.adorch.Ads.SlotNotFound", ["slot": .string(slot), "message": .string("no slot \"\(slot)\" is configured")])
        case .noAdReady(let slot):
            VarlinkError("io.adorch.Ads.NoAdReady", ["slot": .string(slot), "message": .string("no valid ad is ready in \(slot); it is being refilled")])
        case .invalidParameter(let name, let reason):
            invalidParameter(name, reason)
        }
    }

    private func varlinkError(_ error: SessionCallError, sessionID: String?) -> VarlinkError {
        switch error {
        case .slotNotFound(let slot): varlinkError(ShowError.slotNotFound(slot))
        case .session(.sessionNotFound):
            VarlinkError("io.adorch.Ads.SessionNotFound", ["session_id": .string(sessionID ?? ""),
                                                           "message": "no live session has this id: it never existed or has ended"])
        case .session(.invalidParameter(let name, let reason)): invalidParameter(name, reason)
        case .session(.unavailable(let slot, let reason)): VarlinkError("io.adorch.Ads.NoAdReady", ["slot": .string(slot), "message": .string(reason)])
        }
    }

    private func adJSON(_ ad: ShownAd, expiresAt: Date) -> JSONValue {
        let payload = JSONValue.parse(Data(ad.payloadJSON.utf8)) ?? .object([:])
        return [
            "id": .string(daemon.externalID(ad.id)), "slot": .string(ad.slot), "network": .string(ad.network),
            "format": .string(ad.format.rawValue), "payload": payload,
            "expires_at": .string(Daemon.timestamp(expiresAt)), "price": .double(ad.price),
        ]
    }

    private func statusJSON(_ s: DaemonStatus) -> [String: JSONValue] {
        [
            "version": .string(s.version), "pid": .int(Int64(s.pid)), "uptime_s": .double(s.uptime),
            "socket": .string(s.socket), "config": .string(s.configSource),
            "connections": ["open": .int(Int64(s.connections.open)), "accepted": .int(Int64(s.connections.accepted)),
                            "refused": .int(Int64(s.connections.refused))],
            "limits": [
                "max_connections": .int(Int64(s.limits.maxConnections)), "max_connections_per_uid": .int(Int64(s.limits.maxConnectionsPerUID)),
                "max_message_bytes": .int(Int64(s.limits.maxMessageSize)),
                "partial_message_timeout_ms": .int(Int64(s.limits.partialMessageTimeout / .milliseconds(1))),
                "max_unsent_bytes": .int(Int64(s.limits.maxUnsentBytes)),
                "shows_per_second_per_uid": .double(s.showRate.perSecond), "show_burst_per_uid": .double(s.showRate.burst),
                "shows_rate_limited": .int(Int64(s.showsRateLimited)),
            ],
            "subscribers": .int(Int64(s.subscribers)),
            "plugins": .array(s.plugins.map(pluginJSON)),
            "slots": .array(s.slots.map { slotJSON($0, sessions: s.sessions[$0.config.id]) }),
            "networks": .array(s.networks.map { n in
                var network: [String: JSONValue] = ["name": .string(n.name), "loads_in_flight": .int(Int64(n.loadsInFlight)),
                                                    "paused_ms": .int(n.paused.nanosecondsClamped / 1_000_000)]
                if let limit = n.learnedLimit { network["learned_limit_per_minute"] = .int(Int64(limit)) }
                return .object(network)
            }),
            "unattributed_callbacks": .int(Int64(s.unattributedCallbacks)),
        ]
    }

    private func pluginJSON(_ p: DaemonStatus.Plugin) -> JSONValue {
        if let info = p.info {
            var object: [String: JSONValue] = [
                "name": .string(info.name), "state": "loaded", "path": .string(info.path),
                "version": .string(info.version), "abi": .string("\(info.abiMajor).\(info.abiMinor)"),
                "formats": .array(info.formats.map { .string($0.rawValue) }), "description": .string(info.description),
            ]
            if let stats = p.statsJSON.flatMap({ JSONValue.parse(Data($0.utf8)) }) { object["stats"] = stats }
            return .object(object)
        }
        let refusal = p.refusal!
        return ["name": .string(refusal.name), "state": "refused", "path": .string(refusal.path), "formats": [],
                "error": .string(refusal.reason)]
    }

    /// A slot's buffer as ListSlots and GetStatus show it: the target now, its bounds and,
    /// for a preloaded slot, the demand behind it.
    private func bufferJSON(_ s: SlotStatus) -> [String: JSONValue] {
        var object: [String: JSONValue] = [
            "buffer": .int(Int64(s.target.count)), "buffer_min": .int(Int64(s.config.bufferMin)), "buffer_max": .int(Int64(s.config.bufferMax)),
        ]
        guard s.config.format.isPreloaded else { return object }
        let t = s.target
        object["demand"] = [
            "per_minute": .double(t.demandPerMinute), "long_per_minute": .double(t.longPerMinute),
            "short_per_minute": .double(t.shortPerMinute), "refill_s": .double(t.refillSeconds),
            "ad_lifetime_s": .double(t.lifetimeSeconds), "reason": .string(t.reason),
        ]
        return object
    }

    private func slotJSON(_ s: SlotStatus, sessions: (live: Int, counters: SessionCounters)?) -> JSONValue {
        let c = s.counters
        var slot = bufferJSON(s)
        slot.merge([
            "id": .string(s.config.id), "format": .string(s.config.format.rawValue),
            "ready": .int(Int64(s.ready)), "loading": .int(Int64(s.loading)), "shown_open": .int(Int64(s.shownOpen)),
            "ready_ads": .array(s.readyAds.map { .string(daemon.externalID($0)) }),
            "ttl_s": .int(s.config.ttl.nanosecondsClamped / 1_000_000_000), "parallel": .int(Int64(s.config.parallel)),
            "waterfall": .array(zip(s.config.waterfall, s.entries).map { entry, state in
                var object: [String: JSONValue] = [
                    "plugin": .string(entry.plugin), "ad_unit_id": .string(entry.adUnitID),
                    "timeout_ms": .int(entry.timeout.nanosecondsClamped / 1_000_000),
                    "loads": .int(Int64(state.loads)), "fills": .int(Int64(state.fills)),
                    "failures_in_row": .int(Int64(state.failuresInRow)),
                    "backoff_ms": .int(state.backoff.nanosecondsClamped / 1_000_000),
                    "estimate": [
                        "attempt_s": .double(state.estimate.attemptSeconds), "fill_rate": .double(state.estimate.fillRate),
                        "ad_lifetime_s": .double(state.estimate.lifetimeSeconds), "samples": .int(Int64(state.estimate.samples)),
                    ],
                ]
                if let error = state.lastError { object["last_error"] = .string(error.rawValue) }
                return .object(object)
            }),
            "counters": [
                "loads": .int(Int64(c.loads)), "fills": .int(Int64(c.fills)), "no_fills": .int(Int64(c.noFills)),
                "errors": .int(Int64(c.errors)), "timeouts": .int(Int64(c.timeouts)), "shows": .int(Int64(c.shows)),
                "expired": .int(Int64(c.expired)), "replaced": .int(Int64(c.replaced)), "ran_dry": .int(Int64(c.ranDry)),
                "ignored_callbacks": .int(Int64(c.ignoredCallbacks)),
                "contract_violations": .int(Int64(c.contractViolations)),
                "impressions": .int(Int64(c.impressions)), "clicks": .int(Int64(c.clicks)),
                "duplicate_reports": .int(Int64(c.duplicateReports)), "display_failures": .int(Int64(c.displayFailures)),
                "rewards": .int(Int64(c.rewards)), "duplicate_rewards": .int(Int64(c.duplicateRewards)),
            ],
        ]) { $1 }
        guard s.config.format == .interactive else { return .object(slot) }
        let i = sessions?.counters ?? SessionCounters()
        slot["fetch_timeout_ms"] = .int(s.config.fetchTimeout.nanosecondsClamped / 1_000_000)
        slot["start_timeout_ms"] = .int(s.config.startTimeout.nanosecondsClamped / 1_000_000)
        slot["sessions"] = [
            "live": .int(Int64(sessions?.live ?? 0)), "initiated": .int(Int64(i.initiated)), "completed": .int(Int64(i.completed)),
            "no_ads_available": .int(Int64(i.noAds)), "errors": .int(Int64(i.errors)), "stopped": .int(Int64(i.stopped)),
            "fetch_timeouts": .int(Int64(i.fetchTimeouts)), "start_timeouts": .int(Int64(i.startTimeouts)),
            "ad_free_pods": .int(Int64(i.adFreePods)), "ignored_callbacks": .int(Int64(i.ignoredCallbacks)),
            "contract_violations": .int(Int64(i.contractViolations)),
        ]
        return .object(slot)
    }
}
