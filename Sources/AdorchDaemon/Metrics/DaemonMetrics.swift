import AdorchEngine

/// [engine queue] Shows, per slot: how each call came out and how long it took, from the
/// call reaching the engine queue to its answer. Kept on the engine queue only (no lock):
/// a Show's observe is a scan of the bucket bounds and a few adds.
struct ShowStats: Sendable {
    /// How a Show call came out: `hit` or why none was handed out. Refusals (bad parameters,
    /// budgets, unknown slots) are not Shows: the limits count those, and an unknown slot's
    /// name would be an unbounded label.
    enum Result: String, Sendable, CaseIterable {
        case hit, noAd = "no_ad", unservable, displayFailed = "display_failed", interrupted, capped
    }

    var results: [Result: Int] = [:]
    var latency = LatencyHistogram()
    /// Capped Shows by the name of the rule that held them (docs/caps.md).
    var cappedBy: [String: Int] = [:]

    static func result(of answer: Swift.Result<ShownAd, ShowError>) -> Result? {
        switch answer {
        case .success: .hit
        case .failure(.noAdReady), .failure(.viewerUnservable): .noAd
        case .failure(.unservable): .unservable
        case .failure(.displayFailed): .displayFailed
        case .failure(.interrupted): .interrupted
        case .failure(.capped): .capped
        case .failure: nil
        }
    }

    mutating func note(_ answer: Swift.Result<ShownAd, ShowError>, took: Duration) {
        guard let result = Self.result(of: answer) else { return }
        results[result, default: 0] += 1
        latency.observe(took)
        if case .failure(.capped(_, let rule, _)) = answer { cappedBy[rule, default: 0] += 1 }
    }

    /// After a reload: only the rules the slot still has keep a series.
    mutating func keepCappedRules(of slot: SlotConfig) {
        let names = Set(slot.capRuleNames)
        cappedBy = cappedBy.filter { names.contains($0.key) }
    }
}

