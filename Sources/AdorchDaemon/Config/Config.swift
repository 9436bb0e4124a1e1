import AdorchEngine
import AdorchPluginHost
import AdorchVarlink
import Foundation
import TOMLKit

/// The daemon's configuration, from `adorchd.toml` or the embedded default.
public struct DaemonConfig: Sendable, Equatable {
    /// Where it came from, for messages: a path or "(embedded default)".
    public var source: String
    public var socketPath: String?
    public var stateDir: String?
    public var pluginDir: String?
    public var logLevel: String?
    public var scheduler: SchedulerSettings
    /// The file holding the app security key of the server-to-server reward callback.
    public var rewardKeyFile: String?
    /// Plugins by name; empty means "every plugin found in the plugin dir".
    public var plugins: [PluginConfig]
    public var slots: [SlotConfig]
    /// Who may call what ([access], and each slot's users/groups).
    public var access: AccessPolicy = AccessPolicy()
    /// What one client may take of the daemon ([limits]; max_message_bytes is in [daemon]).
    public var limits = VarlinkLimits()
    public var showRate = CallRate.shows
    public var loadRate = CallRate.loads
    public var listRate = CallRate.lists
    public var reportRate = CallRate.reports
    /// [limits] max_privacy_records_per_uid: the privacy records one uid may keep with
    /// SetPrivacy (docs/privacy.md, "Setting a viewer's state"). Each is read back and decoded
    /// at start and kept decoded: 10,000 of the largest took 256 MB and 8.8 s to start (release
    /// build), per uid; 1,000 users of one app on one host is already many.
    public var maxPrivacyRecordsPerUID = 1_000
    /// The metrics listener's address ([metrics] listen); nil (the default): no listener.
    public var metrics: MetricsAddress?
}

/// One `[plugins.NAME]` section.
public struct PluginConfig: Sendable, Equatable {
    public var name: String
    /// The .so file; relative paths are looked up in the plugin dir. Default:
    /// `libadorch-plugin-NAME.so`.
    public var path: String?
    /// The section's `config` table as JSON, handed to the plugin's init.
    public var configJSON: String
    public var isolation = PluginIsolation.default
    /// RLIMIT_AS of an isolated plugin's host.
    public var memoryLimitBytes: UInt64 = Confinement.defaultAddressSpaceMB << 20
    /// An isolated plugin whose queue leaves the heartbeat unanswered this long is killed.
    public var hangTimeout: Duration = HostSettings.defaultHangTimeout
    public var crashPolicy = PluginSupervisor.Policy()
}

/// A config the daemon refuses to start on: which file, where, and what was expected.
public struct ConfigError: Error, CustomStringConvertible, Equatable, Sendable {
    public var file: String
    /// "line 3, column 7" for syntax errors, "key slots[0].buffer" for the rest.
    public var location: String
    public var message: String

    public var description: String { "\(file): \(location): \(message)" }
}

extension DaemonConfig {
    public static let embeddedDefaultSource = "(embedded default)"

    /// The built-in configuration: the sim plugin and three demo slots.
    public static func embeddedDefault() -> DaemonConfig {
        // The embedded text is part of the binary: a failure here is a build defect.
        try! parse(toml: String(decoding: PackageResources.adorchd_toml, as: UTF8.self), source: embeddedDefaultSource)
    }

    public static func load(path: String) throws(ConfigError) -> DaemonConfig {
        let text = try ConfigFile.text(path)
        // Drop-ins, in name order, override or extend the main file (systemd's convention).
        let dropInDir = path + ".d"
        var dropIns: [(source: String, text: String)] = []
        for file in try ConfigFile.dropIns(in: dropInDir) { dropIns.append((file, try ConfigFile.text(file))) }
        return try parse(toml: text, source: path, dropIns: dropIns, mergedSource: "\(path) (with drop-ins from \(dropInDir))")
    }

    public static func parse(toml: String, source: String) throws(ConfigError) -> DaemonConfig {
        try decode(try table(toml, source: source), source: source)
    }

