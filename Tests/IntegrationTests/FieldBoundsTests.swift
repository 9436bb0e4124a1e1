import AdorchVarlink
import Foundation
import XCTest

/// Issue 20, bounded fields: no string an app sends may grow the events, the journal or the
/// reward ledger past its documented bound (docs/rules.md, "Bounded fields").
final class FieldBoundsTests: XCTestCase {
    private func text(_ bytes: Int) -> String { String(repeating: "a", count: bytes) }

    private func events(_ daemon: DaemonProcess) throws -> [JSONValue] {
        try daemon.call("io.adorch.Ads.ListEvents", ["limit": 512])["events"]?.arrayValue ?? []
    }

    func testEachBoundedFieldOverItsLimitIsRefusedByNameAndChangesNothing() throws {
        let daemon = try DaemonProcess()
        try daemon.waitFor("rewarded_main full") {
            let slot = try daemon.slotStatus("rewarded_main")
            return slot["ready"] == slot["buffer"]
        }
        let ready = try daemon.slotStatus("rewarded_main")["ready"]?.intValue
        let interactive: [String: JSONValue] = [
            "slot": "interactive_main", "creative_url": "https://creative.invalid/unit.js", "ad_parameters": [:], "slot_type": "midroll",
        ]
        func with(_ base: [String: JSONValue], _ changes: [String: JSONValue]) -> [String: JSONValue] { base.merging(changes) { $1 } }
        let cases: [(method: String, parameters: [String: JSONValue], parameter: String, limit: Int?)] = [
            ("Show", ["slot": "rewarded_main", "user_id": .string(text(257))], "user_id", 256),
            ("Show", ["slot": "rewarded_main", "user_id": "u", "reward": ["name": .string(text(65))]], "reward.name", 64),
            ("Show", ["slot": "rewarded_main", "user_id": "u", "reward": ["extra": .string(text(1025))]], "reward.extra", 1024),
            ("ListRewards", ["user_id": .string(text(257))], "user_id", 256),
            ("Load", ["slot": "banner_main", "targeting": ["keywords": .array(Array(repeating: .string(text(100)), count: 50))]], "targeting", 4096),
            ("InitInteractive", with(interactive, ["creative_url": .string("https://creative.invalid/" + text(2048))]), "creative_url", 2048),
            ("InitInteractive", with(interactive, ["ad_parameters": ["p": .string(text(8192))]]), "ad_parameters", 8192),
            ("InitInteractive", with(interactive, ["creative_url": "file:///etc/passwd"]), "creative_url", nil),
            ("InitInteractive", with(interactive, ["creative_url": "unit.js"]), "creative_url", nil),
        ]
        for (method, parameters, parameter, limit) in cases {
            let (error, reply) = try daemon.callExpectingError("io.adorch.Ads.\(method)", parameters)
            XCTAssertEqual(error, "io.adorch.Ads.InvalidParameter", "\(method) \(parameter)")
            XCTAssertEqual(reply["parameter"]?.stringValue, parameter, method)
            let message = reply["message"]?.stringValue ?? ""
            XCTAssertTrue(message.contains(limit.map { "at most \($0) bytes" } ?? "expected an absolute http or https URL"), message)
        }
        // Nothing happened: no ad taken, no session, no event carrying the long values.
        XCTAssertEqual(try daemon.slotStatus("rewarded_main")["ready"]?.intValue, ready)
        XCTAssertFalse(try events(daemon).contains { ["ad_shown", "session_event"].contains($0["kind"]?.stringValue ?? "") })
        XCTAssertFalse(daemon.log.contains(text(257)))

        // At the bounds exactly, all is taken, down to the ledger.
        let (user, name, extra) = (String(repeating: "é", count: 128), text(64), text(1024))
        let shown = try daemon.call("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": .string(user),
                                                           "reward": ["name": .string(name), "amount": 1, "extra": .string(extra)]])
        let ad = try XCTUnwrap(shown["ad"]?["id"]?.stringValue)
        _ = try daemon.call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"])
        var rows: [JSONValue] = []
        try daemon.waitFor("the reward in the ledger") {
            rows = try daemon.call("io.adorch.Ads.ListRewards", ["user_id": .string(user)])["rewards"]?.arrayValue ?? []
            return !rows.isEmpty
        }
        XCTAssertEqual(rows.first?["reward_name"]?.stringValue, name)
        XCTAssertEqual(rows.first?["extra"]?.stringValue, extra)
    }

    /// A string field holding a control character is refused by name, so no app can forge a
    /// journal line (or pass "\u{0}" as a non-empty user id); the string values inside the
    /// JSON objects are never written raw anywhere and may hold anything.
    func testControlCharactersInAStringFieldAreRefusedByNameAndForgeNoLine() throws {
        let daemon = try DaemonProcess()
        try daemon.waitFor("rewarded_main full") {
            let slot = try daemon.slotStatus("rewarded_main")
            return slot["ready"] == slot["buffer"]
        }
        let ready = try daemon.slotStatus("rewarded_main")["ready"]?.intValue
        let forged = "\nadorchd[1]: FORGED reward granted to root\r"
        let interactive: [String: JSONValue] = [
            "slot": "interactive_main", "creative_url": "https://creative.invalid/unit.js", "ad_parameters": [:], "slot_type": "midroll",
        ]
        let cases: [(method: String, parameters: [String: JSONValue], parameter: String)] = [
            ("Show", ["slot": "rewarded_main", "user_id": .string("u" + forged)], "user_id"),
            ("Show", ["slot": "rewarded_main", "user_id": "\u{0}"], "user_id"),
            ("Show", ["slot": "rewarded_main", "user_id": "u\u{7F}"], "user_id"),
            ("Show", ["slot": "rewarded_main", "user_id": "u", "reward": ["name": .string("coins" + forged)]], "reward.name"),
            ("Show", ["slot": "rewarded_main", "user_id": "u", "reward": ["extra": "a\tb"]], "reward.extra"),
            ("ListRewards", ["user_id": "u\u{0}"], "user_id"),
            ("InitInteractive", interactive.merging(["creative_url": .string("https://creative.invalid/u.js" + forged)]) { $1 }, "creative_url"),
        ]
        for (method, parameters, parameter) in cases {
            let (error, reply) = try daemon.callExpectingError("io.adorch.Ads.\(method)", parameters)
            XCTAssertEqual(error, "io.adorch.Ads.InvalidParameter", "\(method) \(parameter)")
            XCTAssertEqual(reply["parameter"]?.stringValue, parameter, method)
            XCTAssertEqual(reply["message"]?.stringValue, "control characters are not allowed (U+0000 to U+001F and U+007F)", method)
        }
        XCTAssertEqual(try daemon.slotStatus("rewarded_main")["ready"]?.intValue, ready, "no ad taken")
        XCTAssertFalse(try events(daemon).contains { ["ad_shown", "session_event"].contains($0["kind"]?.stringValue ?? "") })
        XCTAssertFalse(daemon.log.contains("FORGED"), daemon.log)

        // Inside ad_parameters a control character is just data: the session is made.
        let session = try daemon.call("io.adorch.Ads.InitInteractive",
                                      interactive.merging(["ad_parameters": ["note": .string("line 1" + forged)]]) { $1 })
        XCTAssertNotNil(session["session_id"]?.stringValue)
        XCTAssertFalse(daemon.log.contains("FORGED"), daemon.log)
    }

    /// The defect: twelve 1 MB user ids left in the ledger by an older daemon made every
    /// Subscribe end with ReaderTooSlow right after `subscribed`, restart after restart.
    func testOversizedRowsLeftByAnOlderDaemonDoNotBreakSubscribe() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-bounds-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        XCTAssertEqual(try DaemonProcess(stateDir: state).stop(), 0, "the first run creates the ledger")
        let insert = """
        import sqlite3, sys
        db = sqlite3.connect(sys.argv[1])
        rows = [(f"old-{i}", "u" * 1048576) for i in range(12)] + [("old-small", "u-small")]
        for trans, user in rows:
            db.execute("INSERT INTO rewards (trans_id, ad_id, user_id, slot, network, reward_name, reward_amount, extra, granted_at, "
                       "acknowledged) VALUES (?, ?, ?, 'rewarded_main', 'sim', 'coins', 10, '', '2026-01-01 00:00:00.000', 0)",
                       (trans, "ad-" + trans, user))
        db.commit()
        """
        let inserted = try runCommand("/usr/bin/python3", ["-c", insert, state.appendingPathComponent("adorch.sqlite").path])
        XCTAssertEqual(inserted.status, 0, inserted.stderr)

        let daemon = try DaemonProcess(stateDir: state)
        XCTAssertEqual(daemon.log.components(separatedBy: "12 unacknowledged rewards have a user id, reward name or extra over the field bounds").count,
                       2, daemon.log)
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards")["rewards"]?.arrayValue?.compactMap { $0["trans_id"]?.stringValue },
                       ["old-small"])
        let events = try daemon.client()
        XCTAssertNil(try events.call("io.adorch.Ads.Subscribe", [:], more: true).error)
        XCTAssertEqual(try events.nextReply().parameters["event"]?["detail"]?["trans_id"]?.stringValue, "old-small", "the one within bounds")
        // The stream lives on: a later event arrives (a too slow reader would have been cut off).
        try daemon.waitFor("rewarded_main ready") { try daemon.slotStatus("rewarded_main")["ready"]?.intValue ?? 0 > 0 }
        let ad = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": "u-new"])["ad"]?["id"]?.stringValue)
        while true {
            let reply = try events.nextReply()
            XCTAssertNil(reply.error)
            if reply.parameters["event"]?["ad_id"]?.stringValue == ad { break }
        }
        // The operator can still clear them by transaction id.
        _ = try daemon.call("io.adorch.Ads.AckReward", ["trans_id": "old-0"])
    }
}
