import AdorchVarlink
import Foundation
import XCTest

/// Frequency caps through the real daemon (docs/caps.md): a per-user pacing of 2 s and a cap
/// of 3 per 10 s; two users Show in a loop, the caps survive a kill -9, and bad input is
/// refused before it reaches the history.
final class FrequencyCapIntegrationTests: XCTestCase {
    private static let pacing = 2.0, window = 10.0, capImpressions = 3
    private let config = simConfig(slots: """
        [[slots]]
        id = "paced"
        format = "interstitial"
        buffer = 2
        pacing = "2s"
        caps = [{ impressions = 3, per = "10s" }]
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "fill=1 latency_ms=5..20 ttl_s=3600 seed=3"
        """)

    /// When a call was sent and when its answer came: the daemon's moment lies in between.
    private struct Span {
        var sent: Double
        var answered: Double
    }

    private var start = ContinuousClock.now
    private func clock() -> Double { (ContinuousClock.now - start).inSeconds }

    /// One user's ads so far: when the Show of each ad seen was made (an ad counts from the
    /// moment its Show took it).
    private struct Viewer {
        var name: String
        var impressions: [Span] = []
        /// A Show at or after this is let in: the retry_after a Capped answer gave.
        var nextTry = 0.0
        var capped = 0

        /// The rule that holds this user at `at` (daemon time), the stricter, and when it frees.
        func hold(at: Double, by edge: (Span) -> Double) -> (rule: String, frees: Double)? {
            var holds: [(String, Double)] = []
            if let last = impressions.last, edge(last) + pacing > at { holds.append(("pacing 2s per user", edge(last) + pacing)) }
            let recent = impressions.filter { edge($0) + window > at }
            let most = FrequencyCapIntegrationTests.capImpressions
            if recent.count >= most { holds.append(("3 per 10s per user", edge(recent[recent.count - most]) + window)) }
            return holds.max { $0.1 < $1.1 }
        }
    }

    private func show(_ daemon: DaemonProcess, _ user: String) throws -> (Span, VarlinkClient.Reply) {
        let client = try daemon.client()
        let sent = clock()
        let reply = try client.call("io.adorch.Ads.Show", ["slot": "paced", "user_id": .string(user)])
        return (Span(sent: sent, answered: clock()), reply)
    }

    /// A Capped answer is right if the rule a test-side count says holds is the one named,
    /// and retry_after_ms lands where that rule frees, given when the calls were made.
    /// `slack`: a millisecond for the rounding up; after a restart two more, as the file keeps
    /// times to the millisecond and ties them to the clock again.
    private func checkCapped(_ reply: VarlinkClient.Reply, at span: Span, _ viewer: Viewer, slack: Double = 0.001,
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(reply.error, "io.adorch.Ads.Capped", "\(viewer.name): \(reply.parameters)", file: file, line: line)
        let retry = Double(reply.parameters["retry_after_ms"]?.intValue ?? -1) / 1000
        // The earliest the rule could free, and the latest, from when impressions and this Show reached the daemon.
        guard let early = viewer.hold(at: span.sent, by: \.sent), let late = viewer.hold(at: span.answered, by: \.answered) else {
            return XCTFail("\(viewer.name) was capped at \(span) though no rule holds: \(reply.parameters)", file: file, line: line)
        }
        let rule = reply.parameters["rule"]?.stringValue ?? ""
        XCTAssertTrue([early.rule, late.rule].contains(rule), "\(viewer.name): \(rule), expected \(early.rule)", file: file, line: line)
        XCTAssertGreaterThanOrEqual(retry, early.frees - span.answered - slack, "\(viewer.name): \(reply.parameters)", file: file, line: line)
        XCTAssertLessThanOrEqual(retry, late.frees - span.sent + slack, "\(viewer.name): \(reply.parameters)", file: file, line: line)
    }