    /// `text` with `dropIns` merged over it in order. The main text must be valid on its
    /// own; the merged whole is checked again and named `mergedSource` in errors.
    public static func parse(toml text: String, source: String, dropIns: [(source: String, text: String)],
                             mergedSource: String) throws(ConfigError) -> DaemonConfig {
        let config = try parse(toml: text, source: source)
        guard !dropIns.isEmpty else { return config }
        var merged = try table(text, source: source)
        for dropIn in dropIns { merged = merge(merged, try table(dropIn.text, source: dropIn.source)) }
        return try decode(merged, source: mergedSource)
    }

    private static func table(_ text: String, source: String) throws(ConfigError) -> TOMLTable {
        if let finding = TOMLAbortGuard.check(text) {
            throw ConfigError(file: source, location: "line \(finding.line), column \(finding.column)", message: "not valid TOML: \(finding.message)")
        }
        do {
            return try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigError(
                file: source, location: "line \(error.source.begin.line), column \(error.source.begin.column)",
                message: "not valid TOML: \(error.description)"
            )
        } catch {
            throw ConfigError(file: source, location: "file", message: "not valid TOML: \(error)")
        }
    }

    /// Tables merge key by key; arrays of slots merge by slot id; any other value is replaced.
    private static func merge(_ base: TOMLTable, _ overlay: TOMLTable) -> TOMLTable {
        let result = TOMLTable()
        for key in base.keys { result[key] = base[key] }
        for key in overlay.keys {
            if let a = base[key]?.table, let b = overlay[key]?.table {
                result[key] = merge(a, b)
            } else if key == "slots", let a = base[key]?.array, let b = overlay[key]?.array {
                var slots = a.compactMap(\.table)
                for slot in b.compactMap(\.table) {
                    if let i = slots.firstIndex(where: { $0["id"]?.string != nil && $0["id"]?.string == slot["id"]?.string }) {
                        slots[i] = merge(slots[i], slot)
                    } else {
                        slots.append(slot)
                    }
                }
                result[key] = TOMLArray(slots)
            } else {
                result[key] = overlay[key]
            }
        }
        return result
    }

