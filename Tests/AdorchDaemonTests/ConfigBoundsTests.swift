import AdorchEngine
import AdorchVarlink
import Foundation
import XCTest

@testable import AdorchDaemon

/// Every number a config sets has a range, named with its key when it is outside; and an
/// engine run on the top of every range (or on anything larger) never traps.
final class ConfigBoundsTests: XCTestCase {
    private func config(scheduler: String = "", daemon: String = "", limits: String = "", format: String = "rewarded",
                        slot: String = "", entry: String = "") -> String {
        """
        [daemon]
        \(daemon)
        [scheduler]
        \(scheduler)
        [limits]
        \(limits)
        [[slots]]
        id = "s"
        format = "\(format)"
        \(slot)
          [[slots.waterfall]]
          plugin = "sim"
          \(entry)
        """
    }

    private func refusal(_ toml: String) -> ConfigError? {
        do {
            _ = try DaemonConfig.parse(toml: toml, source: "test.toml")
            return nil
        } catch {
            return error
        }
    }

    /// Each numeric key, with the section it is in: the one in `config` it is written to.
    private var numericKeys: [(key: String, toml: (String) -> String)] {
        let scheduler = ["refresh_ahead_s", "backoff_base_ms", "backoff_max_s", "backoff_jitter", "shown_lifetime_s",
                         "rate_limit_pause_s", "max_loads_in_flight_per_network"]
        let limits = ["max_connections", "max_connections_per_uid", "root_reserved_connections", "idle_connection_timeout_s",
                      "partial_message_timeout_ms", "max_queued_calls", "max_unsent_bytes", "max_unsent_bytes_per_uid", "max_pending_bytes_per_uid",
                      "shows_per_second_per_uid", "show_burst_per_uid", "loads_per_second_per_uid", "load_burst_per_uid",
                      "lists_per_second_per_uid", "list_burst_per_uid", "reports_per_second_per_uid", "report_burst_per_uid",
                      "max_open_ads_per_uid", "max_sessions_per_uid", "unstarted_session_timeout_s", "fair_share_window_s",
                      "max_unacknowledged_rewards_per_uid"]
        let slot: [(String, String)] = [("ttl_s", "rewarded"), ("reward_amount", "rewarded"), ("parallel", "rewarded"),
                                        ("buffer", "rewarded"), ("buffer_min", "rewarded"), ("buffer_max", "rewarded"),
                                        ("width", "banner"), ("height", "banner"), ("count", "native"), ("load_timeout_ms", "banner"),
                                        ("fetch_timeout_ms", "interactive"), ("start_timeout_ms", "interactive")]
        var keys: [(key: String, toml: (String) -> String)] = []
        for key in scheduler { keys.append(("scheduler.\(key)", { self.config(scheduler: "\(key) = \($0)") })) }
        for key in limits { keys.append(("limits.\(key)", { self.config(limits: "\(key) = \($0)") })) }
        keys.append(("daemon.max_message_bytes", { self.config(daemon: "max_message_bytes = \($0)") }))
        for (key, format) in slot { keys.append(("slots[0].\(key)", { self.config(format: format, slot: "\(key) = \($0)") })) }
        keys.append(("slots[0].waterfall[0].timeout_ms", { self.config(entry: "timeout_ms = \($0)") }))
        keys.append(("slots[0].targeting.age", { self.config(slot: "targeting = { age = \($0) }") }))
        return keys
    }

