import AdorchEngine
import AdorchPluginHost
import AdorchVarlink
import Foundation

/// [Varlink queue] GetStatus and ListSlots as JSON: what operators and adorchctl read.
struct StatusJSON {
    let ids: ExternalIDs

    /// Why a slot cannot fill (`SlotStatus.missingPlugins`), as status, Show and the log say it.
    static func unservable(_ missingPlugins: [String]) -> String {
        "no plugin its waterfall names is loaded (\(missingPlugins.joined(separator: ", ")))"
    }

    /// One slot as ListSlots returns it.
    func listedSlotJSON(_ s: SlotStatus) -> JSONValue {
        var slot = bufferJSON(s)
        (slot["id"], slot["format"]) = (.string(s.config.id), .string(s.config.format.rawValue))
        (slot["ready"], slot["loading"]) = (.int(Int64(s.ready)), .int(Int64(s.loading)))
        slot["unservable"] = s.missingPlugins.map { .string(Self.unservable($0)) }
        slot["capped"] = s.capHold.map(Self.capHoldJSON)
        return .object(slot)
    }

    /// A rule holding a Show: Interfaces' CapHold. The wall-clock end is taken from now, as the
    /// engine's hold was, so the two agree to the millisecond.
    static func capHoldJSON(_ hold: CapHold) -> JSONValue {
        let milliseconds = hold.retryAfter.nanosecondsClamped / 1_000_000
        return [
            "rule": .string(hold.ruleName), "kind": .string(hold.rule.isPacing ? "pacing" : "cap"),
            "network": hold.network.map { .string($0.plugin) } ?? .null,
            "retry_after_ms": .int(milliseconds), "until": .string(timestamp(Date(timeIntervalSinceNow: Double(milliseconds) / 1000))),
        ]
    }

    /// One rule and what it counts: ManagerInterface.swift's CapRule.
    static func capRuleJSON(_ use: CapUse) -> JSONValue {
        var rule: [String: JSONValue] = [
            "rule": .string(use.network?.name(of: use.rule) ?? use.rule.name), "kind": .string(use.rule.isPacing ? "pacing" : "cap"),
            "scope": .string(use.rule.scope.rawValue), "impressions": .int(Int64(use.rule.impressions)),
            "window_ms": .int(use.rule.window.nanosecondsClamped / 1_000_000), "counted": .int(Int64(use.counted)),
        ]
        if let network = use.network { (rule["network"], rule["ad_unit_id"]) = (.string(network.plugin), .string(network.adUnitID)) }
        if let hold = use.hold, case .object(let held) = capHoldJSON(hold) {
            (rule["retry_after_ms"], rule["until"]) = (held["retry_after_ms"], held["until"])
        }
        return .object(rule)
    }

