import AdorchPrivacy
import AdorchVarlink
import Foundation
import XCTest

/// Issue 32, privacy state set by apps (docs/privacy.md, "Setting a viewer's state"), on the
/// real daemon: SetPrivacy and GetPrivacy, per-user over per-app, a restart, every kind of bad
/// string refused by name with nothing changed, another uid kept apart, the bound, a full
/// disk, and a journal that never holds a consent string whole. The strings are the vectors
/// of shared/data/consent, read at run time.
final class PrivacyStateTests: XCTestCase {
    /// The string of vector `id` on a page of shared/data/consent: an entry's code block
    /// (`### T2-01 — …`) or a table row's second cell (`| X-01 | \`…\` |`).
    private func vector(_ page: String, _ id: String) throws -> String {
        let url = packageRoot.appendingPathComponent("../shared/data/consent/\(page)").standardizedFileURL
        guard let text = try? String(contentsOf: url, encoding: .utf8) else {
            throw XCTSkip("the consent vectors are in the shared folder beside the package, and \(url.path) is absent")
        }
        let lines = text.components(separatedBy: "\n")
        if let heading = lines.firstIndex(where: { $0.hasPrefix("### \(id) ") }),
           let fence = lines[heading...].firstIndex(where: { $0.hasPrefix("```") }) {
            return lines[fence + 1]
        }
        if let row = lines.first(where: { $0.hasPrefix("| \(id) |") }) {
            let cell = row.split(separator: "|")[1].trimmingCharacters(in: .whitespaces)
            return String(cell.dropFirst().dropLast())
        }
        throw TestFailure("\(page) has no vector \(id)")
    }

    private struct Vectors {
        /// Valid: a TC string, a GPP string with sections 2 and 6, a US Privacy string.
        var tc, gpp, uspv1GPP: String
        /// Refused: malformed, truncated, TCF v1.1, a GPP string whose header and sections disagree.
        var malformed, truncated, version1, badGPP: String
    }

    private func vectors() throws -> Vectors {
        Vectors(tc: try vector("tcf-vectors.md", "T2-01"), gpp: try vector("gpp-vectors.md", "G-04"), uspv1GPP: try vector("gpp-vectors.md", "G-02"),
                malformed: try vector("tcf-vectors.md", "X-10"), truncated: try vector("tcf-vectors.md", "X-01"),
                version1: try vector("tcf-vectors.md", "V1-01"), badGPP: try vector("gpp-vectors.md", "GX-04"))
    }

    private func get(_ daemon: DaemonProcess, _ userID: String? = nil) throws -> (privacy: JSONValue?, source: String?) {
        let reply = try daemon.call("io.adorch.Ads.GetPrivacy", userID.map { ["user_id": .string($0)] } ?? [:])
        var privacy = reply["privacy"]
        if case .null? = privacy { privacy = nil }
        return (privacy, reply["source"]?.stringValue)
    }

    /// No consent string of `strings` is in the daemon's log whole.
    private func assertLogHoldsNone(of strings: [String], _ daemon: DaemonProcess, file: StaticString = #filePath, line: UInt = #line) {
        let log = daemon.log
        for string in strings where string.count > 4 {
            XCTAssertFalse(log.contains(string), "the log holds the consent string \(string.prefix(6))… whole", file: file, line: line)
        }
    }