    /// A path the daemon could not use is refused by the check, not found at start: an empty
    /// one, a socket path longer than sun_path holds.
    func testPathsTheDaemonCouldNotUseAreRefusedNamingTheKey() {
        let long = "/tmp/" + String(repeating: "s", count: UnixSocket.maxPathBytes)
        let cases: [(String, String, String)] = [
            (#"socket = """#, "daemon.socket", "is empty"),
            (#"socket = "\#(long)""#, "daemon.socket", "at most \(UnixSocket.maxPathBytes) may be"),
            (#"state_dir = """#, "daemon.state_dir", "is empty"),
            (#"plugin_dir = """#, "daemon.plugin_dir", "is empty"),
        ]
        for (line, key, says) in cases {
            let error = refusal(config(daemon: line))
            XCTAssertEqual(error?.location, "key \(key)", "\(line): \(String(describing: error))")
            XCTAssertTrue(error?.message.contains(says) ?? false, "\(line): \(String(describing: error))")
        }
        let longest = "/tmp/" + String(repeating: "s", count: UnixSocket.maxPathBytes - 5)
        XCTAssertNil(refusal(config(daemon: #"socket = "\#(longest)""#)), "a path of exactly sun_path's size is taken")
    }

    func testHugeAndNegativeNumbersAreRefusedNamingTheKey() {
        XCTAssertNil(refusal(config()), "the template itself is valid")
        let integers = ["9223372036854775807", "-9223372036854775808", "10000000000000000", "-1"]
        for (key, toml) in numericKeys {
            for value in integers {
                XCTAssertEqual(refusal(toml(value))?.location, "key \(key)", "\(key) = \(value): \(refusal(toml(value))?.description ?? "accepted")")
            }
        }
        // The keys that take fractions: TOML's nan and inf, and a double too large for any range.
        for key in ["scheduler.backoff_jitter", "limits.shows_per_second_per_uid", "limits.show_burst_per_uid",
                    "limits.reports_per_second_per_uid", "limits.report_burst_per_uid"] {
            let toml = numericKeys.first { $0.key == key }!.toml
            for value in ["nan", "+nan", "-nan", "inf", "-inf", "1e308", "-1e308"] {
                XCTAssertEqual(refusal(toml(value))?.location, "key \(key)", "\(key) = \(value): \(refusal(toml(value))?.description ?? "accepted")")
            }
        }
        // Where an integer is wanted, a double is refused as one, whatever its value.
        XCTAssertEqual(refusal(config(scheduler: "backoff_max_s = 1e10"))?.description,
                       "test.toml: key scheduler.backoff_max_s: expected an integer, got floating-point number")
        XCTAssertEqual(refusal(config(scheduler: "backoff_base_ms = 9223372036854775807"))?.description,
                       "test.toml: key scheduler.backoff_base_ms: expected an integer of at most 3600000, got 9223372036854775807")
        // A plugin's config is its own, but goes to it as JSON: no nan or inf at any depth.
        for (value, key) in [("{ a = nan }", "plugins.sim.config.a"), ("{ t = { b = [1.0, -inf] } }", "plugins.sim.config.t.b[1]")] {
            XCTAssertEqual(refusal("[plugins.sim]\nconfig = \(value)\n" + config())?.location, "key \(key)", value)
        }
        XCTAssertNil(refusal("[plugins.sim]\nconfig = { big = 9223372036854775807, tiny = 5e-324, zero = -0.0 }\n" + config()))
        // -0 is 0: taken where 0 is.
        XCTAssertNil(refusal(config(scheduler: "refresh_ahead_s = -0\nbackoff_jitter = -0.0")))
    }

    /// The top of every range, as one config: each bound comes from ConfigBounds itself.
    private var topOfEveryRange: String {
        func top(_ range: ClosedRange<Int64>) -> String { "\(range.upperBound)" }
        let b = ConfigBounds.self
        return """
        [scheduler]
        refresh_ahead_s = \(top(b.refreshAheadSeconds))
        backoff_base_ms = \(top(b.backoffBaseMilliseconds))
        backoff_max_s = \(top(b.backoffMaxSeconds))
        backoff_jitter = \(b.backoffJitter.upperBound)
        shown_lifetime_s = \(top(b.shownLifetimeSeconds))
        rate_limit_pause_s = \(top(b.rateLimitPauseSeconds))
        max_loads_in_flight_per_network = \(top(b.maxLoadsInFlightPerNetwork))
        [[slots]]
        id = "r"
        format = "rewarded"
        buffer = \(BufferBounds.ceiling)
        ttl_s = \(top(b.ttlSeconds))
        reward_amount = \(top(b.rewardAmount))
        parallel = \(top(b.parallel))
          [[slots.waterfall]]
          plugin = "sim"
          timeout_ms = \(top(b.entryTimeoutMilliseconds))
          [[slots.waterfall]]
          plugin = "sim"
          timeout_ms = \(top(b.entryTimeoutMilliseconds))
        [[slots]]
        id = "d"
        format = "interstitial"
        buffer_min = \(BufferBounds.ceiling)
        buffer_max = \(BufferBounds.ceiling)
        ttl_s = \(top(b.ttlSeconds))
          [[slots.waterfall]]
          plugin = "sim"
          timeout_ms = \(top(b.entryTimeoutMilliseconds))
        """
    }

    func testTheEngineAtTheTopOfEveryRangeNeverTraps() throws {
        let config = try DaemonConfig.parse(toml: topOfEveryRange, source: "top.toml")
        XCTAssertEqual(config.scheduler.backoffBase, .milliseconds(ConfigBounds.backoffBaseMilliseconds.upperBound))
        let longest = config.scheduler.backoffMax * (1 + config.scheduler.backoffJitter)
        for start in [Moment(nanoseconds: 1_000_000_000), Moment(nanoseconds: .max - 3_600_000_000_000)] {
            let backoffs = drive(config.slots, config.scheduler, from: start)
            XCTAssertTrue(backoffs.contains { $0 > .zero }, "the entries backed off")
            XCTAssertTrue(backoffs.allSatisfy { $0 <= longest }, "\(backoffs.max()!) is above backoff_max_s with its jitter")
        }
    }

    /// The same engine arithmetic with no config in between: any settings, however large.
    func testSettingsBeyondAnyConfigSaturateInsteadOfTrapping() throws {
        let config = try DaemonConfig.parse(toml: topOfEveryRange, source: "top.toml")
        let huge = Duration.seconds(Int64.max)
        let settings = SchedulerSettings(refreshAhead: huge, backoffBase: huge, backoffMax: huge, backoffJitter: 1,
                                         shownLifetime: huge, retiredMemory: huge, rateLimitPause: huge)
        var slots = config.slots
        for i in slots.indices {
            slots[i].ttl = huge
            for j in slots[i].waterfall.indices { slots[i].waterfall[j].timeout = huge }
        }
        XCTAssertTrue(drive(slots, settings, from: Moment(nanoseconds: 1_000_000_000)).contains { $0 > .seconds(100 * 365 * 86_400) }, "backoffs of a century and more")
        XCTAssertEqual(settings.backoff(doublings: 30, spread: 1), .nanoseconds(Int64.max))
        XCTAssertEqual(settings.backoff(doublings: 0, spread: -1), .zero)
        XCTAssertEqual(SchedulerSettings(backoffJitter: .nan).backoff(doublings: 0, spread: 1), .zero)
    }

    /// Runs the engine through every kind of answer (no fill, rate limited, filled, never
    /// answered) on a manual clock, moving to each wake-up it asks for; returns the backoffs seen.
    private func drive(_ slots: [SlotConfig], _ settings: SchedulerSettings, from start: Moment) -> [Duration] {
        var engine = Engine(slots: slots, plugins: ["sim"], settings: settings, seed: 3)
        var now = start
        var effects = engine.advance(to: now)
        var backoffs: [Duration] = []
        for step in 0..<400 {
            var next: [Effect] = []
            for case .load(let order) in effects {
                let report: PluginReport? = switch (step + Int(order.adID % 4)) % 4 {
                case 0: .failed(.noFill, networkCode: 0, message: "none")
                case 1: .failed(.rateLimited, networkCode: 0, message: "slow")
                case 2: .loaded(payloadJSON: "{}", expiresIn: nil, price: 1)
                default: nil
                }
                if let report { next += engine.pluginReported(report, for: order.adID, from: "sim", now: now) }
            }
            if step % 3 == 0 { next += engine.show(slot: "r", userID: "u", privacy: nil, now: now).1 }
            effects = next
            backoffs += engine.slotStatuses(at: now).flatMap { $0.entries.map(\.backoff) }
            guard let wake = engine.nextWakeup(after: now), wake > now else { break }
            now = wake
            effects += engine.advance(to: now)
        }
        return backoffs
    }
}

/// docs/isolation.md, "The two modes": the host's keys of an isolated plugin, in range and
/// named when they are not, and refused on a plugin that has no host.
final class PluginIsolationConfigTests: XCTestCase {
    private func parse(_ plugin: String) throws(ConfigError) -> PluginConfig {
        let toml = """
        [plugins.sim]
        \(plugin)
        [[slots]]
        id = "s"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "sim"
        """
        return try DaemonConfig.parse(toml: toml, source: "test.toml").plugins[0]
    }

    private func refusal(_ plugin: String) -> String? {
        do throws(ConfigError) {
            _ = try parse(plugin)
            return nil
        } catch {
            return error.description
        }
    }

    func testTheDefaultsAndTheKeys() throws {
        let defaults = try parse("")
        XCTAssertEqual(defaults.isolation, .process)
        XCTAssertEqual(defaults.memoryLimitBytes, 4096 << 20)
        XCTAssertEqual(defaults.hangTimeout, .seconds(5))
        XCTAssertEqual(defaults.crashPolicy, .init(crashBudget: 5, window: .seconds(600)))
        let set = try parse("memory_limit_mb = 512\nhang_timeout_ms = 800\ncrash_budget = 2\ncrash_window_s = 30")
        XCTAssertEqual(set.memoryLimitBytes, 512 << 20)
        XCTAssertEqual(set.hangTimeout, .milliseconds(800))
        XCTAssertEqual(set.crashPolicy, .init(crashBudget: 2, window: .seconds(30)))
        XCTAssertEqual(try parse(#"isolation = "in-process""#).isolation, .inProcess)
    }

    func testBadValuesAreRefusedNamingTheKey() {
        XCTAssertTrue(refusal(#"isolation = "sideways""#)?.contains(#"plugins.sim.isolation"#) ?? false)
        XCTAssertTrue(refusal(#"isolation = "sideways""#)?.contains(#"expected one of "process", "in-process""#) ?? false)
        for (key, bad) in [("memory_limit_mb", "255"), ("hang_timeout_ms", "499"), ("crash_budget", "0"), ("crash_window_s", "86401")] {
            XCTAssertTrue(refusal("\(key) = \(bad)")?.contains("plugins.sim.\(key)") ?? false, "\(key) = \(bad): \(refusal("\(key) = \(bad)") ?? "accepted")")
        }
        for key in ["memory_limit_mb = 512", "hang_timeout_ms = 800", "crash_budget = 2", "crash_window_s = 30"] {
            let why = refusal("isolation = \"in-process\"\n\(key)")
            XCTAssertTrue(why?.contains("applies to an isolated plugin only") ?? false, "\(key): \(why ?? "accepted")")
        }
    }
}