    func statusJSON(_ s: DaemonStatus) -> [String: JSONValue] {
        var status: [String: JSONValue] = [
            "version": .string(s.version), "pid": .int(Int64(s.pid)), "uptime_s": .double(s.uptime),
            "socket": .string(s.socket), "config": .string(s.configSource),
            "connections": ["open": .int(Int64(s.connections.open)), "accepted": .int(Int64(s.connections.accepted)),
                            "refused": .int(Int64(s.connections.refused)), "closed_idle": .int(Int64(s.connections.closedIdle)),
                            "dropped_slow_readers": .int(Int64(s.connections.droppedSlowReaders)),
                            "incomplete_messages": .int(Int64(s.connections.incompleteMessages)),
                            "dropped_pending_bytes": .int(Int64(s.connections.droppedPendingBytes))],
            "limits": [
                "max_connections": .int(Int64(s.limits.maxConnections)), "max_connections_per_uid": .int(Int64(s.limits.maxConnectionsPerUID)),
                "root_reserved_connections": .int(Int64(s.limits.rootReservedConnections)),
                "idle_connection_timeout_s": .int(s.limits.idleConnectionTimeout.components.seconds),
                "max_message_bytes": .int(Int64(s.limits.maxMessageSize)),
                "partial_message_timeout_ms": .int(Int64(s.limits.partialMessageTimeout / .milliseconds(1))),
                "max_queued_calls": .int(Int64(s.limits.maxQueuedCalls)),
                "max_unsent_bytes": .int(Int64(s.limits.maxUnsentBytes)),
                "max_unsent_bytes_per_uid": .int(Int64(s.limits.maxUnsentBytesPerUID)),
                "max_pending_bytes_per_uid": .int(Int64(s.limits.maxPendingBytesPerUID)),
                "shows_per_second_per_uid": .double(s.showRate.perSecond), "show_burst_per_uid": .double(s.showRate.burst),
                "loads_per_second_per_uid": .double(s.loadRate.perSecond), "load_burst_per_uid": .double(s.loadRate.burst),
                "lists_per_second_per_uid": .double(s.listRate.perSecond), "list_burst_per_uid": .double(s.listRate.burst),
                "reports_per_second_per_uid": .double(s.reportRate.perSecond), "report_burst_per_uid": .double(s.reportRate.burst),
                Budget.openAds.key: .int(Int64(s.budgets.maxOpenAds)), Budget.sessions.key: .int(Int64(s.budgets.maxSessions)),
                "unstarted_session_timeout_s": .int(s.budgets.unstartedSessionTimeout.components.seconds),
                Budget.fairShare.key: .int(s.budgets.fairShareWindow.components.seconds),
                Budget.unacknowledgedRewards.key: .int(Int64(s.budgets.maxUnacknowledgedRewards)),
                Budget.privacyRecords.key: .int(Int64(s.maxPrivacyRecords)),
                "shows_rate_limited": .int(Int64(s.refused[.showRate, default: 0])),
                "loads_rate_limited": .int(Int64(s.refused[.loadRate, default: 0])),
                "lists_rate_limited": .int(Int64(s.refused[.listRate, default: 0])),
                "reports_rate_limited": .int(Int64(s.refused[.reportRate, default: 0])),
                "open_ads_refused": .int(Int64(s.refused[.openAds, default: 0])),
                "sessions_refused": .int(Int64(s.refused[.sessions, default: 0])),
                "fair_share_refused": .int(Int64(s.refused[.fairShare, default: 0])),
                "unacknowledged_rewards_refused": .int(Int64(s.refused[.unacknowledgedRewards, default: 0])),
                "privacy_records_refused": .int(Int64(s.refused[.privacyRecords, default: 0])),
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
        if let n = s.notices {
            status["notices"] = [
                "due": .int(Int64(n.due)), "held": .int(Int64(n.held)), "unwritten": .int(Int64(n.unwritten)), "over_bound": .int(Int64(n.overBound)),
                "sent": .int(Int64(n.sent.sent)), "refused": .int(Int64(n.sent.refused)), "retried": .int(Int64(n.sent.retried)),
                "given_up": .int(Int64(n.sent.givenUp)),
            ]
        }
        if let m = s.metrics {
            var metrics: [String: JSONValue] = ["listen": .string(m.address.description), "listening": .bool(m.error == nil)]
            metrics["error"] = m.error.map { .string($0) }
            status["metrics"] = .object(metrics)
        }
        return status
    }

    func pluginJSON(_ p: DaemonStatus.Plugin) -> JSONValue {
        if let info = p.info {
            var object: [String: JSONValue] = [
                "name": .string(info.name), "state": "loaded", "path": .string(info.path),
                "version": .string(info.version), "abi": .string("\(info.abiMajor).\(info.abiMinor)"),
                "receives_privacy_signals": .bool(info.receivesPrivacySignals),
                "formats": .array(info.formats.map { .string($0.rawValue) }), "description": .string(info.description),
            ]
            if let stats = p.statsJSON.flatMap({ JSONValue.parse(Data($0.utf8)) }) { object["stats"] = stats }
            if let host = p.host {
                object["isolation"] = .string(host.isolation.rawValue)
                if let pid = host.pid { object["pid"] = .int(Int64(pid)) }
                object["crashes"] = .int(Int64(host.crashes))
                if let exit = host.lastExit { object["last_crash"] = .string(exit) }
                if let confinement = host.confinement { object["confinement"] = .string(confinement) }
                switch host.state {
                case .running: break
                case .restarting, .starting: object["state"] = "restarting"
                case .disabled(let reason):
                    object["state"] = "disabled"
                    object["error"] = .string(reason)
                }
            }
            return .object(object)
        }
        let refusal = p.refusal!
        return ["name": .string(refusal.name), "state": "refused", "path": .string(refusal.path), "formats": [],
                "error": .string(refusal.reason)]
    }

    /// A slot's buffer as ListSlots and GetStatus show it: the target now, its bounds and,
    /// for a preloaded slot, the demand behind it.
    func bufferJSON(_ s: SlotStatus) -> [String: JSONValue] {
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

    func slotJSON(_ s: SlotStatus, sessions: (live: Int, counters: SessionCounters)?) -> JSONValue {
        let c = s.counters
        var slot = bufferJSON(s)
        slot["unservable"] = s.missingPlugins.map { .string(Self.unservable($0)) }
        slot.merge([
            "id": .string(s.config.id), "format": .string(s.config.format.rawValue),
            "ready": .int(Int64(s.ready)), "loading": .int(Int64(s.loading)), "shown_open": .int(Int64(s.shownOpen)),
            "ready_ads": .array(s.readyAds.map { .string(ids.external($0)) }),
            "ready_by_class": .object(Dictionary(uniqueKeysWithValues: PrivacyClass.allCases.map { ($0.rawValue, .int(Int64(s.readyByClass[$0, default: 0]))) })),
            "ttl_s": .int(s.config.ttl.nanosecondsClamped / 1_000_000_000), "parallel": .int(Int64(s.config.parallel)),
            "floor": .double(s.config.floor),
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
                // docs/bidding.md, "The auction": what the walk compares with the best bid.
                if entry.bidder { object["bidder"] = true }
                if let ecpm = entry.ecpm { object["ecpm"] = .double(ecpm) }
                if let learned = state.learnedECPM { object["learned_ecpm"] = .double(learned) }
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
                "outbid": .int(Int64(c.outbid)), "below_floor": .int(Int64(c.belowFloor)),
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
            "unstarted_timeouts": .int(Int64(i.unstartedTimeouts)),
            "ad_free_pods": .int(Int64(i.adFreePods)), "ignored_callbacks": .int(Int64(i.ignoredCallbacks)),
            "contract_violations": .int(Int64(i.contractViolations)),
        ]
        return .object(slot)
    }
}
