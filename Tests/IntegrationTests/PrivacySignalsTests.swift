import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import AdorchTestSupport
import AdorchVarlink
import Foundation
import Logging
import XCTest

/// ABI 1.4: a load's privacy reaches the plugins. sim's own record of every load
/// ({"record_loads": path}) shows what its ad_create received, in the daemon and in a host
/// process of its own; the VAST plugin's requests to a loopback tag server carry the VAST
/// privacy macros; a plugin built for 1.3 is said to receive none.
///
/// The loads here are made two ways. Driven at the plugin host (LoadedPlugin, PluginProcess:
/// the same code the daemon runs), each LoadOrder carries privacy the test chose, so the
/// plugins' records and requests are compared field by field. Through the real daemon, the
/// engine decides each load's privacy (LoadOrder.privacy); those tests check that every load
/// reached the plugin with one, whatever the engine chose.
final class PrivacySignalsTests: XCTestCase {
    private var scratch: URL!

    override func setUpWithError() throws {
        // Below /tmp and no daemon's own folder: an isolated host may write here (docs/confinement.md).
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-privacy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: scratch) }

    private static let tcString = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA"
    private static let gpp = "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA"

    /// Three viewers' loads, one per class, each signal set somewhere.
    private static let privacies: [LoadPrivacy] = [
        LoadPrivacy(privacyClass: .personalized, signals: PrivacySignals(gdprApplies: .yes, tcString: tcString)),
        LoadPrivacy(privacyClass: .nonPersonalized, signals: PrivacySignals(gdprApplies: .no, gpp: gpp, gppSid: [2, 6], usPrivacy: "1YYN",
                                                                            nonPersonalized: true)),
        LoadPrivacy(privacyClass: .childDirected, signals: PrivacySignals(childDirected: true, underAgeOfConsent: true, maxContentRating: .g)),
    ]

    /// What sim's record should say of a load made with `privacy`.
    private func expectedRecord(_ privacy: LoadPrivacy) -> [String: Any] {
        let s = privacy.signals
        let gdpr = switch s.gdprApplies {
        case .yes: 1
        case .no: 0
        case .unknown: -1
        }
        return ["class": privacy.privacyClass.rawValue, "gdpr": gdpr, "tc_string": s.tcString ?? "", "gpp": s.gpp ?? "", "gpp_sid": s.gppSid,
                "us_privacy": s.usPrivacy ?? "", "coppa": s.childDirected ? 1 : 0, "under_age_of_consent": s.underAgeOfConsent ? 1 : 0,
                "non_personalized": s.nonPersonalized ? 1 : 0, "max_content_rating": s.maxContentRating?.rawValue ?? ""]
    }

    /// sim's record file, a JSON object a line.
    private func records(_ path: URL) throws -> [[String: Any]] {
        let text = try String(contentsOf: path, encoding: .utf8)
        return try text.split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { throw TestFailure("not an object: \(line)") }
            return object
        }
    }

    private func order(_ id: AdID, plugin: String, format: AdFormat = .interstitial, serverParameter: String, privacy: LoadPrivacy) -> LoadOrder {
        var order = LoadOrder(adID: id, plugin: plugin, slotID: "slot-\(id)", format: format,
                              entry: WaterfallEntry(plugin: plugin, serverParameter: serverParameter),
                              deadline: Moment.monotonicNow() + .seconds(10), reward: nil, testMode: true, targetingJSON: "{}")
        (order.width, order.height) = (640, 360)
        order.privacy = privacy
        return order
    }

    /// How each load of one plugin ended (loaded or failed), by ad, and a semaphore
    /// signalled at each; its other reports (media cached, events) are not kept.
    private final class Reports: Sendable {
        let all = LockedValue<[AdID: PluginReport]>([:])
        let arrived = DispatchSemaphore(value: 0)

        var handler: PluginReportHandler {
            { [self] _, ad, report in
                switch report {
                case .loaded, .loadedInvalid, .failed:
                    all.withLock { $0[ad] = report }
                    arrived.signal()
                default: break
                }
            }
        }

        /// Waits for `count` loads' answers, each an event: no fixed sleep.
        func wait(for count: Int) throws {
            for n in 0..<count where arrived.wait(timeout: .now() + .seconds(Int(20 * timeScale))) == .timedOut {
                throw TestFailure("\(n) of \(count) loads were answered, for ads \(all.withLock { $0.keys.sorted() })")
            }
        }

        func price(_ ad: AdID) -> Double? {
            if case .loaded(_, _, let price, _, _, _, _)? = all.withLock({ $0[ad] }) { return price }
            return nil
        }

        func isLoaded(_ ad: AdID) -> Bool {
            if case .loaded? = all.withLock({ $0[ad] }) { return true }
            return false
        }
    }

    func testSimReceivesEachLoadsExactSignalsInProcessAndInAHostProcess() throws {
        let sim = productsDirectory.appendingPathComponent("libadorch-plugin-sim.so").path
        let inProcessRecord = scratch.appendingPathComponent("in-process.jsonl"), hostedRecord = scratch.appendingPathComponent("hosted.jsonl")
        let inProcessReports = Reports(), hostedReports = Reports()
        let inProcess = try LoadedPlugin(name: "sim", path: sim, configJSON: #"{"record_loads": "\#(inProcessRecord.path)"}"#,
                                         logger: Logger(label: "test"), onReport: inProcessReports.handler)
        defer { inProcess.shutdown() }
        let settings = HostSettings(executable: productsDirectory.appendingPathComponent("adorch-plugin-host").path,
                                    confinement: Confinement(hiddenPaths: [], addressSpaceBytes: nil))
        let hosted = try PluginProcess(name: "sim", path: sim, configJSON: #"{"record_loads": "\#(hostedRecord.path)"}"#, settings: settings,
                                       logger: Logger(label: "test"), onReport: hostedReports.handler) { _, _ in }
        defer { hosted.shutdown() }

        // Every load fills, so each class's price is seen: non-personalised and child-directed
        // loads are paid the shares of price= set here (0.6 and 0.5).
        let parameter = "latency_ms=0 price=2 non_personalized_price=0.6 child_directed_price=0.5"
        for (plugin, reports) in [(inProcess as any PluginInstance, inProcessReports), (hosted, hostedReports)] {
            for (i, privacy) in Self.privacies.enumerated() {
                plugin.load(order(AdID(i + 1), plugin: "sim", serverParameter: parameter, privacy: privacy))
            }
            try reports.wait(for: Self.privacies.count)
            XCTAssertEqual((1...3).map { reports.price($0) }, [2, 1.2, 1], "\(plugin.info.name): the price a class is paid")
        }

        var uids: Set<String> = []
        for (name, path) in [("in process", inProcessRecord), ("in a host process", hostedRecord)] {
            let lines = try records(path)
            XCTAssertEqual(lines.count, Self.privacies.count, "\(name): one line per load")
            for (i, (line, privacy)) in zip(lines, Self.privacies).enumerated() {
                XCTAssertEqual(line["slot"] as? String, "slot-\(i + 1)", name)
                XCTAssertEqual(line["format"] as? String, "interstitial", name)
                let uid = try XCTUnwrap(line["load_uid"] as? String)
                XCTAssertTrue(uid.count == 32 && uid.allSatisfy(\.isHexDigit), uid)
                uids.insert(uid)
                let got = try XCTUnwrap(line["privacy"] as? [String: Any], "\(name): load \(i + 1) has its privacy")
                XCTAssertEqual(got as NSDictionary, expectedRecord(privacy) as NSDictionary, "\(name): load \(i + 1)")
            }
            var mode = stat()
            XCTAssertEqual(stat(path.path, &mode), 0)
            XCTAssertEqual(mode.st_mode & 0o777, 0o600, "\(name): the record holds consent strings: its owner's only")
        }
        XCTAssertEqual(uids.count, 2 * Self.privacies.count, "every load its own load_uid")
    }

    /// sim's shares, set: a non-personalised load fills 0.8 of what a personalised one does,
    /// a child-directed one 0.7; a personalised one (or one from an older host) exactly as
    /// before. Its random stream is seeded, so the counts are the same every run.
    func testSimFillsLessForLoadsThatAreNotPersonalisedAndAsBeforeForPersonalisedOnes() throws {
        let reports = Reports()
        // A copy of its own: a process holds one library once, and the test after this one
        // loads sim's file in process before this test's instance may be gone.
        let copy = scratch.appendingPathComponent("sim-fills.so")
        try FileManager.default.copyItem(at: productsDirectory.appendingPathComponent("libadorch-plugin-sim.so"), to: copy)
        let sim = try LoadedPlugin(name: "sim", path: copy.path, configJSON: "{}",
                                   logger: Logger(label: "test"), onReport: reports.handler)
        defer { sim.shutdown() }
        let perClass = 400
        for (c, privacyClass) in PrivacyClass.allCases.enumerated() {
            for i in 0..<perClass {
                let id = AdID(c * perClass + i + 1)
                sim.load(order(id, plugin: "sim", serverParameter: "latency_ms=0 seed=\(c) non_personalized_fill=0.8 child_directed_fill=0.7", privacy: LoadPrivacy(privacyClass: privacyClass, signals: PrivacySignals())))
            }
        }
        try reports.wait(for: PrivacyClass.allCases.count * perClass)
        let fills = PrivacyClass.allCases.indices.map { c in (1...perClass).filter { reports.isLoaded(AdID(c * perClass + $0)) }.count }
        XCTAssertEqual(fills[0], perClass, "personalised: fill=1 fills every load, as before")
        XCTAssertEqual(Double(fills[1]) / Double(perClass), 0.8, accuracy: 0.06, "non-personalised: \(fills[1]) of \(perClass)")
        XCTAssertEqual(Double(fills[2]) / Double(perClass), 0.7, accuracy: 0.06, "child-directed: \(fills[2]) of \(perClass)")
    }

    func testTheVASTPluginSubstitutesThePrivacyMacrosInItsTagAndTrackingURLs() throws {
        let server = try AdServer()
        let macros = "gdpr=[GDPR]&gdpr_consent=[GDPRCONSENT]&lat=[LIMITADTRACKING]&regs=[REGULATIONS]&gpp=[GPPSTRING]&gpp_sid=[GPPSECTIONID]"
        try server.put("inline.xml", server.docs.inline(prefix: "priv/[GDPR]/[GDPRCONSENT]/[LIMITADTRACKING]/[REGULATIONS]/[GPPSTRING]/[GPPSECTIONID]"))
        let reports = Reports()
        let vast = try LoadedPlugin(name: "vast", path: productsDirectory.appendingPathComponent("libadorch-plugin-vast.so").path, configJSON: "{}",
                                    logger: Logger(label: "test"), onReport: reports.handler)
        defer { vast.shutdown() }
        let parameter = "tag_url=\(server.base)/vast/inline.xml?\(macros) types=video/mp4"
        let child = LoadPrivacy(privacyClass: .childDirected, signals: PrivacySignals(gdprApplies: .yes, tcString: Self.tcString, gpp: Self.gpp,
                                                                                      gppSid: [2, 7], childDirected: true))
        let unsaid = LoadPrivacy(privacyClass: .personalized, signals: PrivacySignals(gdprApplies: .no))
        vast.load(order(1, plugin: "vast", serverParameter: parameter, privacy: child))
        vast.load(order(2, plugin: "vast", serverParameter: parameter, privacy: unsaid))
        try reports.wait(for: 2)
        XCTAssertTrue(reports.isLoaded(1) && reports.isLoaded(2), "\(reports.all.withLock { $0 })")

        let tags = try server.log().filter { $0.hasPrefix("/vast/inline.xml") }.sorted()
        // Each value encoded on its own; a list's items joined by a bare comma (the macro list's form).
        XCTAssertEqual(tags, [
            "/vast/inline.xml?gdpr=0&gdpr_consent=&lat=0&regs=&gpp=&gpp_sid=",
            "/vast/inline.xml?gdpr=1&gdpr_consent=\(Self.tcString)&lat=1&regs=coppa,gdpr&gpp=\(Self.gpp)&gpp_sid=2,7",
        ])
        // The tracking URLs the plugin fires carry them too.
        vast.notify(1, event: .impression)
        try server.wait(for: "/t/priv/1/")
        let impressions = try server.log().filter { $0.hasPrefix("/t/priv/") }
        XCTAssertEqual(impressions, ["/t/priv/1/\(Self.tcString)/1/coppa,gdpr/\(Self.gpp)/2,7/impression"])
    }

    /// A plugin built against the 1.3 header (Fixtures/minor_plugin.c), which fills every load at once.
    private func pluginBuiltFor13() throws -> String {
        let old = scratch.appendingPathComponent("libadorch-plugin-old.so").path
        let cc = try runCommand("/usr/bin/env", ["cc", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-I",
                                                 packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures/abi-1.3").path,
                                                 packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures/minor_plugin.c").path, "-o", old])
        XCTAssertEqual(cc.status, 0, cc.stderr)
        return old
    }

    func testThroughTheDaemonEveryLoadReachesSimWithItsPrivacyInBothModesAndA13PluginIsMarked() throws {
        // sim in process, and sim again from a copy of its file (one file is one plugin) in a host process.
        let hostedFile = scratch.appendingPathComponent("libadorch-plugin-hosted.so")
        try FileManager.default.copyItem(at: productsDirectory.appendingPathComponent("libadorch-plugin-sim.so"), to: hostedFile)
        let old = try pluginBuiltFor13()
        let simRecord = scratch.appendingPathComponent("sim.jsonl"), hostedRecord = scratch.appendingPathComponent("hosted.jsonl")
        let daemon = try DaemonProcess(config: """
            [plugins.sim]
            config = { record_loads = "\(simRecord.path)" }
            [plugins.hosted]
            path = "\(hostedFile.path)"
            isolation = "process"
            config = { record_loads = "\(hostedRecord.path)" }
            [plugins.old]
            path = "\(old)"

            [[slots]]
            id = "in-process"
            format = "interstitial"
            buffer = 3
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "latency_ms=1 non_personalized_fill=1 child_directed_fill=1"

            [[slots]]
            id = "hosted"
            format = "rewarded"
            buffer = 3
              [[slots.waterfall]]
              plugin = "hosted"
              server_parameter = "latency_ms=1 non_personalized_fill=1 child_directed_fill=1"

            [[slots]]
            id = "old"
            format = "interstitial"
            buffer = 1
              [[slots.waterfall]]
              plugin = "old"
            """)
        defer { _ = daemon.stop() }
        try daemon.waitFor("both sims' slots full") {
            try ["in-process", "hosted"].allSatisfy { (try daemon.slotStatus($0)["ready"]?.intValue ?? 0) >= 3 }
        }
        XCTAssertEqual(try daemon.pluginStatus("sim")["receives_privacy_signals"], true)
        XCTAssertEqual(try daemon.pluginStatus("hosted")["receives_privacy_signals"], true)
        XCTAssertEqual(try daemon.pluginStatus("old")["abi"], "1.3")
        XCTAssertEqual(try daemon.pluginStatus("old")["receives_privacy_signals"], false)

        let classes = Set(PrivacyClass.allCases.map(\.rawValue))
        for (name, path) in [("sim", simRecord), ("hosted", hostedRecord)] {
            // Each line is written inside its ad_create: read after the count, the file has them all.
            let creates = Int(try XCTUnwrap(daemon.pluginStatus(name)["stats"]?["creates"]?.intValue))
            let lines = try records(path)
            XCTAssertGreaterThanOrEqual(creates, 3)
            XCTAssertGreaterThanOrEqual(lines.count, creates, "\(name): a line for every ad_create")
            for line in lines {
                let privacy = try XCTUnwrap(line["privacy"] as? [String: Any], "\(name): every load carries its privacy: \(line)")
                XCTAssertTrue(classes.contains(privacy["class"] as? String ?? ""), "\(privacy)")
                XCTAssertEqual(Set(privacy.keys), Set(expectedRecord(Self.privacies[0]).keys), "every field of adorch_privacy")
                XCTAssertTrue([-1, 0, 1].contains(privacy["gdpr"] as? Int ?? 9), "\(privacy)")
            }
            let byClass = try XCTUnwrap(daemon.pluginStatus(name)["stats"]?["loads_by_class"])
            XCTAssertEqual(byClass["none"], 0, "\(name): no load without privacy")
        }
    }

    /// One app's viewers, as a uid of its own: sets its state, then Shows until it has `want`
    /// ads (on NoAdReady, waiting for the slot's next ad_loaded event, whatever its class),
    /// closing each. Prints {"shown": [{"network", "load_uid"}], "misses": N}.
    private static let viewerApp = #"""
    import json, sys
    sys.path.insert(0, sys.argv.pop(1))
    import varlink
    path, slot, want, privacy = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    calls = varlink.Connection(path, timeout=20)
    events = varlink.Connection(path, timeout=20)
    events.send("io.adorch.Ads.Subscribe", {"slots": [slot]}, more=True)
    assert events.receive()["parameters"]["event"]["kind"] == "subscribed"
    reply = calls.call("io.adorch.Ads.SetPrivacy", {"privacy": privacy})
    assert not varlink.error_of(reply), reply
    shown, misses = [], 0
    while len(shown) < want and misses < 300:
        reply = calls.call("io.adorch.Ads.Show", {"slot": slot, "user_id": "viewer"})
        error = varlink.error_of(reply)
        if error == "io.adorch.Ads.NoAdReady":
            misses += 1
            while events.receive(timeout=20)["parameters"]["event"]["kind"] != "ad_loaded":
                pass
            continue
        assert not error, reply
        ad = reply["parameters"]["ad"]
        shown.append({"network": ad["network"], "load_uid": ad["payload"].get("load_uid", "")})
        closed = calls.call("io.adorch.Ads.Report", {"ad_id": ad["id"], "event": "close"})
        assert not varlink.error_of(closed), closed
    print(json.dumps({"shown": shown, "misses": misses}))
    """#

    /// Acceptance 3 of the privacy work, through the real daemon: three apps as three uids with
    /// different states share one slot. Every ad each was shown was loaded under a class its
    /// state allows, sim's record of every load shows the signals that class carries, and a
    /// plugin built for ABI 1.3, first in the waterfall, is never asked for a load, as every
    /// load here needs a signal (the unset viewer's class is non-personalised).
    func testThreeAppsAsThreeUidsAreShownOnlyAdsLoadedUnderAClassTheirStatesAllow() throws {
        guard getuid() == 0 else { throw XCTSkip("the three apps run as three uids: that needs root") }
        let old = try pluginBuiltFor13()
        let record = scratch.appendingPathComponent("sim.jsonl")
        // Consented (no opt-out, the GDPR does not apply), opted out of sale, and a child; a
        // child-directed ad goes to whoever may be shown a non-personalised one (docs/privacy.md).
        let apps: [(uid: Int, privacy: JSONValue, allowed: Set<String>)] = [
            (4341, ["gdpr_applies": false, "us_privacy": "1YNN"], ["personalized", "non_personalized", "child_directed"]),
            (4342, ["gdpr_applies": false, "us_privacy": "1YYN"], ["non_personalized", "child_directed"]),
            (4343, ["child_directed": true], ["child_directed"]),
        ]
        let daemon = try DaemonProcess(config: """
            [access]
            ads_users = [\(apps.map { "\"\($0.uid)\"" }.joined(separator: ", "))]

            [plugins.sim]
            config = { record_loads = "\(record.path)" }
            [plugins.old]
            path = "\(old)"

            [[slots]]
            id = "shared"
            format = "interstitial"
            buffer = 6
              [[slots.waterfall]]
              plugin = "old"
              serves_children = true
              [[slots.waterfall]]
              plugin = "sim"
              server_parameter = "latency_ms=1..5 non_personalized_fill=1 child_directed_fill=1"
              serves_children = true
            """)
        defer { _ = daemon.stop() }
        XCTAssertEqual(try daemon.pluginStatus("old")["receives_privacy_signals"], false)

        let want = 8, socket = daemon.socket
        let results = LockedValue<[Int: JSONValue]>([:])
        let failures = LockedValue<[String]>([])
        DispatchQueue.concurrentPerform(iterations: apps.count) { i in
            do {
                let argv = try pythonClient(Self.viewerApp, as: apps[i].uid, [socket, "shared", "\(want)", apps[i].privacy.jsonString])
                let run = try runCommand(argv[0], Array(argv.dropFirst()))
                guard run.status == 0, let reply = JSONValue.parse(Data(run.stdout.utf8)) else { throw TestFailure("uid \(apps[i].uid): \(run.stderr)") }
                results.withLock { $0[apps[i].uid] = reply }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])

        let loads = try records(record)
        let byUID = Dictionary(loads.compactMap { line in (line["load_uid"] as? String).map { ($0, line) } }, uniquingKeysWith: { first, _ in first })
        for app in apps {
            let shown = try XCTUnwrap(results.withLock { $0[app.uid] }?["shown"]?.arrayValue, "uid \(app.uid)")
            XCTAssertEqual(shown.count, want, "uid \(app.uid) was shown \(want) ads")
            for ad in shown {
                XCTAssertEqual(ad["network"]?.stringValue, "sim", "uid \(app.uid): the 1.3 plugin filled nothing")
                let load = try XCTUnwrap(byUID[ad["load_uid"]?.stringValue ?? ""], "uid \(app.uid): the shown ad is in sim's record: \(ad)")
                let privacyClass = (load["privacy"] as? [String: Any])?["class"] as? String ?? ""
                XCTAssertTrue(app.allowed.contains(privacyClass), "uid \(app.uid), allowed \(app.allowed.sorted()), was shown an ad loaded as \(privacyClass)")
            }
        }
        // What each class's loads told the network: a child-directed load says COPPA, a
        // non-personalised one says so, and a personalised one carries the one viewer who allows it.
        var seen: Set<String> = []
        for load in loads {
            let privacy = try XCTUnwrap(load["privacy"] as? [String: Any], "\(load)")
            let privacyClass = privacy["class"] as? String ?? ""
            seen.insert(privacyClass)
            switch privacyClass {
            case "child_directed": XCTAssertEqual(privacy["coppa"] as? Int, 1, "\(privacy)")
            case "non_personalized": XCTAssertEqual(privacy["non_personalized"] as? Int, 1, "\(privacy)")
            case "personalized":
                XCTAssertEqual(privacy["us_privacy"] as? String, "1YNN", "\(privacy)")
                XCTAssertEqual(privacy["gdpr"] as? Int, 0, "\(privacy)")
                XCTAssertEqual(privacy["non_personalized"] as? Int, 0, "\(privacy)")
            default: XCTFail("a load of no class: \(privacy)")
            }
        }
        XCTAssertEqual(seen, ["personalized", "non_personalized", "child_directed"], "every app's class was loaded")
        // The 1.3 plugin fills every load it is asked for at once: had it been asked, its ads
        // would have loaded (and, first in the waterfall, been shown).
        let events = try XCTUnwrap(daemon.call("io.adorch.Ads.ListEvents", ["limit": 512])["events"]?.arrayValue)
        let loaded = events.filter { $0["kind"]?.stringValue == "ad_loaded" }
        XCTAssertGreaterThan(loaded.count { $0["network"]?.stringValue == "sim" }, 0)
        XCTAssertEqual(events.filter { ["ad_loaded", "ad_failed"].contains($0["kind"]?.stringValue) && $0["network"]?.stringValue == "old" }.count, 0,
                       "the 1.3 plugin was asked for a load that needs a signal")
    }
}