/// Every series `GetMetrics` and the metrics listener serve, from one status snapshot.
/// docs/metrics.md lists them; a name or label here changes there too.
enum DaemonMetrics {
    static func families(_ s: DaemonStatus) -> [MetricFamily] {
        var families: [MetricFamily] = []
        func family(_ name: String, _ kind: MetricFamily.Kind, unit: String? = nil, _ help: String,
                    _ fill: (inout MetricFamily) -> Void) {
            var f = MetricFamily("adorch_" + name, kind, unit: unit, help: help)
            fill(&f)
            families.append(f)
        }
        /// One counter or gauge per slot, read from its counters.
        func perSlot(_ name: String, _ help: String, _ kind: MetricFamily.Kind = .counter, _ value: (SlotStatus) -> Int) {
            family(name, kind, help) { f in for slot in s.slots { f.add(value(slot), [("slot", slot.config.id)]) } }
        }
        let interactive = s.slots.filter { $0.config.format == .interactive }.map(\.config.id)
        func perSession(_ name: String, _ help: String, _ kind: MetricFamily.Kind = .counter,
                        _ value: ((live: Int, counters: SessionCounters)) -> Int) {
            family(name, kind, help) { f in
                for id in interactive { f.add(value(s.sessions[id] ?? (0, SessionCounters())), [("slot", id)]) }
            }
        }

        family("build", .info, "The daemon's version.") { $0.add(1, [("version", s.version)]) }
        family("uptime_seconds", .gauge, unit: "seconds", "Time since the daemon started.") { $0.add(s.uptime) }

        // Slots: the buffer now.
        perSlot("slot_ready_ads", "Valid ads ready to show (loaded, unshown, unexpired).", .gauge) { $0.ready }
        perSlot("slot_target_ads", "How many ready ads the scheduler keeps the slot at now.", .gauge) { $0.target.count }
        perSlot("slot_loading_ads", "Loads in progress for the slot.", .gauge) { $0.loading }
        perSlot("slot_shown_open_ads", "Shown ads still open for viewer reports.", .gauge) { $0.shownOpen }

        // Shows.
        perSlot("shows", "Ads handed out: in a preloaded slot each ad a Show handed to its plugin to present, in a Load slot each ad a Load returned.") {
            $0.counters.shows
        }
        // Every result of every slot Show serves, from the start, so a rate over any of them
        // has a series to start from.
        let preloaded = s.slots.filter { $0.config.format.isPreloaded }.map(\.config.id)
        family("show_requests", .counter, "Show calls answered, by result: " + ShowStats.Result.allCases.map(\.rawValue).joined(separator: ", ") + ".") { f in
            for slot in preloaded {
                let stats = s.showStats[slot] ?? ShowStats()
                for result in ShowStats.Result.allCases { f.add(stats.results[result, default: 0], [("slot", slot), ("result", result.rawValue)]) }
            }
        }
        family("show_duration_seconds", .histogram, unit: "seconds",
               "Show calls, from reaching the engine to their answer (the plugin's ad_show included).") { f in
            for slot in preloaded { f.histograms.append(([("slot", slot)], (s.showStats[slot] ?? ShowStats()).latency)) }
        }
        family("shows_capped", .counter, "Show calls answered Capped, by the frequency rule that held them (docs/caps.md).") { f in
            for slot in s.slots where slot.config.hasCaps {
                let counts = s.showStats[slot.config.id]?.cappedBy ?? [:]
                for rule in slot.config.capRuleNames { f.add(counts[rule, default: 0], [("slot", slot.config.id), ("rule", rule)]) }
            }
        }
        perSlot("display_failures", "Shows whose plugin could not present the ad (the next one was tried).") { $0.counters.displayFailures }
        perSlot("slot_ran_dry", "Times the slot ran dry: its last valid ad went (shown or expired), or a Show found none while ads were ready before; once until an ad is ready again.") { $0.counters.ranDry }
        perSlot("ads_expired", "Ready ads that expired unshown.") { $0.counters.expired }
        perSlot("ads_replaced", "Ready ads retired for a fresher one.") { $0.counters.replaced }
        perSlot("ads_outbid", "Ready ads an auction gave to higher prices (docs/bidding.md).") { $0.counters.outbid }
        perSlot("loads_below_floor", "Loads refused for a price under the slot's floor.") { $0.counters.belowFloor }

        // Loads.
        perSlot("slot_loads", "Loads started for the slot.") { $0.counters.loads }
        family("loads", .counter, "Loads ended, by network and outcome: filled, or the host error code (no_fill, timeout, network, ...).") { f in
            for (network, loads) in s.networkLoads.sorted(by: { $0.key < $1.key }) {
                for (outcome, n) in loads.ended.sorted(by: { $0.key < $1.key }) { f.add(n, [("network", network), ("outcome", outcome)]) }
            }
        }
        family("load_duration_seconds", .histogram, unit: "seconds",
               "Loads, from their start to the network's answer or their deadline, per network.") { f in
            for (network, loads) in s.networkLoads.sorted(by: { $0.key < $1.key }) { f.histograms.append(([("network", network)], loads.latency)) }
        }
        family("network_loads_in_flight", .gauge, "Loads a network is working on now.") { f in
            for n in s.networks { f.add(n.loadsInFlight, [("network", n.name)]) }
        }
        family("network_paused_seconds", .gauge, unit: "seconds", "How long a network is still paused after a rate_limited answer.") { f in
            for n in s.networks { f.add(Double(n.paused.nanosecondsClamped) / 1e9, [("network", n.name)]) }
        }

        // Viewer reports and rewards.
        perSlot("impressions", "Impressions reported.") { $0.counters.impressions }
        perSlot("clicks", "Clicks reported.") { $0.counters.clicks }
        perSlot("duplicate_reports", "Viewer reports repeating one already made for the ad: a second click (accepted, not billed) or a second once-only event (refused).") { $0.counters.duplicateReports }
        perSlot("rewards", "Rewards granted.") { $0.counters.rewards }
        perSlot("duplicate_rewards", "Second rewards for one ad, refused: a network's reward event for an ad already rewarded.") { $0.counters.duplicateRewards }

        // Interactive sessions.
        perSession("sessions_live", "Interactive sessions open now.", .gauge) { $0.live }
        perSession("sessions_initiated", "Interactive sessions initiated.") { $0.counters.initiated }
        perSession("sessions_completed", "Interactive sessions that completed.") { $0.counters.completed }
        perSession("sessions_no_ads", "Interactive sessions that found no ads.") { $0.counters.noAds }
        perSession("sessions_errors", "Interactive sessions that ended in an error.") { $0.counters.errors }
        perSession("sessions_stopped", "Interactive sessions stopped by their app.") { $0.counters.stopped }
        family("session_timeouts", .counter, "Interactive sessions timed out, by phase: fetch, start, unstarted.") { f in
            for id in interactive {
                let c = s.sessions[id]?.counters ?? SessionCounters()
                for (phase, n) in [("fetch", c.fetchTimeouts), ("start", c.startTimeouts), ("unstarted", c.unstartedTimeouts)] {
                    f.add(n, [("slot", id), ("phase", phase)])
                }
            }
        }

        // The plugin contract (docs/rules.md): what plugins did that the host refused.
        perSlot("contract_violations", "Plugin reports that broke the contract (ads and sessions).") {
            $0.counters.contractViolations + (s.sessions[$0.config.id]?.counters.contractViolations ?? 0)
        }
        perSlot("ignored_callbacks", "Plugin reports ignored: a second completion, one after the deadline, one for a destroyed ad.") {
            $0.counters.ignoredCallbacks + (s.sessions[$0.config.id]?.counters.ignoredCallbacks ?? 0)
        }
        family("unattributed_callbacks", .counter, "Plugin reports for ads the plugin does not own.") { $0.add(s.unattributedCallbacks) }
        if let n = s.notices {
            family("notices_due", .gauge, "Bidders' notices waiting in the outbox to be sent (again).") { $0.add(n.due) }
            family("notices", .counter, "Bidders' notices since start, by outcome: sent, refused (for good), retried (an attempt failed), given_up (after 24 hours).") { f in
                for (outcome, count) in [("sent", n.sent.sent), ("refused", n.sent.refused), ("retried", n.sent.retried), ("given_up", n.sent.givenUp)] {
                    f.add(count, [("outcome", outcome)])
                }
            }
        }
        family("plugins", .gauge, "Plugins by state: loaded, restarting (an isolated plugin's host died), disabled (past its crash budget) or refused.") { f in
            let states = s.plugins.map { p -> String in
                guard p.info != nil else { return "refused" }
                switch p.host?.state {
                case .restarting?, .starting?: return "restarting"
                case .disabled?: return "disabled"
                default: return "loaded"
                }
            }
            for state in ["loaded", "restarting", "disabled", "refused"] { f.add(states.filter { $0 == state }.count, [("state", state)]) }
        }
        family("plugin_crashes", .counter, "Times an isolated plugin's host process died or was killed (docs/isolation.md).") { f in
            for p in s.plugins { if let info = p.info, let host = p.host, host.isolation == .process { f.add(host.crashes, [("plugin", info.name)]) } }
        }

        // Connections and limits.
        let c = s.connections
        family("connections_open", .gauge, "Varlink connections open now.") { $0.add(c.open) }
        family("subscribers", .gauge, "Event subscriptions open now.") { $0.add(s.subscribers) }
        family("connections_accepted", .counter, "Varlink connections accepted, refused ones included.") { $0.add(c.accepted) }
        family("connections_refused", .counter, "Varlink connections refused at once (max_connections, max_connections_per_uid, root_reserved_connections).") { $0.add(c.refused) }
        family("connections_closed", .counter, "Varlink connections the daemon closed, by reason: idle, slow_reader, incomplete_message, pending_bytes.") { f in
            for (reason, n) in [("idle", c.closedIdle), ("slow_reader", c.droppedSlowReaders), ("incomplete_message", c.incompleteMessages),
                                ("pending_bytes", c.droppedPendingBytes)] {
                f.add(n, [("reason", reason)])
            }
        }
        family("limit_refusals", .counter, "Calls refused by a per-uid budget, by its [limits] key.") { f in
            for budget in Budget.allCases { f.add(s.refused[budget, default: 0], [("limit", budget.key)]) }
        }
        return families
    }
}