    /// Outside attack on issue 32 (A3): started by hand with a umask of 022, the daemon still
    /// keeps its state directory and the privacy records (user ids, consent strings) to itself.
    func testTheStateDirectoryAndThePrivacyRecordsAreOwnerOnlyWhateverTheUmask() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-umask-\(getpid())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let stateDir = scratch.appendingPathComponent("made/by/hand")
        let before = umask(0o022)
        defer { umask(before) }
        let daemon = try DaemonProcess(stateDir: stateDir)
        defer { _ = daemon.stop() }
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["gdpr_applies": false, "us_privacy": "1YNN"]])
        func mode(_ path: String) throws -> mode_t {
            var info = stat()
            guard stat(path, &info) == 0 else { throw TestFailure("\(path): \(String(cString: strerror(errno)))") }
            return info.st_mode & 0o777
        }
        XCTAssertEqual(try mode(stateDir.path), 0o700)
        XCTAssertEqual(try mode(stateDir.deletingLastPathComponent().path), 0o755, "the folders on the way are as mkdir -p makes them")
        let files = try FileManager.default.contentsOfDirectory(atPath: stateDir.path).filter { $0.hasPrefix("privacy") }
        XCTAssertTrue(files.contains("privacy.sqlite"), "\(files)")
        for file in files { XCTAssertEqual(try mode(stateDir.appendingPathComponent(file).path), 0o600, file) }
    }

    func testSetGetPerUserOverAppAndClear() throws {
        let v = try vectors()
        let daemon = try DaemonProcess()
        XCTAssertEqual(try get(daemon).source, "none")
        XCTAssertNil(try get(daemon).privacy)

        let app: JSONValue = ["gdpr_applies": true, "tc_string": .string(v.tc), "us_privacy": "1YNN", "max_content_rating": "PG"]
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["privacy": app])
        let read = try get(daemon)
        XCTAssertEqual(read.source, "app")
        XCTAssertEqual(read.privacy, ["gdpr_applies": true, "tc_string": .string(v.tc), "us_privacy": "1YNN", "max_content_rating": "PG",
                                      "child_directed": false, "under_age_of_consent": false, "non_personalized": false])
        // A user the app set nothing for has the app's.
        XCTAssertEqual(try get(daemon, "u1").source, "app")

        let user: JSONValue = ["gpp": .string(v.gpp), "gpp_sid": [2, 6], "non_personalized": true, "gdpr_applies": false]
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": user])
        let forUser = try get(daemon, "u1")
        XCTAssertEqual(forUser.source, "user")
        XCTAssertEqual(forUser.privacy?["gpp"]?.stringValue, v.gpp)
        XCTAssertEqual(forUser.privacy?["gpp_sid"], [2, 6])
        XCTAssertEqual(forUser.privacy?["non_personalized"], true)
        XCTAssertNil(forUser.privacy?["tc_string"], "a user's record replaces the app's whole, nothing merged")
        XCTAssertEqual(try get(daemon, "u2").source, "app")
        XCTAssertEqual(try get(daemon).source, "app", "a call without a user id has the app's")

        // Clearing the user's leaves the app's; clearing the app's leaves none.
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": .null])
        XCTAssertEqual(try get(daemon, "u1").source, "app")
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", [:])
        XCTAssertEqual(try get(daemon, "u1").source, "none")
        XCTAssertEqual(try get(daemon).source, "none")

        // The journal has the line, the strings redacted and no user id.
        let log = daemon.log
        XCTAssertTrue(log.contains("privacy: uid 0 set the signals of the app: gdpr_applies=yes tc_string=\(ConsentRedaction.redact(v.tc))"), log)
        XCTAssertTrue(log.contains("privacy: uid 0 set the signals of one of its users: gdpr_applies=no gpp=\(ConsentRedaction.redact(v.gpp)) gpp_sid=2 sections non_personalized"), log)
        XCTAssertTrue(log.contains("privacy: uid 0 cleared the signals of the app"), log)
        XCTAssertFalse(log.contains("\"u1\"") || log.contains(" u1 ") || log.contains("u1\n"), "SetPrivacy's lines never name the user id")
        assertLogHoldsNone(of: [v.tc, v.gpp], daemon)
    }

    /// Show and Load take a privacy of their own, decoded the same way.
    func testShowAndLoadTakeAPrivacyForTheCall() throws {
        let v = try vectors()
        let daemon = try DaemonProcess()
        try daemon.waitFor("rewarded_main full") { try daemon.slotStatus("rewarded_main")["ready"]?.intValue ?? 0 > 0 }
        let good: JSONValue = ["gdpr_applies": false, "us_privacy": "1NNN", "tc_string": .string(v.tc)]
        let shown = try daemon.call("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": "u1", "privacy": good])
        XCTAssertNotNil(shown["ad"]?["id"]?.stringValue)
        _ = try daemon.call("io.adorch.Ads.Load", ["slot": "banner_main", "privacy": good])
        for method in ["io.adorch.Ads.Show", "io.adorch.Ads.Load"] {
            let (error, parameters) = try daemon.callExpectingError(method, ["slot": "banner_main", "privacy": ["tc_string": .string(v.truncated)]])
            XCTAssertEqual(error, "io.adorch.Ads.InvalidParameter")
            XCTAssertEqual(parameters["parameter"]?.stringValue, "privacy.tc_string", "\(method)")
        }
        // A call's own privacy is not kept.
        XCTAssertEqual(try get(daemon, "u1").source, "none")
        assertLogHoldsNone(of: [v.tc, v.truncated], daemon)
    }

    func testEveryBadStringIsRefusedByNameAndChangesNothing() throws {
        let v = try vectors()
        let daemon = try DaemonProcess()
        let kept: JSONValue = ["tc_string": .string(v.tc), "gdpr_applies": true]
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": kept])
        let before = try get(daemon, "u1")
        let oversized = String(v.tc) + String(repeating: "A", count: ConsentStringBound.maxBytes)
        // 4,091 sections in 8 KiB, its header listing 24...4114 in one range, and a gpp_sid naming them all.
        let packed = "DBABkcqlYA" + String(repeating: "~A", count: 4091)
        func ids(_ range: ClosedRange<Int>) -> JSONValue { .array(range.map { .int(Int64($0)) }) }
        let sections = ConsentStringBound.maxGPPSections
        let cases: [(what: String, privacy: JSONValue, parameter: String, says: String?)] = [
            ("malformed", ["tc_string": .string(v.malformed)], "privacy.tc_string", "not a base64url character"),
            ("truncated", ["tc_string": .string(v.truncated)], "privacy.tc_string", "truncated"),
            ("TCF v1.1", ["tc_string": .string(v.version1)], "privacy.tc_string", "TCF v1.1"),
            ("oversized", ["tc_string": .string(oversized)], "privacy.tc_string", "at most \(ConsentStringBound.maxBytes) bytes"),
            ("a control character", ["tc_string": .string(v.tc + "\n")], "privacy.tc_string", "control characters"),
            ("bad GPP", ["gpp": .string(v.badGPP)], "privacy.gpp", "sections"),
            ("oversized GPP", ["gpp": .string(oversized)], "privacy.gpp", "at most"),
            ("gpp_sid not in the header", ["gpp": .string(v.uspv1GPP), "gpp_sid": [2]], "privacy.gpp_sid", "not in the GPP header"),
            ("gpp_sid twice", ["gpp": .string(v.uspv1GPP), "gpp_sid": [6, 6]], "privacy.gpp_sid", "twice"),
            ("GPP sections over the bound", ["gpp": .string(packed), "gpp_sid": ids(24...4114)], "privacy.gpp",
             "4091 sections, more than the \(sections) a GPP string may carry"),
            ("gpp_sid over the bound", ["gpp": .string(v.uspv1GPP), "gpp_sid": ids(1...(sections + 1))], "privacy.gpp_sid",
             "\(sections + 1) ids, more than the \(sections) sections"),
            ("gpp_sid without gpp", ["gpp_sid": [6]], "privacy.gpp_sid", "needs gpp"),
            ("US Privacy version", ["us_privacy": "2---"], "privacy.us_privacy", "version"),
            ("US Privacy case", ["us_privacy": "1y--"], "privacy.us_privacy", "must be"),
            ("a rating", ["max_content_rating": "R"], "privacy.max_content_rating", "G, PG, T, MA"),
            ("an unknown key", ["gdpr": true], "privacy.gdpr", "no such field"),
            ("a wrong type", ["gdpr_applies": "yes"], "privacy.gdpr_applies", "bool"),
            ("not an object", "consent", "privacy", "Privacy"),
        ]
        for c in cases {
            let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": c.privacy])
            XCTAssertEqual(error, "io.adorch.Ads.InvalidParameter", c.what)
            XCTAssertEqual(parameters["parameter"]?.stringValue, c.parameter, c.what)
            let message = parameters["message"]?.stringValue ?? ""
            if let says = c.says { XCTAssertTrue(message.contains(says), "\(c.what): \(message)") }
            XCTAssertFalse(message.count > 4 && message.contains(oversized.prefix(40)), "\(c.what): the refusal quotes the string")
            let after = try get(daemon, "u1")
            XCTAssertEqual(after.source, before.source, c.what)
            XCTAssertEqual(after.privacy, before.privacy, "\(c.what) changed the record")
        }
        assertLogHoldsNone(of: [v.tc, v.malformed, v.truncated, v.version1, v.badGPP, v.uspv1GPP, packed], daemon)
    }

    func testRecordsSurviveAKillAndACleanRestart() throws {
        let v = try vectors()
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-privacy-state-\(UUID().uuidString.prefix(8))")
        addTeardownBlock { try? FileManager.default.removeItem(at: state) }
        var daemon = try DaemonProcess(stateDir: state)
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["privacy": ["tc_string": .string(v.tc), "gdpr_applies": true]])
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["gpp": .string(v.gpp), "gpp_sid": [6], "child_directed": true]])
        let app = try get(daemon), user = try get(daemon, "u1")
        // The OK came after the write: a kill right after it loses nothing.
        kill(daemon.pid, SIGKILL)
        XCTAssertEqual(daemon.stop(), SIGKILL)
        daemon = try DaemonProcess(stateDir: state)
        XCTAssertEqual(try get(daemon).privacy, app.privacy)
        XCTAssertEqual(try get(daemon, "u1").privacy, user.privacy)
        XCTAssertEqual(try get(daemon, "u1").source, "user")
        XCTAssertTrue(daemon.log.contains("privacy: 2 records of 1 uids read back"), daemon.log)
        // A clean stop merges the WAL into the file, and it reads back again.
        XCTAssertEqual(daemon.stop(), 0)
        let wal = state.appendingPathComponent("privacy.sqlite-wal").path
        XCTAssertEqual((try? FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int) ?? 0, 0, "the WAL is empty after a clean stop")
        daemon = try DaemonProcess(stateDir: state)
        XCTAssertEqual(try get(daemon, "u1").privacy, user.privacy)
        assertLogHoldsNone(of: [v.tc, v.gpp], daemon)
    }

    /// `sql` run on the state directory's privacy file, the daemon stopped, as another program would.
    private func editPrivacyFile(_ state: URL, _ sql: String) throws {
        let script = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()"
        let run = try runCommand("/usr/bin/python3", ["-c", script, state.appendingPathComponent("privacy.sqlite").path, sql])
        XCTAssertEqual(run.status, 0, run.stderr)
    }

    func testARecordThatNoLongerDecodesIsDroppedAndADamagedFileMovedAside() throws {
        let v = try vectors()
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-privacy-state-\(UUID().uuidString.prefix(8))")
        addTeardownBlock { try? FileManager.default.removeItem(at: state) }
        var daemon = try DaemonProcess(stateDir: state)
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["privacy": ["tc_string": .string(v.tc)]])
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["us_privacy": "1YNN"]])
        XCTAssertEqual(daemon.stop(), 0)
        // As if a stricter decoder now refused what was taken before: a TCF v1.1 string.
        try editPrivacyFile(state, "UPDATE privacy SET tc_string = '\(v.version1)' WHERE user_id = ''")
        daemon = try DaemonProcess(stateDir: state)
        XCTAssertEqual(try get(daemon).source, "none", "the record that no longer decodes does not apply")
        XCTAssertEqual(try get(daemon, "u1").source, "user", "the others do")
        let log = daemon.log
        // One line for all it dropped: how many, by field, and the first's uid and reason.
        XCTAssertTrue(log.contains("privacy: 1 records of 1 uids read back from "), log)
        XCTAssertTrue(log.contains("; 1 dropped from the file too, as they no longer decode (1 by privacy.tc_string); the first, uid 0's record"
            + " for the app: privacy.tc_string: core.version: a TCF v1.1 string"), log)
        assertLogHoldsNone(of: [v.tc, v.version1], daemon)
        XCTAssertEqual(daemon.stop(), 0)
        // Dropped from the file too: the next start reads only the other.
        daemon = try DaemonProcess(stateDir: state)
        XCTAssertFalse(daemon.log.contains("no longer decode"), daemon.log)
        XCTAssertEqual(daemon.stop(), 0)

        // A file of another schema is moved aside with its WAL, and the daemon starts without records.
        try editPrivacyFile(state, "DROP TABLE privacy; CREATE TABLE privacy (uid INTEGER)")
        daemon = try DaemonProcess(stateDir: state)
        XCTAssertTrue(daemon.log.contains("privacy: \(state.path)/privacy.sqlite could not be opened"), daemon.log)
        let names = try FileManager.default.contentsOfDirectory(atPath: state.path)
        XCTAssertTrue(names.contains { $0.hasPrefix("privacy.sqlite.broken-") }, "\(names)")
        XCTAssertEqual(try get(daemon, "u1").source, "none")
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["us_privacy": "1NNN"]])
        XCTAssertEqual(try get(daemon, "u1").source, "user", "the next SetPrivacy starts a new file")
    }

    /// `call METHOD PARAMETERS` as another uid: its reply printed.
    private static let client = #"""
    import json, sys
    sys.path.insert(0, sys.argv.pop(1))
    import varlink
    connection = varlink.Connection(sys.argv[1], timeout=20)
    connection.send(sys.argv[2], json.loads(sys.argv[3]))
    print(json.dumps(connection.receive()))
    """#

    private func call(as uid: Int, _ daemon: DaemonProcess, _ method: String, _ parameters: JSONValue = [:]) throws -> JSONValue {
        let argv = try pythonClient(Self.client, as: uid, [daemon.socket, method, parameters.jsonString])
        let result = try runCommand(argv[0], Array(argv.dropFirst()))
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(JSONValue.parse(Data(result.stdout.utf8)), result.stdout)
    }

    func testAnotherUidSeesNoneOfItAndCannotChangeIt() throws {
        guard getuid() == 0 else { throw XCTSkip("the other app runs as another uid: that needs root") }
        let v = try vectors()
        let daemon = try DaemonProcess()
        let other = 4321
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["privacy": ["tc_string": .string(v.tc), "gdpr_applies": true]])
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["gpp": .string(v.gpp), "gpp_sid": [2]]])
        let mine = try get(daemon), mineForUser = try get(daemon, "u1")

        // The other app has none, for the app or for a user of the same name.
        for parameters: JSONValue in [[:], ["user_id": "u1"]] {
            let reply = try call(as: other, daemon, "io.adorch.Ads.GetPrivacy", parameters)
            XCTAssertEqual(reply["parameters"]?["source"]?.stringValue, "none", "\(reply)")
            XCTAssertFalse(reply.jsonString.contains(v.tc) || reply.jsonString.contains(v.gpp), "\(reply)")
        }
        // What it sets and clears is its own.
        XCTAssertNil(try call(as: other, daemon, "io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["non_personalized": true]])["error"])
        XCTAssertNil(try call(as: other, daemon, "io.adorch.Ads.SetPrivacy", [:])["error"])
        XCTAssertEqual(try call(as: other, daemon, "io.adorch.Ads.GetPrivacy", ["user_id": "u1"])["parameters"]?["source"]?.stringValue, "user")
        XCTAssertEqual(try get(daemon).privacy, mine.privacy)
        XCTAssertEqual(try get(daemon, "u1").privacy, mineForUser.privacy)
        XCTAssertEqual(try get(daemon, "u1").privacy?["non_personalized"], false)

        // adorchctl, as a third app's user, sets, reads and clears that app's own.
        let set = try adorchctl(as: 4322, daemon, ["privacy", "set", "--user", "u1", #"{"us_privacy":"1NYN","child_directed":true}"#])
        XCTAssertEqual(set.status, 0, set.stderr)
        let got = try adorchctl(as: 4322, daemon, ["privacy", "get", "--user", "u1"])
        XCTAssertTrue(got.stdout.contains("source: user") && got.stdout.contains("us_privacy: 1NYN"), got.stdout + got.stderr)
        let refused = try adorchctl(as: 4322, daemon, ["privacy", "set", #"{"us_privacy":"2---"}"#])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("io.adorch.Ads.InvalidParameter"), refused.stderr)
        XCTAssertEqual(try adorchctl(as: 4322, daemon, ["privacy", "clear", "--user", "u1"]).status, 0)
        XCTAssertTrue(try adorchctl(as: 4322, daemon, ["privacy", "get", "--user", "u1"]).stdout.contains("source: none"))
        XCTAssertEqual(try get(daemon, "u1").privacy, mineForUser.privacy)

        // Neither the status, the events nor the metrics carry any of it.
        let status = try daemon.status().jsonString
        let events = JSONValue.object(try daemon.call("io.adorch.Ads.ListEvents", ["limit": 512])).jsonString
        let metrics = try daemon.call("io.adorch.Manager.GetMetrics")["text"]?.stringValue ?? ""
        for text in [status, events, metrics] {
            XCTAssertFalse(text.contains(v.tc) || text.contains(v.gpp) || text.contains("tc_string") || text.contains("gdpr_applies"))
        }
        assertLogHoldsNone(of: [v.tc, v.gpp], daemon)
    }

    func testTheBoundRefusesOneRecordMore() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: "", daemon: "") + "\n[limits]\nmax_privacy_records_per_uid = 2\n")
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["privacy": ["non_personalized": true]])
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["child_directed": true]])
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.SetPrivacy", ["user_id": "u2", "privacy": ["child_directed": true]])
        XCTAssertEqual(error, "io.adorch.Ads.TooManyPrivacyRecords")
        XCTAssertEqual(parameters["limit"]?.intValue, 2)
        XCTAssertTrue(parameters["message"]?.stringValue?.contains("max_privacy_records_per_uid") == true, "\(parameters)")
        XCTAssertEqual(try get(daemon, "u2").source, "app", "the refused record was not kept")
        // Replacing and clearing are always possible; a cleared record makes room.
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["under_age_of_consent": true]])
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1"])
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u2", "privacy": ["child_directed": true]])
        XCTAssertEqual(try get(daemon, "u2").source, "user")
        let limits = try daemon.status()["limits"]
        XCTAssertEqual(limits?["max_privacy_records_per_uid"]?.intValue, 2)
        XCTAssertEqual(limits?["privacy_records_refused"]?.intValue, 1)
    }

    func testAFullDiskIsANamedErrorAndChangesNothing() throws {
        let v = try vectors()
        let disk = try smallDisk(megabytes: 8)
        let daemon = try DaemonProcess(stateDir: disk.appendingPathComponent("state"))
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["privacy": ["tc_string": .string(v.tc)]])
        let filler = disk.appendingPathComponent("filler").path
        fillDisk(filler)
        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["gpp": .string(v.gpp)]])
        XCTAssertEqual(error, "io.adorch.Ads.PrivacyNotStored", "\(parameters)")
        XCTAssertEqual(try get(daemon, "u1").source, "app", "the record the disk could not take does not apply")
        try FileManager.default.removeItem(atPath: filler)
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["user_id": "u1", "privacy": ["gpp": .string(v.gpp)]])
        XCTAssertEqual(try get(daemon, "u1").source, "user")
        assertLogHoldsNone(of: [v.tc, v.gpp], daemon)
    }
}
