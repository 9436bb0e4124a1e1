import AdorchEngine
import XCTest

@testable import AdorchDaemon

/// Frequency rules in the config (docs/caps.md): read as written, the default taken by the
/// slots that set none, and every mistake refused naming its key.
final class CapConfigTests: XCTestCase {
    private func config(_ text: String) throws(ConfigError) -> DaemonConfig {
        try DaemonConfig.parse(toml: "[plugins.sim]\n" + text, source: "caps.toml")
    }

    private func slot(_ keys: String, format: String = "interstitial", entry: String = "") -> String {
        """
        [[slots]]
        id = "s"
        format = "\(format)"
        \(keys)
          [[slots.waterfall]]
          plugin = "sim"
          \(entry)
        """
    }

    private func refusal(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ConfigError? {
        do {
            _ = try config(text)
            XCTFail("accepted: \(text)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func testRulesAreReadAsWritten() throws {
        let c = try config(slot("""
            caps = [{ impressions = 3, per = "1h" }, { impressions = 10, per = "1d", scope = "slot" }]
            pacing = "30s"
            count_on = "show"
            """, entry: "caps = [{ impressions = 1, per = \"90m\" }]\n  pacing = { interval = \"500ms\", scope = \"slot\" }"))
        let s = c.slots[0]
        XCTAssertEqual(s.caps, [.cap(3, per: .seconds(3600)), .cap(10, per: .seconds(86_400), scope: .slot), .pacing(.seconds(30))])
        XCTAssertEqual(s.capCounting, .show)
        XCTAssertEqual(s.waterfall[0].caps, [.cap(1, per: .seconds(5400)), .pacing(.milliseconds(500), scope: .slot)])
        XCTAssertEqual(s.capRuleNames, ["3 per 1h per user", "10 per 1d per slot", "pacing 30s per user",
                                        "sim: 1 per 90m per user", "sim: pacing 500ms per slot"])
    }

    func testTheDefaultHoldsTheShowSlotsThatSetNoRulesOfTheirOwn() throws {
        let text = """
            [frequency]
            caps = [{ impressions = 5, per = "1d" }]
            pacing = "1m"
            count_on = "show"
            """ + "\n" + slot("") + "\n" + slot("caps = []", format: "rewarded").replacingOccurrences(of: "id = \"s\"", with: "id = \"own\"")
            + "\n" + slot("pacing = \"off\"").replacingOccurrences(of: "id = \"s\"", with: "id = \"nopace\"")
            + "\n" + slot("", format: "banner").replacingOccurrences(of: "id = \"s\"", with: "id = \"b\"")
        let c = try config(text)
        let byID = Dictionary(uniqueKeysWithValues: c.slots.map { ($0.id, $0) })
        XCTAssertEqual(byID["s"]?.caps, [.cap(5, per: .seconds(86_400)), .pacing(.seconds(60))])
        XCTAssertEqual(byID["s"]?.capCounting, .show)
        XCTAssertEqual(byID["own"]?.caps, [.pacing(.seconds(60))], "caps = [] turns the default caps off, not its pacing")
        XCTAssertEqual(byID["nopace"]?.caps, [.cap(5, per: .seconds(86_400))])
        XCTAssertEqual(byID["b"]?.caps, [], "a Load slot has no Shows to hold")
    }

    func testMistakesAreRefusedNamingTheKey() {
        let cases: [(String, String, String)] = [
            (slot("caps = [{ impressions = 0, per = \"1h\" }]"), "slots[0].caps[0].impressions", "must be from 1"),
            (slot("caps = [{ impressions = -2, per = \"1h\" }]"), "slots[0].caps[0].impressions", "must be from 1"),
            (slot("caps = [{ impressions = 3, per = \"0s\" }]"), "slots[0].caps[0].per", "must be longer than 0"),
            (slot("caps = [{ impressions = 3, per = \"-1h\" }]"), "slots[0].caps[0].per", "expected a whole number and a unit"),
            (slot("caps = [{ impressions = 3, per = \"1 hour\" }]"), "slots[0].caps[0].per", "expected a whole number and a unit"),
            (slot("caps = [{ impressions = 3, per = \"32d\" }]"), "slots[0].caps[0].per", "must be at most 31d"),
            (slot("caps = [{ impressions = 3 }]"), "slots[0].caps[0].per", "is required"),
            (slot("caps = [{ per = \"1h\" }]"), "slots[0].caps[0].impressions", "is required"),
            (slot("caps = [{ impressions = 3, per = \"1h\", scope = \"device\" }]"), "slots[0].caps[0].scope", "expected \"user\""),
            (slot("caps = [{ impressions = 3, per = \"1h\", every = \"1h\" }]"), "slots[0].caps[0].every", "unknown key"),
            (slot("caps = 3"), "slots[0].caps", "expected an array of tables"),
            (slot("pacing = \"0ms\""), "slots[0].pacing", "must be longer than 0"),
            (slot("pacing = 30"), "slots[0].pacing", "expected a window"),
            (slot("pacing = { interval = \"5s\", scope = \"app\" }"), "slots[0].pacing.scope", "expected \"user\""),
            (slot("count_on = \"click\""), "slots[0].count_on", "expected one of \"impression\", \"show\""),
            (slot("caps = [{ impressions = 200, per = \"1h\" }]\npacing = \"30s\""), "slots[0].caps[0].impressions",
             "200 per 1h per user can never be reached: pacing 30s per user lets at most 120 ads into 1h"),
            (slot("", entry: "count_on = \"show\""), "slots[0].waterfall[0].count_on", "unknown key"),
            (slot("pacing = \"1s\"", format: "banner"), "slots[0].pacing", "frequency rules hold Shows"),
            (slot("", format: "native", entry: "caps = [{ impressions = 1, per = \"1h\" }]"), "slots[0].waterfall[0].caps", "frequency rules hold Shows"),
            ("[frequency]\ncaps = [{ impressions = 1, per = \"1y\" }]\n" + slot(""), "frequency.caps[0].per", "expected a whole number"),
            ("[frequency]\nwindow = \"1h\"\n" + slot(""), "frequency.window", "unknown key"),
        ]
        for (text, key, message) in cases {
            guard let error = refusal(text) else { continue }
            XCTAssertEqual(error.location, "key \(key)", "\(text)\n→ \(error)")
            XCTAssertTrue(error.message.contains(message), "\(key): \(error.message)")
        }
    }

    func testACapTheDefaultsPacingMakesUnreachableIsRefusedOnTheSlot() {
        let error = refusal("[frequency]\npacing = \"10m\"\n" + slot("caps = [{ impressions = 4, per = \"30m\" }]"))
        XCTAssertEqual(error?.location, "key slots[0].caps[0].impressions")
        XCTAssertTrue(error?.message.contains("pacing 10m per user lets at most 3 ads into 30m") == true, error?.message ?? "")
        // A per-slot cap is not bounded by a per-user pacing: many users may each be paced.
        XCTAssertNoThrow(try config("[frequency]\npacing = \"10m\"\n" + slot("caps = [{ impressions = 40, per = \"30m\", scope = \"slot\" }]")))
    }

    func testEntriesOfOneNetworkInstanceMustShareTheirRules() {
        let text = slot("", entry: "ad_unit_id = \"std\"\n  caps = [{ impressions = 1, per = \"1h\" }]\n"
                        + "  [[slots.waterfall]]\n  plugin = \"sim\"\n  ad_unit_id = \"std\"\n  caps = [{ impressions = 2, per = \"1h\" }]")
        let error = refusal(text)
        XCTAssertEqual(error?.location, "key slots[0].waterfall[1].caps")
        XCTAssertTrue(error?.message.contains("sim/std is waterfall[0]'s network instance too") == true, error?.message ?? "")
    }

    func testWindowsReadBackAsTheyAreNamed() {
        for text in ["1ms", "999ms", "1s", "90s", "2m", "90m", "1h", "36h", "1d", "31d"] {
            XCTAssertEqual(FrequencyRule.window(text).map(FrequencyRule.text), text)
        }
        XCTAssertEqual(FrequencyRule.window("60s").map(FrequencyRule.text), "1m")
        for bad in ["", "s", "1", "1.5h", "1H", "+1h", " 1h", "1h ", "1w", "99999999999999d"] { XCTAssertNil(FrequencyRule.window(bad), bad) }
    }
}
