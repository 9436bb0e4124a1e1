import AdorchEngine
import AdorchVarlink
import Foundation
import XCTest

@testable import AdorchDaemon

final class ConfigTests: XCTestCase {
    private let minimal = """
    [[slots]]
    id = "s"
    format = "interstitial"
      [[slots.waterfall]]
      plugin = "sim"
    """

    private func refusal(_ toml: String) -> ConfigError? {
        do {
            _ = try DaemonConfig.parse(toml: toml, source: "test.toml")
            return nil
        } catch {
            return error
        }
    }

    func testTheEmbeddedDefaultHasTheDemoSlots() {
        let config = DaemonConfig.embeddedDefault()
        XCTAssertEqual(config.slots.map(\.id), ["rewarded_main", "fullscreen_main", "interstitial_main", "banner_main", "splash_main", "native_main",
                                                  "interactive_main"])
        XCTAssertEqual(config.slots.map(\.format), [.rewarded, .fullscreen, .interstitial, .banner, .splash, .native, .interactive])
        XCTAssertEqual(config.plugins.map(\.name), ["sim"])
        XCTAssertTrue(config.slots.allSatisfy { ($0.bufferMax >= 1) == $0.format.isPreloaded && !$0.waterfall.isEmpty })
        XCTAssertEqual(config.slots.first { $0.format == .splash }?.loadTimeout, .seconds(2))
        XCTAssertEqual(config.slots.first { $0.format == .native }?.count, 3)
    }

