import AdorchEngine
import AdorchVarlink
import Foundation
import XCTest

/// Issues 20 and 32, who sees what (docs/rules.md, "Who sees what"): an app sees the events
/// and rewards of its own ads, and of the slots it may use only the events of ads no app
/// holds; the Manager side sees everything. Each app is
/// a small Python client run as its own uid with setpriv, as AccessTests does with adorchctl.
final class VisibilityTests: XCTestCase {
    /// `call METHOD PARAMETERS`: one call, its reply printed. `watch SLOT USER`: Subscribe,
    /// print the first reply, wait for a line on stdin, then Show on SLOT and print every
    /// event up to that Show's ad_shown: all the stream held before it, redeliveries included.
    private static let client = #"""
    import json, sys
    sys.path.insert(0, sys.argv.pop(1))
    import varlink
    def Connection(path):
        return varlink.Connection(path, timeout=20)
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "call":
        connection = Connection(path)
        connection.send(sys.argv[3], json.loads(sys.argv[4]))
        print(json.dumps(connection.receive()))
    else:
        stream = Connection(path)
        stream.send("io.adorch.Ads.Subscribe", {}, more=True)
        print(json.dumps(stream.receive()), flush=True)
        sys.stdin.readline()
        caller = Connection(path)
        caller.send("io.adorch.Ads.Show", {"slot": sys.argv[3], "user_id": sys.argv[4]})
        ad = caller.receive()["parameters"]["ad"]["id"]
        seen = []
        while True:
            reply = stream.receive()
            if "error" in reply:
                sys.exit("the stream ended: " + json.dumps(reply))
            seen.append(reply["parameters"]["event"])
            if seen[-1].get("kind") == "ad_shown" and seen[-1].get("ad_id") == ad:
                break
        print(json.dumps(seen), flush=True)
    """#

    private func arguments(_ uid: Int, _ daemon: DaemonProcess, _ rest: [String]) throws -> [String] {
        try pythonClient(Self.client, as: uid, [daemon.socket] + rest)
    }

    /// One call as `uid`: its reply's parameters, or the error's name.
    private func call(as uid: Int, _ daemon: DaemonProcess, _ method: String, _ parameters: JSONValue = [:]) throws -> JSONValue {
        let argv = try arguments(uid, daemon, ["call", method, parameters.jsonString])
        let result = try runCommand(argv[0], Array(argv.dropFirst()))
        XCTAssertEqual(result.status, 0, result.stderr)
        let reply = try XCTUnwrap(JSONValue.parse(Data(result.stdout.utf8)), result.stdout)
        if let error = reply["error"]?.stringValue { throw TestFailure("\(method) as uid \(uid): \(error) \(reply)") }
        return reply["parameters"] ?? [:]
    }

    /// A subscription of `uid`'s, open until `events` is called.
    private final class Watcher {
        let process = Process()
        let input = Pipe(), output = Pipe(), errors = Pipe()

        init(_ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
            process.standardInput = input
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let first = try line()
            guard JSONValue.parse(Data(first.utf8))?["parameters"]?["event"]?["kind"]?.stringValue == "subscribed" else {
                throw TestFailure("Subscribe: \(first) \(String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self))")
            }
        }

        private func line() throws -> String {
            var bytes = Data()
            while true {
                let byte = output.fileHandleForReading.readData(ofLength: 1)
                if byte.isEmpty || byte == Data("\n".utf8) { break }
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// What the stream held, up to the marker Show's ad_shown.
        func events() throws -> [JSONValue] {
            input.fileHandleForWriting.write(Data("go\n".utf8))
            let text = try line()
            process.waitUntilExit()
            guard process.terminationStatus == 0, let events = JSONValue.parse(Data(text.utf8))?.arrayValue else {
                throw TestFailure("watcher: \(text) \(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))")
            }
            return events
        }
    }

    private func watch(as uid: Int, _ daemon: DaemonProcess, marker slot: String) throws -> Watcher {
        try Watcher(try arguments(uid, daemon, ["watch", slot, "marker-\(uid)"]))
    }

    private func isReward(_ event: JSONValue) -> Bool { event["kind"]?.stringValue == "reward_granted" }
    private func slots(_ events: [JSONValue]) -> Set<String> { Set(events.compactMap { $0["slot"]?.stringValue }) }

    func testAnAppSeesOnlyItsOwnRewardsAndTheEventsOfItsSlots() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [access]
        manager_users = ["4330"]

        [[slots]]
        id = "r"
        format = "rewarded"
        buffer = 3
        reward_name = "coins"
        reward_amount = 10
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"

        [[slots]]
        id = "private"
        format = "interstitial"
        buffer = 1
        users = ["4322"]
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """))
        try daemon.waitFor("slots full") { try daemon.allSlotsFull() }
        let live4321 = try watch(as: 4321, daemon, marker: "r")
        let live4322 = try watch(as: 4322, daemon, marker: "r")

        // 4321 earns a reward in the shared slot; 4322 is shown an ad in its own slot.
        let shown = try call(as: 4321, daemon, "io.adorch.Ads.Show", ["slot": "r", "user_id": "u-4321"])
        let ad = try XCTUnwrap(shown["ad"]?["id"]?.stringValue)
        _ = try call(as: 4321, daemon, "io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"])
        _ = try call(as: 4322, daemon, "io.adorch.Ads.Show", ["slot": "private"])
        var trans = ""
        try daemon.waitFor("the reward in the ledger") {
            trans = try daemon.call("io.adorch.Ads.ListRewards")["rewards"]?.arrayValue?.first?["trans_id"]?.stringValue ?? ""
            return !trans.isEmpty
        }

        // Live: the reward reached its holder only; the private slot's events only its user.
        let heard4321 = try live4321.events(), heard4322 = try live4322.events()
        XCTAssertEqual(heard4321.filter(isReward).compactMap { $0["ad_id"]?.stringValue }, [ad])
        XCTAssertEqual(heard4321.first(where: isReward)?["user_id"]?.stringValue, "u-4321")
        XCTAssertEqual(heard4322.filter(isReward), [])
        XCTAssertFalse(slots(heard4321).contains("private"), "\(heard4321)")
        XCTAssertTrue(slots(heard4322).contains("private"), "\(heard4322)")

        // Redelivery on a new Subscribe: the unacknowledged reward goes to 4321 again, not to 4322.
        try daemon.waitFor("r full again") { try daemon.allSlotsFull() }
        let again4321 = try watch(as: 4321, daemon, marker: "r").events()
        let again4322 = try watch(as: 4322, daemon, marker: "r").events()
        XCTAssertEqual(again4321.filter(isReward).compactMap { $0["detail"]?["trans_id"]?.stringValue }, [trans])
        XCTAssertEqual(again4322.filter(isReward), [])

        // ListRewards: the holder and the Manager side (the admin user, root) see it; the other app does not.
        func rewards(_ uid: Int) throws -> [String] {
            try call(as: uid, daemon, "io.adorch.Ads.ListRewards")["rewards"]?.arrayValue?.compactMap { $0["trans_id"]?.stringValue } ?? []
        }
        XCTAssertEqual(try rewards(4321), [trans])
        XCTAssertEqual(try rewards(4322), [])
        XCTAssertEqual(try rewards(4322 + 1), [], "an app that never showed an ad")
        XCTAssertEqual(try rewards(4330), [trans])
        XCTAssertEqual(try rewards(0), [trans])
        XCTAssertEqual(try call(as: 4322, daemon, "io.adorch.Ads.ListRewards", ["user_id": "u-4321"])["rewards"]?.arrayValue, [],
                       "naming the other app's user changes nothing")
        // Nor does naming its reward: to the other app the transaction id does not exist.
        func pageAfter(_ uid: Int, _ id: String) throws -> String {
            do { return "\(try call(as: uid, daemon, "io.adorch.Ads.ListRewards", ["after": .string(id)]))" } catch {
                return "\(error)".replacingOccurrences(of: id, with: "ID")
            }
        }
        XCTAssertEqual(try pageAfter(4322, trans), try pageAfter(4322, "no-such-trans-id"), "another app's transaction id is one that does not exist")
        XCTAssertTrue(try pageAfter(4322, trans).contains("InvalidParameter"))
        XCTAssertFalse(try pageAfter(4321, trans).contains("InvalidParameter"), "the holder pages after its own reward")

        // ListEvents: the same rules over the recent events.
        func recent(_ uid: Int, _ parameters: JSONValue = ["limit": 512]) throws -> [JSONValue] {
            try call(as: uid, daemon, "io.adorch.Ads.ListEvents", parameters)["events"]?.arrayValue ?? []
        }
        let recent4321 = try recent(4321), recent4322 = try recent(4322), recentAdmin = try recent(4330)
        XCTAssertEqual(slots(recent4321), ["r"])
        XCTAssertEqual(slots(recent4322), ["r", "private"])
        XCTAssertEqual(slots(recentAdmin), ["r", "private"])
        XCTAssertEqual(recent4321.filter(isReward).count, 1)
        XCTAssertEqual(recent4322.filter(isReward).count, 0)
        XCTAssertEqual(recentAdmin.filter(isReward).count, 1)
        XCTAssertEqual(try recent(4321, ["slots": ["private"], "limit": 512]), [], "naming a slot it may not use shows nothing")
    }

    /// Outside attack on issue 32 (F1): another uid sharing the slot read, through ListEvents
    /// and Subscribe, the ad_shown of an app's ad with the user id the app passed, and its
    /// network. Now every event about an ad is its holder's and the Manager side's alone. And
    /// (F5) a viewer no network of the slot may serve is told so by Show, not that it is being
    /// refilled.
    func testAnotherAppSeesNothingOfTheAdsAnAppHolds() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [access]
        manager_users = ["4330"]

        [[slots]]
        id = "shared"
        format = "interstitial"
        buffer = 3
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """))
        defer { _ = daemon.stop() }
        try daemon.waitFor("slots full") { try daemon.allSlotsFull() }
        let liveA = try watch(as: 4321, daemon, marker: "shared")
        let liveB = try watch(as: 4322, daemon, marker: "shared")

        // A shows an ad to its viewer and reports on it; then B, then A, each its marker Show.
        let shown = try call(as: 4321, daemon, "io.adorch.Ads.Show", ["slot": "shared", "user_id": "viewer-secret-1"])
        let ad = try XCTUnwrap(shown["ad"]?["id"]?.stringValue)
        _ = try call(as: 4321, daemon, "io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "impression"])
        _ = try call(as: 4321, daemon, "io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "click"])
        try daemon.waitFor("shared full again") { try daemon.allSlotsFull() }
        let heardB = try liveB.events()
        try daemon.waitFor("shared full again") { try daemon.allSlotsFull() }
        let heardA = try liveA.events()

        func aboutAsAd(_ events: [JSONValue]) -> [JSONValue] {
            events.filter { $0["ad_id"]?.stringValue == ad || $0.jsonString.contains("viewer-secret-1") }
        }
        /// Its preload, before any app held it (loaded, media cached), was no app's: the rest is A's.
        func whileHeld(_ events: [JSONValue]) -> [JSONValue] {
            aboutAsAd(events).filter { !["ad_loaded", "media_cached"].contains($0["kind"]?.stringValue ?? "") }
        }
        func recent(_ uid: Int) throws -> [JSONValue] {
            try call(as: uid, daemon, "io.adorch.Ads.ListEvents", ["limit": 512])["events"]?.arrayValue ?? []
        }
        let recentA = try recent(4321), recentB = try recent(4322), recentAdmin = try recent(4330), recentRoot = try recent(0)
        let namingTheSlotB = try call(as: 4322, daemon, "io.adorch.Ads.ListEvents", ["slots": ["shared"], "limit": 512])["events"]?.arrayValue ?? []
        for (who, events) in [("B's stream", heardB), ("B's ListEvents", recentB), ("B's ListEvents naming the slot", namingTheSlotB)] {
            XCTAssertEqual(whileHeld(events), [], "\(who) holds nothing of A's ad since A took it, nor its user id")
            XCTAssertFalse(events.isEmpty, "\(who) has the slot's other events")
        }
        XCTAssertTrue(recentB.contains { $0["kind"]?.stringValue == "ad_loaded" }, "a preload's events still go to every user of the slot")
        for (who, events) in [("A's stream", heardA), ("A's ListEvents", recentA), ("the admin's ListEvents", recentAdmin), ("root's ListEvents", recentRoot)] {
            let own = aboutAsAd(events)
            XCTAssertEqual(own.first { $0["kind"]?.stringValue == "ad_shown" }?["user_id"]?.stringValue, "viewer-secret-1", "\(who): \(own)")
            XCTAssertEqual(Set(own.compactMap { $0["viewer_event"]?.stringValue }), ["impression", "click"], "\(who): \(own)")
        }
        XCTAssertTrue(recentAdmin.contains { $0["user_id"]?.stringValue == "marker-4322" }, "the Manager side sees B's too")
        XCTAssertFalse(recentA.contains { $0["user_id"]?.stringValue == "marker-4322" }, "and A does not")

        // F5: a child no network of the slot may serve (sim serves no children unless said).
        XCTAssertThrowsError(try call(as: 4321, daemon, "io.adorch.Ads.Show", ["slot": "shared", "privacy": ["child_directed": true]])) { error in
            XCTAssertTrue("\(error)".contains("io.adorch.Ads.NoAdReady"), "\(error)")
            XCTAssertTrue("\(error)".contains(ShowError.noEntryServesViewer), "\(error)")
            XCTAssertFalse("\(error)".contains("refilled"), "\(error)")
        }
    }
}