    func testTwoUsersInALoopGetExactlyTheAllowedAdsAndCappedOtherwiseAndAKillChangesNothing() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-caps-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        var daemon = try DaemonProcess(config: config, stateDir: state)
        defer { daemon.stop() }
        try daemon.waitFor("paced full") { try daemon.slotStatus("paced")["ready"]?.intValue == 2 }
        start = ContinuousClock.now
        var viewers = [Viewer(name: "ann"), Viewer(name: "bob")]
        // Each user Shows as soon as the daemon says it may, until each had 4 ads: the 4th
        // comes only when the first leaves the 10 s window.
        while viewers.contains(where: { $0.impressions.count < 4 }) {
            for i in viewers.indices where viewers[i].impressions.count < 4 && clock() >= viewers[i].nextTry {
                let (span, reply) = try show(daemon, viewers[i].name)
                if reply.error == "io.adorch.Ads.NoAdReady" {
                    XCTFail("\(viewers[i].name) found no ad at \(span): the slot was not refilled before its hold ended")
                    try daemon.waitFor("an ad") { try daemon.slotStatus("paced")["ready"]?.intValue ?? 0 > 0 }
                    continue
                }
                if reply.error != nil {
                    checkCapped(reply, at: span, viewers[i])
                    viewers[i].capped += 1
                    viewers[i].nextTry = span.answered + Double(reply.parameters["retry_after_ms"]?.intValue ?? 0) / 1000
                    // Asking again at once changes nothing: capped still, by no later rule.
                    let (again, second) = try show(daemon, viewers[i].name)
                    checkCapped(second, at: again, viewers[i])
                    continue
                }
                // Let in: no rule held it by the time it reached the daemon.
                XCTAssertNil(viewers[i].hold(at: span.answered, by: \.sent), "\(viewers[i].name) got an ad at \(span) that a rule holds")
                let id = try XCTUnwrap(reply.parameters["ad"]?["id"]?.stringValue)
                _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "impression"])
                viewers[i].impressions.append(span)
                _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "close"])
            }
            // Until the next user may Show: the time the daemon named, not a guess.
            let next = viewers.filter { $0.impressions.count < 4 }.map(\.nextTry).min() ?? 0
            if next > clock() { Thread.sleep(forTimeInterval: next - clock()) }
        }
        for viewer in viewers {
            // 0, 2 and 4 s by pacing, then capped until the first impression leaves the window.
            let gaps = zip(viewer.impressions.dropFirst(), viewer.impressions).map { $0.sent - $1.sent }
            XCTAssertGreaterThanOrEqual(viewer.impressions[3].answered - viewer.impressions[0].sent, Self.window, "\(viewer.name): \(viewer.impressions)")
            XCTAssertTrue(gaps.allSatisfy { $0 >= Self.pacing - 0.05 }, "\(viewer.name): \(gaps)")
            XCTAssertGreaterThanOrEqual(viewer.capped, 3, "\(viewer.name) was told to wait for pacing twice and the cap once")
        }
        let metrics = try daemon.call("io.adorch.Manager.GetMetrics")["text"]?.stringValue ?? ""
        XCTAssertTrue(metrics.contains(#"adorch_shows_capped_total{slot="paced",rule="3 per 10s per user"}"#), metrics)

        // A third user takes three ads as fast as pacing lets them: then the cap holds for
        // about 6 s, longer than pacing would.
        // ann and bob are both capped now: the scheduler holds no ads for them, so a user it
        // did not expect may find none at first, and has one as soon as it is refilled.
        viewers.append(Viewer(name: "cat"))
        var misses = 0
        while viewers[2].impressions.count < 3 {
            let (span, reply) = try show(daemon, "cat")
            if reply.error == "io.adorch.Ads.NoAdReady" {
                misses += 1
                XCTAssertEqual(misses, 1, "only a user the scheduler did not expect misses, once: \(reply.parameters)")
                try daemon.waitFor("an ad for cat") { try daemon.slotStatus("paced")["ready"]?.intValue ?? 0 > 0 }
                continue
            }
            if reply.error != nil {
                checkCapped(reply, at: span, viewers[2])
                Thread.sleep(forTimeInterval: Double(reply.parameters["retry_after_ms"]?.intValue ?? 0) / 1000)
                continue
            }
            let id = try XCTUnwrap(reply.parameters["ad"]?["id"]?.stringValue)
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "impression"])
            viewers[2].impressions.append(span)
        }
        let (before, held) = try show(daemon, "cat")
        checkCapped(held, at: before, viewers[2])
        XCTAssertEqual(held.parameters["rule"]?.stringValue, "3 per 10s per user")

        // kill -9, and a new daemon on the same state directory: the caps hold as before.
        kill(daemon.pid, SIGKILL)
        XCTAssertEqual(daemon.stop(), SIGKILL)
        daemon = try DaemonProcess(config: config, stateDir: state)
        try daemon.waitFor("paced full") { try daemon.slotStatus("paced")["ready"]?.intValue == 2 }
        let (after, reply) = try show(daemon, "cat")
        checkCapped(reply, at: after, viewers[2], slack: 0.003)
        XCTAssertEqual(reply.parameters["rule"]?.stringValue, "3 per 10s per user", "the cap did not reset with the daemon")
        let listed = try daemon.call("io.adorch.Ads.ListSlots", ["user_id": "cat"])["slots"]?.arrayValue?.first { $0["id"]?.stringValue == "paced" }
        XCTAssertEqual(listed?["capped"]?["rule"]?.stringValue, "3 per 10s per user")
        XCTAssertEqual(listed?["capped"]?["kind"]?.stringValue, "cap")
        let caps = try daemon.call("io.adorch.Manager.GetCaps", ["slot": "paced", "user_id": "cat"])["rules"]?.arrayValue ?? []
        XCTAssertEqual(caps.first { $0["rule"]?.stringValue == "3 per 10s per user" }?["counted"]?.intValue, 3)
        // ann's pacing and window read back too: whatever holds her now is what her history says.
        let (annSpan, ann) = try show(daemon, "ann")
        if ann.error != nil { checkCapped(ann, at: annSpan, viewers[0], slack: 0.003) } else { XCTAssertNil(viewers[0].hold(at: annSpan.answered, by: \.sent)) }
        // cat is let in once the daemon's retry_after_ms has passed.
        Thread.sleep(forTimeInterval: Double(reply.parameters["retry_after_ms"]?.intValue ?? 0) / 1000)
        try daemon.waitFor("an ad for cat") { try daemon.slotStatus("paced")["ready"]?.intValue ?? 0 > 0 }
        XCTAssertNil(try show(daemon, "cat").1.error)
    }

    func testAUserIDOverTheLimitIsRefusedBeforeItReachesTheHistory() throws {
        let daemon = try DaemonProcess(config: config)
        defer { daemon.stop() }
        try daemon.waitFor("paced full") { try daemon.slotStatus("paced")["ready"]?.intValue == 2 }
        let long = String(repeating: "u", count: 257)
        for (method, parameters) in [("io.adorch.Ads.Show", ["slot": "paced", "user_id": JSONValue.string(long)]),
                                     ("io.adorch.Ads.ListSlots", ["user_id": .string(long)]),
                                     ("io.adorch.Manager.GetCaps", ["slot": "paced", "user_id": .string(long)])] {
            let (error, p) = try daemon.callExpectingError(method, parameters)
            XCTAssertTrue(error.hasSuffix(".InvalidParameter"), "\(method): \(error)")
            XCTAssertEqual(p["parameter"]?.stringValue, "user_id", method)
            XCTAssertTrue(p["message"]?.stringValue?.contains("256 bytes") == true, "\(method): \(p)")
        }
        // A user id at the limit is counted, and only it is in the file.
        let id = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "paced", "user_id": .string(String(long.dropLast()))])["ad"]?["id"]?.stringValue)
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "impression"])
        let rows = try runCommand("/usr/bin/python3", ["-c", """
            import sqlite3, sys
            for (user,) in sqlite3.connect(sys.argv[1]).execute("SELECT user_id FROM impressions"): print(len(user))
            """, daemon.dir.appendingPathComponent("state/caps.sqlite").path])
        XCTAssertEqual(rows.status, 0, rows.stderr)
        XCTAssertEqual(rows.stdout.split(separator: "\n"), ["256"])
        XCTAssertEqual(try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "paced", "user_id": .string(String(long.dropLast()))]).0,
                       "io.adorch.Ads.Capped")
    }

    private func sqlite(_ path: String, _ statements: String) throws -> String {
        let result = try runCommand("/usr/bin/python3", ["-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            for row in db.execute(sys.argv[2]) if not sys.argv[2].lstrip().upper().startswith("INSERT") else []: print(*row)
            if sys.argv[2].lstrip().upper().startswith("INSERT"): db.executescript(sys.argv[2])
            db.commit()
            """, path, statements])
        guard result.status == 0 else { throw TestFailure("sqlite: \(result.stderr)") }
        return result.stdout
    }

    /// A history that cannot be opened for a passing reason (here its WAL's path is taken by a
    /// folder: SQLite cannot open it) is not moved aside: the start fails, saying why, and the
    /// file and its impressions are as they were for the next start. A clean stop merges the
    /// WAL into the file.
    func testAHistoryThatCannotBeOpenedNowFailsTheStartAndIsLeftAsItWas() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-caps-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        let file = state.appendingPathComponent("caps.sqlite").path
        do {
            let daemon = try DaemonProcess(config: config, stateDir: state)
            try daemon.waitFor("paced full") { try daemon.slotStatus("paced")["ready"]?.intValue == 2 }
            let id = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "paced", "user_id": "dee"])["ad"]?["id"]?.stringValue)
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "impression"])
            XCTAssertEqual(daemon.stop(), 0)
        }
        for database in [file, state.appendingPathComponent("rewards.sqlite").path] {
            let wal = (try? FileManager.default.attributesOfItem(atPath: database + "-wal")[.size] as? Int) ?? 0
            XCTAssertEqual(wal, 0, "a clean stop leaves \(database)'s WAL merged")
        }
        try? FileManager.default.removeItem(atPath: file + "-wal")
        try FileManager.default.createDirectory(atPath: file + "-wal", withIntermediateDirectories: false)
        XCTAssertThrowsError(try DaemonProcess(config: config, stateDir: state)) { error in
            XCTAssertTrue("\(error)".contains("holds the frequency caps' history, caps.sqlite, which cannot be opened now"), "\(error)")
            XCTAssertFalse("\(error)".contains("Fatal error"), "\(error)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.contains(".broken-") }, [])
        try FileManager.default.removeItem(atPath: file + "-wal")
        XCTAssertEqual(try sqlite(file, "SELECT user_id FROM impressions"), "dee\n", "the history is as it was")
    }

    func testADamagedHistoryNeitherStopsTheDaemonNorHoldsLongerThanAWindow() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-caps-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let file = state.appendingPathComponent("caps.sqlite").path
        try "hello".write(toFile: file, atomically: true, encoding: .utf8)
        do {
            let daemon = try DaemonProcess(config: config, stateDir: state)
            defer { daemon.stop() }
            XCTAssertTrue(daemon.log.contains("frequency caps: \(file) could not be opened"), daemon.log)
            let aside = try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasPrefix("caps.sqlite.broken-") }
            XCTAssertEqual(aside.count, 1, "the damaged file is kept aside for a look")
            try daemon.waitFor("paced full") { try daemon.slotStatus("paced")["ready"]?.intValue == 2 }
            let id = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "paced", "user_id": "dee"])["ad"]?["id"]?.stringValue)
            _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "impression"])
        }
        XCTAssertEqual(try sqlite(file, "SELECT user_id FROM impressions"), "dee\n", "a new file counts from then on")
        // Rows a clock far ahead wrote, one a little ahead, and damaged ones.
        let nowMS = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try sqlite(file, """
            INSERT INTO impressions VALUES ('paced', 'sim', '', 0, 'far', \(nowMS + 10 * 86_400_000));
            INSERT INTO impressions VALUES ('paced', 'sim', '', 0, 'near', \(nowMS + 5000));
            INSERT INTO impressions VALUES ('paced', 'sim', '', 0, 'huge', 10000000000000000);
            INSERT INTO impressions VALUES ('paced', 'sim', '', 0, 'text', 'x');
            INSERT INTO impressions VALUES ('paced', 'sim', '', 'root', 'baduid', \(nowMS));
            INSERT INTO impressions VALUES ('paced', 'sim', '', 0, X'00ff', \(nowMS));
            """)
        let daemon = try DaemonProcess(config: config, stateDir: state)
        defer { daemon.stop() }
        try daemon.waitFor("paced full") { try daemon.slotStatus("paced")["ready"]?.intValue == 2 }
        // A row from a little ahead counts as now: pacing holds near for 2 s at most, never 5 + 2.
        let (error, held) = try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "paced", "user_id": "near"])
        XCTAssertEqual(error, "io.adorch.Ads.Capped")
        XCTAssertLessThanOrEqual(held["retry_after_ms"]?.intValue ?? .max, 2000)
        XCTAssertEqual(held["rule"]?.stringValue, "pacing 2s per user")
        for user in ["far", "huge", "text", "baduid"] {
            XCTAssertNil(try daemon.client().call("io.adorch.Ads.Show", ["slot": "paced", "user_id": .string(user)]).error, user)
            try daemon.waitFor("an ad") { try daemon.slotStatus("paced")["ready"]?.intValue ?? 0 > 0 }
        }
        // Once it serves, the daemon deletes what no rule counts: the rows far ahead and the damaged ones.
        try daemon.waitFor("the damaged rows gone") { !(try sqlite(file, "SELECT user_id FROM impressions").contains("far")) }
        XCTAssertFalse(try sqlite(file, "SELECT count(*) FROM impressions WHERE typeof(at_ms) != 'integer'").hasPrefix("1"))
    }

    func testADaemonThatCannotStartLeavesTheRunningOnesHistoryAlone() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-caps-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        let daemon = try DaemonProcess(config: config, stateDir: state)
        defer { daemon.stop() }
        try daemon.waitFor("paced full") { try daemon.slotStatus("paced")["ready"]?.intValue == 2 }
        let id = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "paced", "user_id": "eve"])["ad"]?["id"]?.stringValue)
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(id), "event": "impression"])
        // A second daemon on the same socket and state, with no rules at all: it cannot serve.
        let second = try runCommand(productsDirectory.appendingPathComponent("adorchd").path, [
            "--socket", daemon.socket, "--state-dir", state.path, "--plugin-dir", productsDirectory.path, "--log-target", "console"])
        XCTAssertNotEqual(second.status, 0, second.stderr)
        XCTAssertTrue(second.stderr.contains("is in use by another adorchd"), second.stderr)
        XCTAssertEqual(try sqlite(state.appendingPathComponent("caps.sqlite").path, "SELECT user_id FROM impressions"), "eve\n")
        XCTAssertEqual(try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "paced", "user_id": "eve"]).0, "io.adorch.Ads.Capped")
    }

    func testInvalidRulesStopTheDaemonWithExit78NamingTheKey() throws {
        let bad = config.replacingOccurrences(of: #"caps = [{ impressions = 3, per = "10s" }]"#,
                                              with: #"caps = [{ impressions = 3, per = "0s" }]"#)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-caps-bad-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("bad.toml").path
        try bad.write(toFile: path, atomically: true, encoding: .utf8)
        let adorchd = productsDirectory.appendingPathComponent("adorchd").path
        for extra in [["--check-config"], ["--socket", dir.appendingPathComponent("s.sock").path, "--state-dir", dir.path]] {
            let result = try runCommand(adorchd, ["--config", path, "--plugin-dir", productsDirectory.path] + extra)
            XCTAssertEqual(result.status, 78, "\(extra): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("bad.toml: key slots[0].caps[0].per: must be longer than 0"), result.stderr)
        }
    }
}