    private static func decode(_ root: TOMLTable, source: String) throws(ConfigError) -> DaemonConfig {
        let r = TableReader(root, path: "", source: source)
        try r.only(["daemon", "scheduler", "targeting", "rewards", "plugins", "slots", "access", "limits", "metrics", "frequency", "privacy"])
        let frequencyDefault = try r.table("frequency")
        try frequencyDefault?.only(FrequencySettings.keys)
        let defaultRules = try frequencyDefault?.frequency() ?? FrequencySettings()
        var limits = VarlinkLimits()
        var showRate = CallRate.shows
        var loadRate = CallRate.loads
        var listRate = CallRate.lists
        var reportRate = CallRate.reports
        var budgets = UIDBudgets()
        var maxPrivacyRecords: Int?
        if let l = try r.table("limits") {
            try l.only(["max_connections", "max_connections_per_uid", "partial_message_timeout_ms", "max_unsent_bytes",
                        "root_reserved_connections", "idle_connection_timeout_s", "max_queued_calls", "max_unsent_bytes_per_uid",
                        "max_pending_bytes_per_uid",
                        "shows_per_second_per_uid", "show_burst_per_uid", "loads_per_second_per_uid", "load_burst_per_uid",
                        "lists_per_second_per_uid", "list_burst_per_uid", "reports_per_second_per_uid", "report_burst_per_uid",
                        Budget.openAds.key, Budget.sessions.key, "unstarted_session_timeout_s", Budget.fairShare.key,
                        Budget.unacknowledgedRewards.key, Budget.privacyRecords.key])
            if let v = try l.int("max_connections", min: 1, max: 1 << 20) { limits.maxConnections = Int(v) }
            if let v = try l.int("max_connections_per_uid", min: 1, max: 1 << 20) { limits.maxConnectionsPerUID = Int(v) }
            if let v = try l.int("partial_message_timeout_ms", min: 10, max: 3_600_000) { limits.partialMessageTimeout = .milliseconds(v) }
            if let v = try l.int("max_unsent_bytes", min: 64 << 10, max: 1 << 30) { limits.maxUnsentBytes = Int(v) }
            let reserved = try l.int("root_reserved_connections", min: 0, max: 1 << 20)
            if let reserved { limits.rootReservedConnections = Int(reserved) }
            if limits.rootReservedConnections >= limits.maxConnections {
                throw l.error("root_reserved_connections", "is \(limits.rootReservedConnections)\(reserved == nil ? " (its default)" : ""), "
                              + "but must be less than max_connections (\(limits.maxConnections)), or only root could connect")
            }
            if let v = try l.int("idle_connection_timeout_s", min: 1, max: 86_400 * 7) { limits.idleConnectionTimeout = .seconds(v) }
            if let v = try l.int("max_queued_calls", min: 1, max: 1 << 20) { limits.maxQueuedCalls = Int(v) }
            if let v = try l.int("max_unsent_bytes_per_uid", min: 64 << 10, max: 1 << 34) { limits.maxUnsentBytesPerUID = Int(v) }
            if let v = try l.int("max_pending_bytes_per_uid", min: 64 << 10, max: 1 << 34) { limits.maxPendingBytesPerUID = Int(v) }
            if let v = try l.double("shows_per_second_per_uid", range: 0...1_000_000) { showRate.perSecond = v }
            if let v = try l.double("show_burst_per_uid", range: 1...1_000_000) { showRate.burst = v }
            if let v = try l.double("loads_per_second_per_uid", range: 0...1_000_000) { loadRate.perSecond = v }
            if let v = try l.double("load_burst_per_uid", range: 1...1_000_000) { loadRate.burst = v }
            if let v = try l.double("lists_per_second_per_uid", range: 0...1_000_000) { listRate.perSecond = v }
            if let v = try l.double("list_burst_per_uid", range: 1...1_000_000) { listRate.burst = v }
            if let v = try l.double("reports_per_second_per_uid", range: 0...1_000_000) { reportRate.perSecond = v }
            if let v = try l.double("report_burst_per_uid", range: 1...1_000_000) { reportRate.burst = v }
            if let v = try l.int(Budget.openAds.key, min: 1, max: 1 << 20) { budgets.maxOpenAds = Int(v) }
            if let v = try l.int(Budget.sessions.key, min: 1, max: 1 << 20) { budgets.maxSessions = Int(v) }
            if let v = try l.int("unstarted_session_timeout_s", min: 1, max: 86_400) { budgets.unstartedSessionTimeout = .seconds(v) }
            if let v = try l.int(Budget.fairShare.key, in: ConfigBounds.fairShareWindowSeconds) { budgets.fairShareWindow = .seconds(v) }
            if let v = try l.int(Budget.unacknowledgedRewards.key, in: ConfigBounds.unacknowledgedRewardsPerUID) {
                budgets.maxUnacknowledgedRewards = Int(v)
            }
            if let v = try l.int(Budget.privacyRecords.key, in: ConfigBounds.privacyRecordsPerUID) { maxPrivacyRecords = Int(v) }
        }
        var access = AccessPolicy()
        if let a = try r.table("access") {
            try a.only(["ads_users", "ads_groups", "manager_users", "manager_groups"])
            if let audience = try a.audience(users: "ads_users", groups: "ads_groups") { access.ads = audience }
            if let audience = try a.audience(users: "manager_users", groups: "manager_groups") { access.manager = audience }
        }
        let rewards = try r.table("rewards")
        try rewards?.only(["key_file"])
        let daemonTargeting = try r.targeting("targeting") ?? [:]

        let daemon = try r.table("daemon")
        try daemon?.only(["socket", "state_dir", "plugin_dir", "log_level", "max_message_bytes"])
        let logLevel = try daemon?.string("log_level")
        if let logLevel, !validLogLevels.contains(logLevel) {
            throw r.error("daemon.log_level", "expected one of \(validLogLevels.joined(separator: ", ")), got \"\(logLevel)\"")
        }

        var scheduler = SchedulerSettings()
        if let s = try r.table("scheduler") {
            try s.only(["refresh_ahead_s", "backoff_base_ms", "backoff_max_s", "backoff_jitter", "shown_lifetime_s",
                        "network_reward_grace_s", "rate_limit_pause_s", "max_loads_in_flight_per_network"])
            if let v = try s.int("refresh_ahead_s", in: ConfigBounds.refreshAheadSeconds) { scheduler.refreshAhead = .seconds(v) }
            if let v = try s.int("backoff_base_ms", in: ConfigBounds.backoffBaseMilliseconds) { scheduler.backoffBase = .milliseconds(v) }
            if let v = try s.int("backoff_max_s", in: ConfigBounds.backoffMaxSeconds) { scheduler.backoffMax = .seconds(v) }
            if let v = try s.double("backoff_jitter", range: ConfigBounds.backoffJitter) { scheduler.backoffJitter = v }
            if let v = try s.int("shown_lifetime_s", in: ConfigBounds.shownLifetimeSeconds) { scheduler.shownLifetime = .seconds(v) }
            if let v = try s.int("network_reward_grace_s", in: ConfigBounds.networkRewardGraceSeconds) { scheduler.networkRewardGrace = .seconds(v) }
            if let v = try s.int("rate_limit_pause_s", in: ConfigBounds.rateLimitPauseSeconds) { scheduler.rateLimitPause = .seconds(v) }
            if let v = try s.int("max_loads_in_flight_per_network", in: ConfigBounds.maxLoadsInFlightPerNetwork) { scheduler.maxLoadsInFlightPerNetwork = Int(v) }
        }
        scheduler.budgets = budgets
        scheduler.privacy = try r.table("privacy")?.privacySettings() ?? PrivacySettings()

        var plugins: [PluginConfig] = []
        if let p = try r.table("plugins") {
            for name in p.table.keys.sorted() {
                guard isName(name) else { throw r.error("plugins.\(name)", "plugin names are [a-z0-9_-]+") }
                guard let section = try p.table(name) else { throw r.error("plugins.\(name)", "expected a table") }
                try section.only(["path", "config", "isolation", "memory_limit_mb", "hang_timeout_ms", "crash_budget", "crash_window_s"])
                let pluginConfig = try section.table("config")
                try pluginConfig?.requireFiniteNumbers()
                let configJSON = pluginConfig.map { $0.table.convert(to: .json) } ?? "{}"
                var plugin = PluginConfig(name: name, path: try section.string("path"), configJSON: configJSON)
                if let v = try section.string("isolation") {
                    guard let isolation = PluginIsolation(rawValue: v) else {
                        throw section.error("isolation", "expected one of \(PluginIsolation.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")), got \"\(v)\"")
                    }
                    plugin.isolation = isolation
                }
                if let v = try section.int("memory_limit_mb", in: ConfigBounds.memoryLimitMegabytes) { plugin.memoryLimitBytes = UInt64(v) << 20 }
                if let v = try section.int("hang_timeout_ms", in: ConfigBounds.hangTimeoutMilliseconds) { plugin.hangTimeout = .milliseconds(v) }
                if let v = try section.int("crash_budget", in: ConfigBounds.crashBudget) { plugin.crashPolicy.crashBudget = Int(v) }
                if let v = try section.int("crash_window_s", in: ConfigBounds.crashWindowSeconds) { plugin.crashPolicy.window = .seconds(v) }
                // A host's settings on a plugin that has none would do nothing: said, not ignored.
                if plugin.isolation == .inProcess,
                   let key = ["memory_limit_mb", "hang_timeout_ms", "crash_budget", "crash_window_s"].first(where: { section.table.contains(key: $0) }) {
                    throw section.error(key, "applies to an isolated plugin only (isolation = \"process\"); this one is \"in-process\"")
                }
                plugins.append(plugin)
            }
        }

        var slots: [SlotConfig] = []
        for s in try r.tables("slots") {
            try s.only(["id", "format", "buffer", "buffer_min", "buffer_max", "ttl_s", "reward_name", "reward_amount", "reward_extra", "test_mode", "targeting",
                        "width", "height", "count", "load_timeout_ms", "native_variant", "image_options", "parallel", "waterfall",
                        "fetch_timeout_ms", "start_timeout_ms", "users", "groups", "floor"] + FrequencySettings.keys)
            let id = try s.requiredString("id")
            guard isName(id) else { throw s.error("id", "slot ids are [a-z0-9_-]+, got \"\(id)\"") }
            guard !slots.contains(where: { $0.id == id }) else { throw s.error("id", "slot \"\(id)\" is defined twice") }
            if let audience = try s.audience(users: "users", groups: "groups") { access.slots[id] = audience }
            let formatName = try s.requiredString("format")
            guard let format = AdFormat(rawValue: formatName) else {
                throw s.error("format", "expected one of \(AdFormat.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(formatName)\"")
            }
            let frequency = try s.frequency()
            if !format.isPreloaded, let key = FrequencySettings.keys.first(where: { s.table.contains(key: $0) }) {
                throw s.error(key, "frequency rules hold Shows: \(id) is \(format.slotInWords), \(format.howToUse)")
            }
            var waterfall: [WaterfallEntry] = []
            for w in try s.tables("waterfall") {
                try w.only(["plugin", "ad_unit_id", "server_parameter", "timeout_ms", "caps", "pacing", "gvl_id", "serves_children",
                            "serves_non_personalized", "bidder", "ecpm"])
                let bidder = try w.bool("bidder") ?? false
                let ecpm = try w.double("ecpm", range: ConfigBounds.cpm)
                if !format.isPreloaded, let key = bidder ? "bidder" : ecpm != nil ? "ecpm" : nil {
                    throw w.error(key, "the auction runs for preloaded slots (rewarded, fullscreen, interstitial); \(id) is \(format.slotInWords), \(format.howToUse)")
                }
                if bidder, ecpm != nil { throw w.error("ecpm", "a bidder's price comes with each bid; ecpm is for waterfall entries") }
                let entryRules = try w.frequency().rules(over: FrequencySettings())
                if !format.isPreloaded, !entryRules.isEmpty {
                    throw w.error(w.table.contains(key: "caps") ? "caps" : "pacing", "frequency rules hold Shows: \(id) is \(format.slotInWords), \(format.howToUse)")
                }
                let plugin = try w.requiredString("plugin")
                if !plugins.isEmpty, !plugins.contains(where: { $0.name == plugin }) {
                    throw w.error("plugin", "no plugin \"\(plugin)\" is configured (add a [plugins.\(plugin)] section)")
                }
                waterfall.append(WaterfallEntry(
                    plugin: plugin, adUnitID: try w.string("ad_unit_id") ?? "",
                    serverParameter: try w.string("server_parameter") ?? "",
                    timeout: .milliseconds(try w.int("timeout_ms", in: ConfigBounds.entryTimeoutMilliseconds) ?? 5000),
                    caps: entryRules, privacy: try w.networkPrivacy(), bidder: bidder, ecpm: ecpm
                ))
            }
            guard !waterfall.isEmpty else { throw s.error("waterfall", "a slot needs at least one [[slots.waterfall]] entry") }
            try s.checkOneRuleSetPerNetwork(waterfall)
            let (bufferMin, bufferMax) = try s.buffer(format: format)
            let fetchTimeout = try s.int("fetch_timeout_ms", in: ConfigBounds.sessionTimeoutMilliseconds)
            let startTimeout = try s.int("start_timeout_ms", in: ConfigBounds.sessionTimeoutMilliseconds)
            if format != .interactive, let key = fetchTimeout != nil ? "fetch_timeout_ms" : startTimeout != nil ? "start_timeout_ms" : nil {
                throw s.error(key, "only interactive slots take fetch_timeout_ms and start_timeout_ms")
            }
            let parallel = try s.int("parallel", in: ConfigBounds.parallel)
            if !format.isPreloaded, parallel != nil {
                throw s.error("parallel", "parallel mode is for preloaded slots (rewarded, fullscreen, interstitial)")
            }
            if (parallel ?? 1) > 1, waterfall.contains(where: { $0.bidder || $0.ecpm != nil }) {
                throw s.error("parallel", "a slot with bidders or an ecpm runs an auction (docs/bidding.md); parallel mode is for a waterfall without")
            }
            let floor = try s.double("floor", range: ConfigBounds.cpm)
            if floor != nil, !format.isPreloaded {
                throw s.error("floor", "floors hold the auction of preloaded slots (rewarded, fullscreen, interstitial); \(id) is \(format.slotInWords), \(format.howToUse)")
            }
            let variant = try s.string("native_variant") ?? (format == .native ? "feed" : "")
            if format == .native, !["feed", "banner", "interstitial"].contains(variant) {
                throw s.error("native_variant", "expected feed, banner or interstitial, got \"\(variant)\"")
            }
            if format != .native, try s.string("native_variant") != nil || s.table.keys.contains("image_options") {
                throw s.error("native_variant", "only native slots take native_variant and image_options")
            }
            // The default holds every Show slot that does not set its own.
            let rules = format.isPreloaded ? frequency.rules(over: defaultRules) : []
            try s.checkReachable(rules)
            var slot = SlotConfig(
                id: id, format: format, buffer: bufferMin, bufferMax: bufferMax,
                ttl: .seconds(try s.int("ttl_s", in: ConfigBounds.ttlSeconds) ?? 3600), waterfall: waterfall,
                reward: RewardModel(name: try s.string("reward_name") ?? "", amount: try s.int("reward_amount", in: ConfigBounds.rewardAmount) ?? 0,
                                    extra: try s.string("reward_extra") ?? ""),
                testMode: try s.bool("test_mode") ?? daemonTargeting["test_mode"]?.boolValue ?? false,
                targetingJSON: JSONValue.object(Targeting.merge(daemonTargeting, try s.targeting("targeting") ?? [:])).jsonString,
                width: Int(try s.int("width", in: LoadBounds.size) ?? 0), height: Int(try s.int("height", in: LoadBounds.size) ?? 0),
                count: Int(try s.int("count", in: LoadBounds.count) ?? (format == .native ? 3 : 1)),
                loadTimeout: try s.int("load_timeout_ms", in: LoadBounds.timeoutMilliseconds).map { .milliseconds($0) },
                variant: variant,
                imageOptionsJSON: try s.imageOptions() ?? "{}",
                parallel: Int(parallel ?? 1),
                fetchTimeout: .milliseconds(fetchTimeout ?? 5000), startTimeout: .milliseconds(startTimeout ?? 10_000)
            )
            slot.caps = rules
            slot.floor = floor ?? 0
            slot.capCounting = frequency.counting ?? defaultRules.counting ?? .impression
            slots.append(slot)
        }

        limits.maxMessageSize = Int(try daemon?.int("max_message_bytes", in: ConfigBounds.maxMessageBytes) ?? 1 << 20)
        var config = DaemonConfig(
            source: source, socketPath: try daemon?.path("socket", maxBytes: UnixSocket.maxPathBytes), stateDir: try daemon?.path("state_dir"),
            pluginDir: try daemon?.path("plugin_dir"), logLevel: logLevel,
            scheduler: scheduler, rewardKeyFile: try rewards?.string("key_file"), plugins: plugins, slots: slots, access: access,
            limits: limits, showRate: showRate, loadRate: loadRate, listRate: listRate, reportRate: reportRate
        )
        config.metrics = try MetricsAddress.read(try r.table("metrics"))
        if let maxPrivacyRecords { config.maxPrivacyRecordsPerUID = maxPrivacyRecords }
        return config
    }

    public static let validLogLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    static func isName(_ s: String) -> Bool {
        !s.isEmpty && s.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" }
    }
}