    func testTheShippedFileIsTheEmbeddedDefault() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../etc/adorch/adorchd.toml").path
        var shipped = try DaemonConfig.load(path: path)
        shipped.source = DaemonConfig.embeddedDefaultSource
        XCTAssertEqual(shipped, DaemonConfig.embeddedDefault())
    }

    func testAMinimalConfigGetsDefaults() throws {
        let config = try DaemonConfig.parse(toml: minimal, source: "test.toml")
        XCTAssertEqual([config.slots[0].bufferMin, config.slots[0].bufferMax], [1, 1], "no buffer key: a fixed buffer of one, as before")
        XCTAssertEqual(config.slots[0].ttl, .seconds(3600))
        XCTAssertEqual(config.slots[0].waterfall[0].timeout, .seconds(5))
        XCTAssertEqual(config.limits.maxMessageSize, 1 << 20)
        XCTAssertEqual(config.plugins, [], "no [plugins]: discover them")
    }

    func testSyntaxErrorsNameTheLine() {
        let error = refusal("[daemon]\nsocket = \"/x\"\nbroken = = 3\n")
        XCTAssertEqual(error?.file, "test.toml")
        XCTAssertEqual(error?.location.hasPrefix("line 3,"), true, error?.description ?? "")
    }

    /// Each of these would abort the process inside toml++ (the config fuzzer's finds): here
    /// they are named errors with their place. Fuzz/corpus/config keeps the fuzzer's own inputs.
    func testInputThatWouldAbortTheParserIsANamedError() {
        let cases: [(toml: String, location: String, saw: String)] = [
            ("[daemon]\n[[[slots]]\n", "line 2, column 3", "saw '['"),
            ("a = 1\n  [ !x]\n", "line 2, column 5", "saw '!'"),
            ("[\n", "line 1, column 2", "saw the end of the line"),
            ("[[ \r\nx = 1\r\n", "line 1, column 4", "saw the end of the line"),
            ("\u{FEFF}[\u{00A0}a]", "line 1, column 3", "saw U+A0"),
            ("x = \"\"\"\n[!ok in a string]\n\"\"\"\n[{}]\n", "line 4, column 2", "saw '{'"),
            ("g=[}", "line 1, column 4", "expected a value or ']', saw '}'"),
            ("a = \"[}\" # [}\nb = '''x''''\nc = [ # }\n 1,\n  }]\n[!x]\n", "line 5, column 3", "saw '}'"),
        ]
        for c in cases {
            let error = refusal(c.toml)
            XCTAssertEqual(error?.location, c.location, c.toml.debugDescription)
            XCTAssertEqual(error?.message.hasSuffix(c.saw), true, "\(c.toml.debugDescription): \(error?.description ?? "accepted")")
        }
    }

    /// The same text inside multi-line strings and arrays is valid and reaches the usual checks.
    func testHeaderLookalikesInsideValuesAreNotHeaders() {
        let text = "[scheduler]\nnote = '''\n[!a]\n[}'''\n[targeting]\nx = [\n  [ {a = 1} ], \"[,}\",\n[ # ,}\n  +1]]\n"
        XCTAssertEqual(refusal(text)?.location.hasPrefix("key "), true, "parsed as TOML; only the unknown keys are refused: \(refusal(text)?.description ?? "")")
        // toml++ reports `[ [a]]` itself; what follows a NUL is never parsed.
        XCTAssertEqual(refusal("[ [a]]\n")?.message.contains("brackets must be contiguous"), true, refusal("[ [a]]\n")?.description ?? "")
        XCTAssertNil(refusal(minimal + "\n\0\n[!]\n"))
    }

    func testSemanticErrorsNameTheKeyAndWhatWasExpected() {
        XCTAssertEqual(refusal(minimal + "\n  bufer = 2").map(\.location), "key slots[0].waterfall[0].bufer")
        XCTAssertEqual(refusal(minimal.replacingOccurrences(of: "interstitial", with: "popup"))?.description,
                       "test.toml: key slots[0].format: expected one of rewarded, fullscreen, interstitial, banner, splash, native, interactive, got \"popup\"")
        XCTAssertEqual(refusal("[daemon]\nmax_message_bytes = \"big\"\n" + minimal)?.description,
                       "test.toml: key daemon.max_message_bytes: expected an integer, got string")
        XCTAssertEqual(refusal("[daemon]\nlog_level = \"loud\"\n" + minimal)?.location, "key daemon.log_level")
        XCTAssertEqual(refusal(minimal + "\n" + minimal)?.description, "test.toml: key slots[1].id: slot \"s\" is defined twice")
        XCTAssertEqual(refusal("[[slots]]\nid = \"s\"\nformat = \"rewarded\"\n")?.location, "key slots[0].waterfall")
        XCTAssertEqual(refusal("[plugins.other]\n" + minimal)?.description,
                       "test.toml: key slots[0].waterfall[0].plugin: no plugin \"sim\" is configured (add a [plugins.sim] section)")
        XCTAssertEqual(refusal(minimal.replacingOccurrences(of: "id = \"s\"", with: "id = \"Bad Slot\""))?.location, "key slots[0].id")
        XCTAssertEqual(refusal("[scheduler]\nbackoff_jitter = 2.0\n" + minimal)?.location, "key scheduler.backoff_jitter")
        XCTAssertEqual(refusal("[scheduler]\nnetwork_reward_grace_s = 0\n" + minimal)?.location, "key scheduler.network_reward_grace_s")
        XCTAssertEqual(try DaemonConfig.parse(toml: minimal, source: "test.toml").scheduler.networkRewardGrace, .seconds(60))
        XCTAssertEqual(try DaemonConfig.parse(toml: "[scheduler]\nnetwork_reward_grace_s = 5\n" + minimal, source: "test.toml").scheduler.networkRewardGrace,
                       .seconds(5))
        let banner = minimal.replacingOccurrences(of: "interstitial", with: "banner")
        XCTAssertEqual(refusal(banner.replacingOccurrences(of: "format = \"banner\"", with: "format = \"banner\"\nbuffer = 2"))?.description,
                       "test.toml: key slots[0].buffer: banner ads are loaded on demand (io.adorch.Ads.Load), not preloaded: remove buffer")
        let native = minimal.replacingOccurrences(of: "interstitial", with: "native")
        XCTAssertEqual(refusal(native.replacingOccurrences(of: "format = \"native\"", with: "format = \"native\"\ncount = 11"))?.location, "key slots[0].count")
    }

    func testTheBudgetsPerUidHaveDefaultsAndAreRangeChecked() throws {
        let defaults = try DaemonConfig.parse(toml: minimal, source: "test.toml")
        XCTAssertEqual(defaults.loadRate, CallRate(perSecond: 20, burst: 50))
        XCTAssertEqual(defaults.reportRate, CallRate(perSecond: 1000, burst: 2000))
        XCTAssertEqual(defaults.scheduler.budgets, UIDBudgets())
        XCTAssertEqual([defaults.scheduler.budgets.maxOpenAds, defaults.scheduler.budgets.maxSessions], [256, 16])
        XCTAssertEqual(defaults.scheduler.budgets.unstartedSessionTimeout, .seconds(60))
        XCTAssertEqual(defaults.scheduler.budgets.fairShareWindow, .seconds(60))
        XCTAssertEqual(defaults.scheduler.budgets.maxUnacknowledgedRewards, 10_000)
        let set = try DaemonConfig.parse(toml: """
            [limits]
            loads_per_second_per_uid = 2.5
            load_burst_per_uid = 5
            reports_per_second_per_uid = 0.5
            report_burst_per_uid = 4
            max_open_ads_per_uid = 10
            max_sessions_per_uid = 3
            unstarted_session_timeout_s = 20
            fair_share_window_s = 30
            max_unacknowledged_rewards_per_uid = 5
            """ + "\n" + minimal, source: "test.toml")
        XCTAssertEqual(set.loadRate, CallRate(perSecond: 2.5, burst: 5))
        XCTAssertEqual(set.reportRate, CallRate(perSecond: 0.5, burst: 4))
        XCTAssertEqual(try DaemonConfig.parse(toml: "[limits]\nreports_per_second_per_uid = 0\n" + minimal, source: "test.toml").reportRate.perSecond,
                       0, "0 turns it off, as for the other rates")
        XCTAssertEqual([set.scheduler.budgets.maxOpenAds, set.scheduler.budgets.maxSessions], [10, 3])
        XCTAssertEqual(set.scheduler.budgets.unstartedSessionTimeout, .seconds(20))
        XCTAssertEqual(set.scheduler.budgets.fairShareWindow, .seconds(30))
        XCTAssertEqual(set.scheduler.budgets.maxUnacknowledgedRewards, 5)
        let longest = ConfigBounds.fairShareWindowSeconds.upperBound
        XCTAssertEqual(try DaemonConfig.parse(toml: "[limits]\nfair_share_window_s = \(longest)\n" + minimal, source: "test.toml")
            .scheduler.budgets.fairShareWindow, .seconds(longest))
        for (key, value) in [("loads_per_second_per_uid", "-1"), ("load_burst_per_uid", "0"), ("max_open_ads_per_uid", "0"),
                             ("reports_per_second_per_uid", "-1"), ("reports_per_second_per_uid", "1000001"), ("report_burst_per_uid", "0"),
                             ("report_burst_per_uid", "1000001"), ("report_burst_per_uid", "\"many\""),
                             ("max_sessions_per_uid", "0"), ("unstarted_session_timeout_s", "0"), ("max_open_ads_per_uid", "\"many\""),
                             ("fair_share_window_s", "0"), ("fair_share_window_s", "\(ConfigBounds.fairShareWindowSeconds.upperBound + 1)"),
                             ("max_unacknowledged_rewards_per_uid", "0"),
                             ("max_unacknowledged_rewards_per_uid", "\(ConfigBounds.unacknowledgedRewardsPerUID.upperBound + 1)")] {
            XCTAssertEqual(refusal("[limits]\n\(key) = \(value)\n" + minimal)?.location, "key limits.\(key)")
        }
    }

    /// buffer = N is fixed; buffer_min / buffer_max are demand-aware; bad bounds are named.
    func testBufferBoundsAreCheckedAndNamed() throws {
        func withKeys(_ keys: String) -> String { minimal.replacingOccurrences(of: "format = \"interstitial\"", with: "format = \"interstitial\"\n" + keys) }
        let aware = try DaemonConfig.parse(toml: withKeys("buffer_min = 1\nbuffer_max = 6"), source: "test.toml").slots[0]
        XCTAssertEqual([aware.bufferMin, aware.bufferMax], [1, 6])
        XCTAssertTrue(aware.isDemandAware)
        let onlyMax = try DaemonConfig.parse(toml: withKeys("buffer_max = 3"), source: "test.toml").slots[0]
        XCTAssertEqual([onlyMax.bufferMin, onlyMax.bufferMax], [0, 3])
        let onlyMin = try DaemonConfig.parse(toml: withKeys("buffer_min = 2"), source: "test.toml").slots[0]
        XCTAssertEqual([onlyMin.bufferMin, onlyMin.bufferMax], [2, SlotConfig.defaultBufferMax])
        let highMin = try DaemonConfig.parse(toml: withKeys("buffer_min = 11"), source: "test.toml").slots[0]
        XCTAssertEqual([highMin.bufferMin, highMin.bufferMax], [11, 22], "a floor alone stays demand-aware: its maximum is twice it")
        XCTAssertTrue(highMin.isDemandAware)
        let fixed = try DaemonConfig.parse(toml: withKeys("buffer = 3"), source: "test.toml").slots[0]
        XCTAssertEqual([fixed.bufferMin, fixed.bufferMax], [3, 3])
        XCTAssertFalse(fixed.isDemandAware)

        XCTAssertEqual(refusal(withKeys("buffer_min = 5\nbuffer_max = 3"))?.description,
                       "test.toml: key slots[0].buffer_min: buffer_min (5) is above buffer_max (3)")
        XCTAssertEqual(refusal(withKeys("buffer = 2\nbuffer_max = 3"))?.description,
                       "test.toml: key slots[0].buffer_max: use either buffer = 2 (a fixed buffer) or buffer_min / buffer_max (demand-aware), not both")
        XCTAssertEqual(refusal(withKeys("buffer_min = -1"))?.description,
                       "test.toml: key slots[0].buffer_min: expected an integer of at least 0, got -1")
        XCTAssertEqual(refusal(withKeys("buffer_max = 1000000"))?.description,
                       "test.toml: key slots[0].buffer_max: expected an integer of at most 100, got 1000000")
        XCTAssertEqual(refusal(withKeys("buffer_max = 0"))?.description,
                       "test.toml: key slots[0].buffer_max: expected an integer of at least 1, got 0")
        XCTAssertEqual(refusal(withKeys("buffer_min = 9223372036854775807"))?.location, "key slots[0].buffer_min")
        XCTAssertEqual(refusal(withKeys("buffer_max = 2.5"))?.description,
                       "test.toml: key slots[0].buffer_max: expected an integer, got floating-point number")
        let banner = minimal.replacingOccurrences(of: "format = \"interstitial\"", with: "format = \"banner\"\nbuffer_max = 2")
        XCTAssertEqual(refusal(banner)?.description,
                       "test.toml: key slots[0].buffer_max: banner ads are loaded on demand (io.adorch.Ads.Load), not preloaded: remove buffer_max")
    }

    func testTargetingIsCheckedAndSlotKeysOverrideTheDaemons() throws {
        let config = try DaemonConfig.parse(toml: """
        [targeting]
        app_id = "com.example.game"
        keywords = ["puzzle"]
        test_mode = true

        """ + minimal.replacingOccurrences(of: "format = \"interstitial\"", with: "format = \"interstitial\"\ntargeting = { gender = \"female\", keywords = [\"racing\"] }"),
        source: "test.toml")
        let targeting = try XCTUnwrap(JSONValue.parse(Data(config.slots[0].targetingJSON.utf8)))
        XCTAssertEqual(targeting["app_id"], "com.example.game")
        XCTAssertEqual(targeting["gender"], "female")
        XCTAssertEqual(targeting["keywords"], ["racing"])
        XCTAssertTrue(config.slots[0].testMode, "the daemon-wide test_mode applies")
        XCTAssertEqual(refusal("[targeting]\ngender = \"robot\"\n" + minimal)?.description,
                       "test.toml: key targeting.gender: expected male, female or unknown")
        XCTAssertEqual(refusal("[targeting]\nage = 200\n" + minimal)?.location, "key targeting.age")
        XCTAssertEqual(refusal("[targeting]\nshoe_size = 42\n" + minimal)?.location, "key targeting.shoe_size")
        let native = minimal.replacingOccurrences(of: "format = \"interstitial\"", with: "format = \"native\"\nimage_options = { aspect_ratio = \"wide\" }")
        XCTAssertEqual(refusal(native)?.description, "test.toml: key slots[0].image_options.aspect_ratio: expected W:H such as 1.91:1, got \"wide\"")
    }

    /// A waterfall entry's privacy facts (docs/privacy.md, "Classes"): defaults, values, and
    /// bad values refused by name.
    func testWaterfallEntriesDeclareTheirPrivacyFacts() throws {
        XCTAssertEqual(try DaemonConfig.parse(toml: minimal, source: "test.toml").slots[0].waterfall[0].privacy,
                       NetworkPrivacy(gvlID: nil, servesChildren: false, servesNonPersonalized: true))
        let declared = try DaemonConfig.parse(toml: minimal + "\n  gvl_id = 755\n  serves_children = true\n  serves_non_personalized = false",
                                              source: "test.toml")
        XCTAssertEqual(declared.slots[0].waterfall[0].privacy, NetworkPrivacy(gvlID: 755, servesChildren: true, servesNonPersonalized: false))
        XCTAssertEqual(try DaemonConfig.parse(toml: minimal + "\n  gvl_id = 65535", source: "test.toml").slots[0].waterfall[0].privacy.gvlID, 65535)
        XCTAssertEqual(refusal(minimal + "\n  gvl_id = 0")?.description,
                       "test.toml: key slots[0].waterfall[0].gvl_id: expected an integer of at least 1, got 0")
        XCTAssertEqual(refusal(minimal + "\n  gvl_id = 65536")?.description,
                       "test.toml: key slots[0].waterfall[0].gvl_id: expected an integer of at most 65535, got 65536")
        XCTAssertEqual(refusal(minimal + "\n  gvl_id = \"755\"")?.description,
                       "test.toml: key slots[0].waterfall[0].gvl_id: expected an integer, got string")
        XCTAssertEqual(refusal(minimal + "\n  serves_children = \"yes\"")?.description,
                       "test.toml: key slots[0].waterfall[0].serves_children: expected true or false, got string")
        XCTAssertEqual(refusal(minimal + "\n  serves_non_personalized = 1")?.description,
                       "test.toml: key slots[0].waterfall[0].serves_non_personalized: expected true or false, got integer")
    }

    /// docs/bidding.md, "The auction": bidders, eCPMs and floors, each bad value refused by name.
    func testAuctionKeysAreReadAndTheirMistakesNamed() throws {
        let hybrid = """
        [[slots]]
        id = "s"
        format = "interstitial"
        floor = 0.75
          [[slots.waterfall]]
          plugin = "sim"
          ecpm = 4
          [[slots.waterfall]]
          plugin = "openrtb"
          bidder = true
        """
        let slot = try DaemonConfig.parse(toml: hybrid, source: "test.toml").slots[0]
        XCTAssertEqual(slot.floor, 0.75)
        XCTAssertTrue(slot.isHybrid)
        XCTAssertEqual(slot.waterfall.map(\.bidder), [false, true])
        XCTAssertEqual(slot.waterfall.map(\.ecpm), [4, nil])
        XCTAssertEqual(try DaemonConfig.parse(toml: minimal, source: "test.toml").slots[0].floor, 0, "no floor unless set")
        XCTAssertEqual(refusal(hybrid + "\n  ecpm = 2")?.description,
                       "test.toml: key slots[0].waterfall[1].ecpm: a bidder's price comes with each bid; ecpm is for waterfall entries")
        XCTAssertEqual(refusal(hybrid.replacingOccurrences(of: "ecpm = 4", with: "ecpm = -1"))?.description,
                       "test.toml: key slots[0].waterfall[0].ecpm: expected a number from 0.0 to 100000.0, got -1.0")
        XCTAssertEqual(refusal(hybrid.replacingOccurrences(of: "ecpm = 4", with: "ecpm = nan"))?.description,
                       "test.toml: key slots[0].waterfall[0].ecpm: expected a number from 0.0 to 100000.0, got nan")
        XCTAssertEqual(refusal(hybrid.replacingOccurrences(of: "floor = 0.75", with: "floor = \"1\""))?.description,
                       "test.toml: key slots[0].floor: expected a number, got string")
        XCTAssertEqual(refusal(hybrid.replacingOccurrences(of: "floor = 0.75", with: "floor = 0.75\nparallel = 2"))?.description,
                       "test.toml: key slots[0].parallel: a slot with bidders or an ecpm runs an auction (docs/bidding.md); parallel mode is for a waterfall without")
        XCTAssertEqual(refusal(hybrid.replacingOccurrences(of: "floor = 0.75", with: "").replacingOccurrences(of: "ecpm = 4", with: "")
                                .replacingOccurrences(of: "interstitial", with: "banner"))?.description,
                       "test.toml: key slots[0].waterfall[1].bidder: the auction runs for preloaded slots (rewarded, fullscreen, interstitial); s is a banner slot, its ads are loaded on demand with Load")
        XCTAssertEqual(refusal(minimal.replacingOccurrences(of: "interstitial", with: "splash") + "\n  ecpm = 2")?.description,
                       "test.toml: key slots[0].waterfall[0].ecpm: the auction runs for preloaded slots (rewarded, fullscreen, interstitial); s is a splash slot, its ads are loaded on demand with Load")
        XCTAssertNoThrow(try DaemonConfig.parse(toml: hybrid.replacingOccurrences(of: "floor = 0.75", with: "parallel = 1"), source: "test.toml"),
                         "parallel = 1 is the plain default")
        XCTAssertEqual(refusal(minimal.replacingOccurrences(of: "interstitial\"", with: "native\"\nfloor = 1"))?.description,
                       "test.toml: key slots[0].floor: floors hold the auction of preloaded slots (rewarded, fullscreen, interstitial); s is a native slot, its ads are loaded on demand with Load")
        XCTAssertEqual(refusal(hybrid.replacingOccurrences(of: "bidder = true", with: "bidder = \"yes\""))?.description,
                       "test.toml: key slots[0].waterfall[1].bidder: expected true or false, got string")
    }

    /// [privacy] (docs/privacy.md, "Inventory"): what a viewer who said nothing or little
    /// allows; defaults, each value, and bad values refused by name.
    func testThePrivacyTableSaysWhatAViewerWhoSetNothingAllows() throws {
        XCTAssertEqual(try DaemonConfig.parse(toml: minimal, source: "test.toml").scheduler.privacy,
                       PrivacySettings(unsetViewer: .nonPersonalized, gdprWhenUnknown: true))
        for (name, expected) in [("personalized", PrivacyClass.personalized), ("non_personalized", .nonPersonalized),
                                 ("child_directed", .childDirected), ("none", nil)] {
            let config = try DaemonConfig.parse(toml: "[privacy]\nunset_viewer = \"\(name)\"\ngdpr_when_unknown = false\n" + minimal, source: "test.toml")
            XCTAssertEqual(config.scheduler.privacy, PrivacySettings(unsetViewer: expected, gdprWhenUnknown: false), name)
        }
        XCTAssertEqual(refusal("[privacy]\nunset_viewer = \"ads\"\n" + minimal)?.description,
                       "test.toml: key privacy.unset_viewer: expected one of \"personalized\", \"non_personalized\", \"child_directed\", \"none\", got \"ads\"")
        XCTAssertEqual(refusal("[privacy]\nunset_viewer = 1\n" + minimal)?.description,
                       "test.toml: key privacy.unset_viewer: expected a string, got integer")
        XCTAssertEqual(refusal("[privacy]\ngdpr_when_unknown = \"yes\"\n" + minimal)?.description,
                       "test.toml: key privacy.gdpr_when_unknown: expected true or false, got string")
        XCTAssertEqual(refusal("[privacy]\nunset = \"none\"\n" + minimal)?.location, "key privacy.unset")
    }

    func testDropInsOverrideKeysAndSlotsByID() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-config-\(UUID())")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("main.toml.d"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try minimal.replacingOccurrences(of: "format = \"interstitial\"", with: "format = \"interstitial\"\nbuffer = 1").write(to: dir.appendingPathComponent("main.toml"), atomically: true, encoding: .utf8)
        try "[[slots]]\nid = \"s\"\nbuffer = 4\n".write(to: dir.appendingPathComponent("main.toml.d/10-buffer.toml"), atomically: true, encoding: .utf8)
        try "[[slots]]\nid = \"t\"\nformat = \"rewarded\"\n  [[slots.waterfall]]\n  plugin = \"sim\"\n"
            .write(to: dir.appendingPathComponent("main.toml.d/20-more.toml"), atomically: true, encoding: .utf8)
        try "ignored = true".write(to: dir.appendingPathComponent("main.toml.d/README"), atomically: true, encoding: .utf8)
        let config = try DaemonConfig.load(path: dir.appendingPathComponent("main.toml").path)
        XCTAssertEqual(config.slots.map(\.id), ["s", "t"])
        XCTAssertEqual([config.slots[0].bufferMin, config.slots[0].bufferMax], [4, 4])
        XCTAssertEqual(config.slots[0].format, .interstitial, "keys the drop-in does not name stay")
    }

    func testAccessRulesAdmitByUidGroupAndSlot() throws {
        let config = try DaemonConfig.parse(toml: """
        [access]
        ads_users = ["root", 1001]
        ads_groups = ["0"]
        manager_users = ["1002"]
        manager_groups = []

        [[slots]]
        id = "s"
        format = "interstitial"
        users = ["1001"]
          [[slots.waterfall]]
          plugin = "sim"
        """, source: "test.toml")
        let policy = config.access
        func call(_ method: String, uid: UInt32, gid: UInt32 = 5000, groups: [UInt32] = []) -> VarlinkCall {
            VarlinkCall(method: method, peer: PeerCredentials(pid: 1, uid: uid, gid: gid, groups: groups))
        }
        XCTAssertNil(policy.refusal(of: call("io.adorch.Ads.Show", uid: 1001), slot: "s"))
        XCTAssertEqual(policy.refusal(of: call("io.adorch.Ads.Show", uid: 1003), slot: nil), "not allowed to use io.adorch.Ads")
        XCTAssertNil(policy.refusal(of: call("io.adorch.Ads.ListSlots", uid: 1003, groups: [0]), slot: nil), "a supplementary group admits")
        XCTAssertEqual(policy.refusal(of: call("io.adorch.Ads.Show", uid: 1003, gid: 0), slot: "s"), "not allowed to use slot s")
        XCTAssertEqual(policy.refusal(of: call("io.adorch.Manager.GetStatus", uid: 1001), slot: nil), "not allowed to use io.adorch.Manager")
        XCTAssertNil(policy.refusal(of: call("io.adorch.Manager.GetStatus", uid: 1002), slot: nil))
        XCTAssertNil(policy.refusal(of: call("io.adorch.Manager.Reload", uid: 0), slot: nil), "root may always")
        XCTAssertNil(policy.refusal(of: call("org.varlink.service.GetInfo", uid: 1003), slot: nil), "the service interface is public")
        XCTAssertEqual(policy.refusal(of: VarlinkCall(method: "io.adorch.Ads.Show"), slot: nil), "not allowed to use io.adorch.Ads",
                       "no credentials, no admission")

        // No [access]: everyone may use Ads; Manager is root's (and adorch-admin's, where it exists).
        let open = try DaemonConfig.parse(toml: minimal, source: "test.toml").access
        XCTAssertNil(open.refusal(of: call("io.adorch.Ads.Show", uid: 4242), slot: "s"))
        XCTAssertNotNil(open.refusal(of: call("io.adorch.Manager.GetStatus", uid: 4242), slot: nil))
    }

    func testAccessRulesWithUnknownNamesOrWrongTypesAreRefused() {
        XCTAssertEqual(refusal("[access]\nads_users = [\"no-such-user-here\"]\n" + minimal)?.description,
                       "test.toml: key access.ads_users: no user \"no-such-user-here\" on this host")
        XCTAssertEqual(refusal("[access]\nads_groups = \"adorch\"\n" + minimal)?.description,
                       "test.toml: key access.ads_groups: expected an array of group names or numbers, got string")
        XCTAssertEqual(refusal("[access]\nadmins = []\n" + minimal)?.description,
                       "test.toml: key access.admins: unknown key; expected one of ads_users, ads_groups, manager_users, manager_groups")
        XCTAssertEqual(refusal(minimal.replacingOccurrences(of: "format = \"interstitial\"", with: "format = \"interstitial\"\nusers = [true]"))?.description,
                       "test.toml: key slots[0].users: expected user names or numbers, got bool")
    }
}
