import AdorchClient
import AdorchTestSupport
import Foundation
import Logging
import Synchronization
import XCTest

/// The Swift client library (Sources/AdorchClient) against the real daemon: the SDK-like
/// formats, the errors, a daemon restart under an open event stream, and the example package.
final class SwiftClientTests: XCTestCase {
    /// Slots that fill at once (fill=1) or never (fill=0), and a quick interactive script.
    static let config = simConfig(slots: """
    [[slots]]
    id = "r"
    format = "rewarded"
    buffer_min = 1
    buffer_max = 2
    reward_name = "coins"
    reward_amount = 10
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=1 latency_ms=10"

    [[slots]]
    id = "empty"
    format = "interstitial"
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=0 latency_ms=10"

    [[slots]]
    id = "b"
    format = "banner"
    width = 320
    height = 50
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=1 latency_ms=10"

    [[slots]]
    id = "nofill"
    format = "banner"
    width = 320
    height = 50
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=0 latency_ms=10"

    [[slots]]
    id = "s"
    format = "splash"
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=1 latency_ms=10"

    [[slots]]
    id = "n"
    format = "native"
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=1 latency_ms=10"

    [[slots]]
    id = "i"
    format = "interactive"
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "script=opt_in_complete latency_ms=10 step_ms=20"
    """)

    func testARewardedAdIsShownReportedRewardedAndAcknowledged() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket)
        let rewarded = RewardedAd(client: client, slot: "r")
        try await rewarded.load(timeout: .seconds(10).scaled)
        let ready = try await rewarded.isReady()
        XCTAssertTrue(ready, "load returns once an ad is ready")

        let ad = try await rewarded.show(userID: "player-7")
        XCTAssertEqual(ad.slot, "r")
        XCTAssertEqual(ad.format, "rewarded")
        XCTAssertEqual(ad.network, "sim")
        let heard = Task { await ad.callbacks.reduce(into: [AdCallback]()) { $0.append($1) } }
        // A second listener, at the same time: each use of callbacks is a stream of its own.
        let heardToo = Task { await ad.callbacks.reduce(into: [AdCallback]()) { $0.append($1) } }
        try await ad.impression()
        try await ad.complete()
        let reward = try await ad.waitReward(timeout: .seconds(10).scaled)
        XCTAssertEqual(reward.adID, ad.id)
        XCTAssertEqual(reward.userID, "player-7")
        XCTAssertEqual(reward.rewardName, "coins")
        XCTAssertEqual(reward.rewardAmount, 10)
        XCTAssertFalse(reward.acknowledged)
        let waiting = try await client.listRewards(userID: "player-7").rewards.map(\.transID)
        XCTAssertEqual(waiting, [reward.transID], "not acknowledged by the library itself")

        try await ad.ack(reward)
        let afterAck = try await client.listRewards(userID: "player-7").rewards
        XCTAssertEqual(afterAck, [], "acknowledged: not offered again")
        try await ad.close()

        let callbacks = await heard.value
        let callbacksToo = await heardToo.value
        XCTAssertEqual(callbacksToo, callbacks, "every listener hears every callback")
        let late = await ad.callbacks.reduce(into: [AdCallback]()) { $0.append($1) }
        XCTAssertEqual(late, callbacks, "a listener that comes after the close hears them all too")
        let typed = callbacks.filter { if case .other = $0 { false } else { true } }
        XCTAssertEqual(typed, [.impression, .reward(reward), .close],
                       "the listener hears impression, reward and close in order, and ends with close: \(callbacks)")
        XCTAssertTrue(callbacks.contains { if case .other(let event) = $0 { event.kind == "ad_shown" } else { false } },
                      "the subscription was made before the Show: its ad_shown is heard")
        let again = try await ad.waitReward(timeout: .seconds(5).scaled)
        XCTAssertEqual(again, reward, "a reward already heard is answered at once")
    }

    func testBannerSplashAndNativeAdsLoad() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket)
        let banner = try await BannerAd(client: client, slot: "b").load()
        XCTAssertEqual(banner.format, "banner")
        XCTAssertEqual(banner.slot, "b")
        let splash = try await SplashAd(client: client, slot: "s").load()
        XCTAssertEqual(splash.format, "splash")
        let natives = try await NativeAdLoader(client: client, slot: "n").load(count: 3)
        XCTAssertEqual(natives.count, 3)
        XCTAssertEqual(Set(natives.map(\.id)).count, 3, "three different ads")
        XCTAssertTrue(natives.allSatisfy { $0.format == "native" && !$0.payload.isEmpty })
        try await client.report(adID: banner.id, event: .impression)
        let reported = try await client.listEvents(slots: ["b"]).contains { $0.adID == banner.id && $0.viewerEvent == "impression" }
        XCTAssertTrue(reported, "the banner's impression is in the slot's events")
    }

    func testAnInteractiveSessionRunsToItsTerminalEvent() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket)
        let session = try await InteractiveSession(client: client, slot: "i", creativeURL: "https://creative.invalid/unit.js",
                                                   adParameters: ["user": ["id": 7]], slotType: .preroll)
        // Two tasks iterate the events at once: each use of events is a stream of its own.
        let other = Task { try await session.events.reduce(into: [String]()) { $0.append($1.name ?? "?") } }
        try await session.start()
        var names: [String] = []
        var last: Event?
        for try await event in session.events {
            XCTAssertEqual(event.sessionID, session.id)
            names.append(event.name ?? "?")
            last = event
        }
        XCTAssertEqual(names, ["fetch_complete", "ads_available", "started", "opt_in", "ad_free_pod", "completed"])
        let otherNames = try await other.value
        XCTAssertEqual(otherNames, names, "the other task heard the same events")
        XCTAssertEqual(last?.terminal, true)
        XCTAssertEqual(last?.adFreePod, true)
        do {
            try await session.pause()
            XCTFail("an ended session cannot be paused")
        } catch let error as AdorchError {
            XCTAssertEqual(error.kind, .sessionNotFound(sessionID: session.id))
        }
    }

    func testPrivacyIsSetReadRefusedByFieldAndCleared() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket)
        let nothing = try await client.getPrivacy()
        XCTAssertNil(nothing.privacy)
        XCTAssertEqual(nothing.source, .none)
        try await client.setPrivacy(Privacy(gdprApplies: false, usPrivacy: "1NYN"))
        try await client.setPrivacy(Privacy(nonPersonalized: true, maxContentRating: "PG"), userID: "u1")
        let user = try await client.getPrivacy(userID: "u1")
        XCTAssertEqual(user.source, .user)
        XCTAssertEqual(user.privacy?.nonPersonalized, true)
        XCTAssertEqual(user.privacy?.maxContentRating, "PG")
        XCTAssertNil(user.privacy?.usPrivacy, "a user's record replaces the app's whole")
        let app = try await client.getPrivacy(userID: "u2")
        XCTAssertEqual(app.source, .app)
        XCTAssertEqual(app.privacy?.usPrivacy, "1NYN")
        XCTAssertEqual(app.privacy?.gdprApplies, false)
        do {
            try await client.setPrivacy(Privacy(gpp: "z"), userID: "u1")
            XCTFail("a GPP string that does not decode is refused")
        } catch let error as AdorchError {
            XCTAssertEqual(error.kind, .invalidParameter(parameter: "privacy.gpp"))
        }
        let after = try await client.getPrivacy(userID: "u1")
        XCTAssertEqual(after.privacy, user.privacy, "the refused call changed nothing")
        // One call's own privacy: outside the GDPR, non-personalised, which sim serves (no children).
        _ = try await client.load(slot: "b", privacy: Privacy(gdprApplies: false, nonPersonalized: true))
        try await client.setPrivacy(nil, userID: "u1")
        let cleared = try await client.getPrivacy(userID: "u1")
        XCTAssertEqual(cleared.source, .app)
    }

    func testTheDaemonsErrorsArriveTyped() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket)
        func kind(_ call: () async throws -> Void) async -> AdorchError.Kind? {
            do {
                try await call()
                return nil
            } catch let error as AdorchError {
                XCTAssertFalse(error.message.isEmpty && error.name.hasPrefix("io.adorch.Ads"), "\(error.name) has a message")
                return error.kind
            } catch {
                XCTFail("not an AdorchError: \(error)")
                return nil
            }
        }
        let noSlot = await kind { _ = try await client.show(slot: "nope", userID: "u") }
        XCTAssertEqual(noSlot, .slotNotFound(slot: "nope"))
        let empty = await kind { _ = try await client.show(slot: "empty") }
        XCTAssertEqual(empty, .noAdReady(slot: "empty"))
        let noUser = await kind { _ = try await client.show(slot: "r") }
        XCTAssertEqual(noUser, .invalidParameter(parameter: "user_id"))
        let badAd = await kind { try await client.report(adID: "1-999", event: .click) }
        XCTAssertEqual(badAd, .adNotValid(adID: "1-999"))
        let badReward = await kind { try await client.ackReward("no-such-reward") }
        XCTAssertEqual(badReward, .rewardNotFound(transID: "no-such-reward"))
        let badSession = await kind { try await client.stop(sessionID: "no-such-session") }
        XCTAssertEqual(badSession, .sessionNotFound(sessionID: "no-such-session"))
        let noFill = await kind { _ = try await client.load(slot: "nofill") }
        guard case .loadFailed(let slot, let code, let attempts)? = noFill else { return XCTFail("Load of nofill: \(String(describing: noFill))") }
        XCTAssertEqual(slot, "nofill")
        XCTAssertEqual(code, "no_fill")
        XCTAssertEqual(attempts.map(\.network), ["sim"])
        let noMethod = await kind { _ = try await client.call("io.adorch.Ads.Nope", idempotent: true) }
        XCTAssertEqual(noMethod, .methodNotFound(method: "io.adorch.Ads.Nope"))
        // The call connection survives errors: the client still works on it.
        let slots = try await client.listSlots().map(\.id)
        XCTAssertEqual(Set(slots), ["r", "empty", "b", "nofill", "s", "n", "i"])
        let status = try await client.getStatus()
        XCTAssertEqual(status.socket, daemon.socket)
    }

    /// Every `error` of io.adorch.Ads, io.adorch.Manager and io.adorch (the connection errors),
    /// as the running daemon describes them, and every org.varlink.service error the Varlink
    /// layer sends, maps to its own case, not `.unknown`.
    func testEveryErrorOfTheIDLAndTheVarlinkLayerMapsToItsOwnCase() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket)
        var names: [String] = []
        for interface in ["io.adorch.Ads", "io.adorch.Manager", "io.adorch"] {
            let description = try await client.call("org.varlink.service.GetInterfaceDescription", ["interface": .string(interface)], idempotent: true)
            let text = try XCTUnwrap(description["description"]?.stringValue)
            let errors = text.split(separator: "\n").filter { $0.hasPrefix("error ") }.map {
                "\(interface)." + $0.dropFirst("error ".count).prefix { $0.isLetter || $0.isNumber }
            }
            XCTAssertFalse(errors.isEmpty, "\(interface) declares errors")
            names += errors
        }
        // org.varlink.service's errors: as the Varlink layer's source names them.
        let varlink = packageRoot.appendingPathComponent("Sources/AdorchVarlink")
        for file in try FileManager.default.contentsOfDirectory(atPath: varlink.path) where file.hasSuffix(".swift") {
            let source = try String(contentsOf: varlink.appendingPathComponent(file), encoding: .utf8)
            let pattern = try NSRegularExpression(pattern: #"VarlinkError\("(org\.varlink\.service\.[A-Za-z]+)""#)
            for match in pattern.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                names.append(String(source[Range(match.range(at: 1), in: source)!]))
            }
        }
        for name in ["io.adorch.Ads.NoAdReady", "io.adorch.Manager.ReloadFailed", "io.adorch.TooManyConnections", "org.varlink.service.MethodNotFound"] {
            XCTAssertTrue(names.contains(name), "\(name) is among the names found: \(names)")
        }
        for name in Set(names).sorted() {
            let error = AdorchError(name: name, parameters: ["message": "m"])
            let short = name.split(separator: ".").last!
            let expected = short.prefix(1).lowercased() + short.dropFirst()
            let label = "\(error.kind)".prefix { $0 != "(" }
            XCTAssertNotEqual(error.kind, .unknown, "\(name) has a case")
            // org.varlink.service.InvalidParameter is not the daemon's own InvalidParameter.
            let own = name == "org.varlink.service.InvalidParameter" ? "varlinkInvalidParameter" : expected
            XCTAssertEqual(label, Substring(own), "\(name) maps to .\(own)")
            XCTAssertEqual(error.name, name)
            XCTAssertEqual(error.message, "m")
        }
        let future = AdorchError(name: "io.adorch.Ads.SomethingNew", parameters: ["message": "later"])
        XCTAssertEqual(future.kind, .unknown, "a name the library does not know stays the base error")
        XCTAssertEqual(future.name, "io.adorch.Ads.SomethingNew")
        let limited = AdorchError(name: "io.adorch.Ads.RateLimited", parameters: ["retry_after_ms": 250, "message": "m"])
        XCTAssertEqual(limited.kind, .rateLimited(retryAfterMs: 250), "typed fields where the IDL has them")
        let capped = AdorchError(name: "io.adorch.Ads.Capped", parameters: ["slot": "s", "rule": "3 per 1h per user", "retry_after_ms": 9, "message": "m"])
        XCTAssertEqual(capped.kind, .capped(slot: "s", rule: "3 per 1h per user", retryAfterMs: 9))
        let noSlot = AdorchError(name: "io.adorch.Manager.SlotNotFound", parameters: ["slot": "s", "message": "m"])
        XCTAssertEqual(noSlot.kind, .slotNotFound(slot: "s"), "Manager's SlotNotFound has Ads' fields, and its case")
    }

    /// An interstitial slot paced at one ad a minute per user: a config of its own, so that
    /// the slot counts of the tests on `config` stay as they are.
    static let pacedConfig = simConfig(slots: """
    [[slots]]
    id = "paced"
    format = "interstitial"
    buffer_min = 1
    buffer_max = 2
    pacing = "1m"
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=1 latency_ms=10"
    """)

    /// A Show within the pacing of the user's last impression is `.capped`, naming the rule and
    /// when it frees; `listSlots(userID:)` tells that user's hold (and no other user's), and
    /// `getCaps` counts the impression.
    func testAShowWithinThePacingIsCappedAndListSlotsAndGetCapsSaySoForThatUser() async throws {
        let daemon = try DaemonProcess(config: Self.pacedConfig)
        let client = Client(socketPath: daemon.socket)
        try await InterstitialAd(client: client, slot: "paced").load(timeout: .seconds(10).scaled)
        let free = try await client.listSlots(userID: "paced-user")
        XCTAssertEqual(free.map(\.id), ["paced"])
        XCTAssertNil(try XCTUnwrap(free.first).capped, "no ad shown yet: nothing holds")
        let ad = try await client.show(slot: "paced", userID: "paced-user")
        try await client.report(adID: ad.id, event: .impression)
        do {
            _ = try await client.show(slot: "paced", userID: "paced-user")
            XCTFail("a second Show within the pacing was let in")
        } catch let error as AdorchError {
            guard case .capped(let slot, let rule, let retryAfterMs) = error.kind else { return XCTFail("not .capped: \(error)") }
            XCTAssertEqual(error.name, "io.adorch.Ads.Capped")
            XCTAssertEqual(slot, "paced")
            XCTAssertEqual(rule, "pacing 1m per user")
            XCTAssertTrue((1...60_000).contains(retryAfterMs), "retry_after_ms \(retryAfterMs)")
        }

        let listed = try await client.listSlots(userID: "paced-user")
        let held = try XCTUnwrap(listed.first?.capped, "ListSlots tells the user's hold")
        XCTAssertEqual(held.rule, "pacing 1m per user")
        XCTAssertEqual(held.kind, "pacing")
        XCTAssertNil(held.network, "the slot's own rule, not a network's")
        XCTAssertTrue((1...60_000).contains(held.retryAfterMs), "retry_after_ms \(held.retryAfterMs)")
        XCTAssertFalse(held.until.isEmpty)
        let others = try await client.listSlots(userID: "another-user")
        XCTAssertNil(others.first?.capped, "the pacing is per user")
        let anonymous = try await client.listSlots()
        XCTAssertNil(anonymous.first?.capped, "without a user id: Shows without one, which nothing holds")

        let rules = try await client.getCaps(slot: "paced", userID: "paced-user")
        XCTAssertEqual(rules.map(\.rule), ["pacing 1m per user"])
        let rule = try XCTUnwrap(rules.first)
        XCTAssertEqual([rule.kind, rule.scope], ["pacing", "user"])
        XCTAssertEqual([rule.impressions, rule.windowMs, rule.counted], [1, 60_000, 1])
        XCTAssertTrue((1...60_000).contains(rule.retryAfterMs ?? 0), "retry_after_ms \(String(describing: rule.retryAfterMs))")
        XCTAssertNotNil(rule.until)
        do {
            _ = try await client.getCaps(slot: "nope")
            XCTFail("GetCaps of a slot that does not exist succeeded")
        } catch let error as AdorchError {
            XCTAssertEqual(error.name, "io.adorch.Manager.SlotNotFound")
            XCTAssertEqual(error.kind, .slotNotFound(slot: "nope"))
        }
    }

    /// Acceptance: a client with an event stream open; the daemon stops and starts again on
    /// the same socket and state dir; the stream goes on with an event caused after the
    /// restart, with the retry logged and no second `subscribed`.
    func testAnEventStreamGoesOnAcrossADaemonRestart() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-swift-restart-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("adorchd.sock").path
        let state = dir.appendingPathComponent("state")
        // Both runs serve on `socket`: the last --socket is the one adorchd takes.
        var first: DaemonProcess? = try DaemonProcess(config: Self.config, extraArguments: ["--socket", socket], stateDir: state)

        let log = LogLines()
        let client = Client(socketPath: socket, logger: log.logger)
        let events = client.events(slots: ["r"])
        let subscribed = try await Self.read(events, until: "subscribed") { $0.kind == "subscribed" }
        XCTAssertEqual(subscribed.map(\.kind), ["subscribed"])
        let before = try await client.listSlots()
        XCTAssertEqual(before.count, 7)

        XCTAssertEqual(first?.stop(), 0)
        first = nil
        let second = try DaemonProcess(config: Self.config, extraArguments: ["--socket", socket], stateDir: state)
        XCTAssertTrue(second.isRunning)
        // The stream is back once it logged its new subscription: what happens from then on reaches it.
        _ = try await Self.read(log.stream, until: "log line of the stream's new subscription") { $0.contains("subscribed again") }
        // Another app's connection (DaemonProcess's own helpers call its default socket).
        let other = Client(socketPath: socket)
        try await RewardedAd(client: other, slot: "r").load(timeout: .seconds(10).scaled)
        let id = try await other.show(slot: "r", userID: "other-connection").id

        let heard: [Event]
        do {
            heard = try await Self.read(events, until: "ad_shown of \(id) after the restart") { $0.kind == "ad_shown" && $0.adID == id }
        } catch {
            throw TestFailure("\(error); the client logged: \(log.lines)")
        }
        XCTAssertFalse(heard.contains { $0.kind == "subscribed" }, "the second subscribed is not passed on: \(heard.map(\.kind))")
        XCTAssertTrue(log.lines.contains { $0.contains("subscribing again") }, "\(log.lines)")
        XCTAssertTrue(log.lines.contains { $0.contains("retry 1 ") }, "a line per retry: \(log.lines)")
        XCTAssertTrue(log.lines.contains { $0.contains("subscribed again") }, "\(log.lines)")
        let after = try await client.listSlots()
        XCTAssertEqual(after.map(\.id), before.map(\.id), "calls go on, on a new connection")
        let rewarded = RewardedAd(client: client, slot: "r")
        try await rewarded.load(timeout: .seconds(10).scaled)
        let ad = try await rewarded.show(userID: "after-restart")
        XCTAssertEqual(ad.slot, "r", "a Show made after the restart is sent on the new connection")
    }

    func testTheSocketIsFoundAsAdorchctlFindsIt() throws {
        XCTAssertEqual(Client.defaultSocketPath(environment: ["ADORCH_SOCKET": "/x/a.sock"]), "/x/a.sock")
        // The tests run as root: root's own daemon is the system service's socket.
        XCTAssertEqual(Client.defaultSocketPath(environment: [:]), Client.systemSocket)
        let unit = try String(contentsOf: packageRoot.appendingPathComponent("systemd/adorchd.socket"), encoding: .utf8)
        XCTAssertTrue(unit.split(separator: "\n").contains("ListenStream=\(Client.systemSocket)"), "the socket unit listens where the client looks")
    }

    /// The reconnect rule for a call in flight, which the real daemon cannot be made to
    /// break at a chosen moment: a server that reads each call whole and then hangs up (or, last,
    /// answers). A Show it received may have taken effect: `.connectionLost`, not sent again. A
    /// read is sent again on a new connection.
    func testACallCutOffAfterItWasSentIsSentAgainOnlyIfItIsARead() async throws {
        let server = try HangingUpServer(answers: [nil, nil, ["slots": []]])
        let client = Client(socketPath: server.path)
        do {
            _ = try await client.show(slot: "r", userID: "u")
            XCTFail("a Show whose connection broke after it was sent fails")
        } catch let error as AdorchError {
            XCTAssertEqual(error.kind, .connectionLost(method: "io.adorch.Ads.Show"))
        }
        let slots = try await client.listSlots()
        XCTAssertEqual(slots, [])
        XCTAssertEqual(server.received, ["io.adorch.Ads.Show", "io.adorch.Ads.ListSlots", "io.adorch.Ads.ListSlots"],
                       "the Show went out once; the ListSlots again on the third connection")
    }

    /// Many more calls at once than the daemon reads ahead on one connection (it stops reading
    /// at 1024 queued calls until it has answered some): they queue in the client and are all
    /// answered, while the replies keep being read.
    func testThousandsOfConcurrentCallsOnOneClientAreAllAnswered() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        // 2,000 calls in flight on one connection: the last waits for all before it, which a
        // sanitizer build answers several times slower (make tsan: past the default 30 s).
        let client = Client(socketPath: daemon.socket, callTimeout: Client.defaultCallTimeout.scaled)
        let calls = 2000
        let socket = daemon.socket
        let answered = try await withThrowingTaskGroup(of: Bool.self) { group in
            for call in 0..<calls {
                group.addTask {
                    if call % 2 == 0 { return try await client.listSlots().count == 7 }
                    return try await client.getStatus().socket == socket
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        XCTAssertEqual(answered, calls, "every call got its own reply")
    }

    /// A daemon that stops answering (SIGSTOP) holds up nothing: a call times out after the
    /// client's call timeout, a cancelled one ends at once, the SDK layer's waits keep their
    /// timeouts, and the cooperative pool stays free; once the daemon goes on, the late replies
    /// are dropped, not taken for the next calls'.
    func testAHungDaemonTimesCallsOutAndCancelsThemWithoutHoldingThreads() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let timeout = Duration.seconds(1).scaled
        let client = Client(socketPath: daemon.socket, callTimeout: timeout)
        let rewarded = RewardedAd(client: client, slot: "r")
        try await rewarded.load(timeout: .seconds(10).scaled)
        let shown = try await rewarded.show(userID: "hung")
        let patient = Client(socketPath: daemon.socket, callTimeout: nil)
        _ = try await patient.listSlots()

        try Self.suspend(daemon)
        var resumed = false
        defer { if !resumed { kill(daemon.pid, SIGCONT) } }
        let bound = Duration.seconds(5).scaled

        func timedOut(_ what: String, _ operation: () async throws -> Void) async {
            let start = ContinuousClock.now
            do {
                try await operation()
                XCTFail("\(what) returned from a stopped daemon")
            } catch let error as AdorchError {
                XCTAssertEqual(error.kind, .timeout, "\(what): \(error)")
            } catch {
                XCTFail("\(what): not an AdorchError: \(error)")
            }
            XCTAssertLessThan(start.duration(to: .now), bound, "\(what) kept its timeout")
        }
        await timedOut("listSlots") { _ = try await client.listSlots() }
        await timedOut("RewardedAd.load") { try await RewardedAd(client: client, slot: "empty").load(timeout: timeout) }
        await timedOut("waitReward") { _ = try await shown.waitReward(timeout: timeout) }

        // Calls that wait for ever unless cancelled: the pool still runs other work meanwhile.
        let waiting = (0..<500).map { _ in Task { try await patient.listSlots() } }
        let start = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(20))
        XCTAssertLessThan(start.duration(to: .now), bound, "other tasks run while 500 calls wait on a stopped daemon")
        for task in waiting { task.cancel() }
        var cancelled = 0
        for task in waiting {
            do { _ = try await task.value } catch is CancellationError { cancelled += 1 } catch { XCTFail("not a CancellationError: \(error)") }
        }
        XCTAssertEqual(cancelled, waiting.count, "every cancelled call ended, the daemon still stopped")
        XCTAssertEqual(kill(daemon.pid, 0), 0)

        XCTAssertEqual(kill(daemon.pid, SIGCONT), 0)
        resumed = true
        // The timed-out ListSlots' reply comes first on this connection: it is not this call's.
        let status = try await client.getStatus()
        XCTAssertEqual(status.socket, daemon.socket)
        let slots = try await patient.listSlots()
        XCTAssertEqual(slots.count, 7)
    }

    /// A call made by a task already cancelled is not sent: none of these Shows takes an ad.
    func testACancelledTaskSendsNothing() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket)
        try await RewardedAd(client: client, slot: "r").load(timeout: .seconds(10).scaled)
        let shows = (0..<300).map { _ in
            Task {
                // Returns as soon as the task is cancelled.
                try? await Task.sleep(for: .seconds(3600))
                return try await client.show(slot: "r", userID: "cancelled")
            }
        }
        for task in shows { task.cancel() }
        for task in shows {
            do {
                _ = try await task.value
                XCTFail("a cancelled task's Show was made")
            } catch is CancellationError {
            } catch {
                XCTFail("not a CancellationError: \(error)")
            }
        }
        let events = try await client.listEvents(slots: ["r"])
        XCTAssertFalse(events.contains { $0.kind == "ad_shown" }, "no ad was taken: \(events.map(\.kind))")
        let ready = try await RewardedAd(client: client, slot: "r").isReady()
        XCTAssertTrue(ready)
    }

    /// The SDK layer fails with the client's typed errors and reconnects as its calls do: no
    /// daemon at all is `.cannotConnect` at once; a daemon restarting is waited for.
    func testTheAdFormatsFailTypedAndWaitForARestartingDaemon() async throws {
        let nowhere = Client(socketPath: "/nonexistent-adorch/adorchd.sock")
        func cannotConnect(_ what: String, _ operation: () async throws -> Void) async {
            do {
                try await operation()
                XCTFail("\(what) without a daemon succeeded")
            } catch let error as AdorchError {
                guard case .cannotConnect(_, let code) = error.kind else { return XCTFail("\(what): \(error)") }
                XCTAssertEqual(code, ENOENT, what)
            } catch {
                XCTFail("\(what): not an AdorchError: \(error)")
            }
        }
        await cannotConnect("RewardedAd.load") { try await RewardedAd(client: nowhere, slot: "r").load(timeout: .seconds(10).scaled) }
        await cannotConnect("RewardedAd.show") { _ = try await RewardedAd(client: nowhere, slot: "r").show(userID: "u") }
        await cannotConnect("InteractiveSession") {
            _ = try await InteractiveSession(client: nowhere, slot: "i", creativeURL: "https://creative.invalid/u.js", slotType: .preroll)
        }

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-swift-sdk-restart-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("adorchd.sock").path
        let state = dir.appendingPathComponent("state")
        var first: DaemonProcess? = try DaemonProcess(config: Self.config, extraArguments: ["--socket", socket], stateDir: state)
        let log = LogLines()
        let client = Client(socketPath: socket, logger: log.logger)
        let rewarded = RewardedAd(client: client, slot: "r")
        try await rewarded.load(timeout: .seconds(10).scaled)
        XCTAssertEqual(first?.stop(), 0)
        first = nil
        // Made while the daemon is away: its subscription retries until the daemon is back.
        let loading = Task { try await rewarded.load(timeout: .seconds(30).scaled) }
        _ = try await Self.read(log.stream, until: "a logged retry of the load's subscription") { $0.contains("retry 1 ") }
        let second = try DaemonProcess(config: Self.config, extraArguments: ["--socket", socket], stateDir: state)
        do {
            try await loading.value
        } catch {
            throw TestFailure("\(error); the client logged: \(log.lines)")
        }
        let ad = try await rewarded.show(userID: "after-restart")
        XCTAssertEqual(ad.slot, "r")
        XCTAssertTrue(second.isRunning)
    }

    /// A call larger than the daemon reads (1 MiB by default) is refused by it: the client
    /// reads the refusal and throws it, sends the call once, and goes on on a new connection.
    /// Eight times the limit, so that the daemon closes before the client has written it all.
    func testACallLargerThanTheDaemonTakesFailsWithItsRefusalOnce() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let log = LogLines()
        let client = Client(socketPath: daemon.socket, logger: log.logger)
        _ = try await client.listSlots()
        let blob = JSONValue.string(String(repeating: "x", count: 8 << 20))
        do {
            _ = try await client.load(slot: "b", targeting: ["blob": blob])
            XCTFail("a Load over the daemon's limit succeeded")
        } catch let error as AdorchError {
            guard case .varlinkInvalidParameter(let parameter) = error.kind else { return XCTFail("\(error)") }
            XCTAssertTrue(parameter.contains("larger than"), parameter)
        }
        XCTAssertEqual(daemon.log.components(separatedBy: "a message larger than").count - 1, 1, "sent once:\n\(daemon.log)")
        XCTAssertFalse(log.lines.contains { $0.contains("sending it on a new connection") }, "\(log.lines)")
        let slots = try await client.listSlots()
        XCTAssertEqual(slots.count, 7, "the next call goes on a new connection")
    }

    /// A reply that does not fit the IDL is the library's typed `.malformedReply`.
    func testAReplyThatDoesNotFitTheIDLIsAMalformedReply() async throws {
        let server = try HangingUpServer(answers: [["slots": "not a list"]])
        let client = Client(socketPath: server.path)
        do {
            _ = try await client.listSlots()
            XCTFail("a ListSlots reply whose slots are a string was taken")
        } catch let error as AdorchError {
            XCTAssertEqual(error.kind, .malformedReply, "\(error)")
        }
    }

    /// A restart under many calls waiting for it is logged once per retry, not once per call.
    func testARestartUnderManyCallsIsLoggedOncePerRetry() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-swift-retries-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("adorchd.sock").path
        let state = dir.appendingPathComponent("state")
        var first: DaemonProcess? = try DaemonProcess(config: Self.config, extraArguments: ["--socket", socket], stateDir: state)
        let log = LogLines()
        let client = Client(socketPath: socket, logger: log.logger)
        _ = try await client.listSlots()
        XCTAssertEqual(first?.stop(), 0)
        first = nil
        let calls = (0..<5).map { _ in Task { try await client.listSlots().count } }
        _ = try await Self.read(log.stream, until: "the third retry logged") { $0.contains("retry 3 ") }
        let second = try DaemonProcess(config: Self.config, extraArguments: ["--socket", socket], stateDir: state)
        for call in calls {
            let count = try await call.value
            XCTAssertEqual(count, 7)
        }
        for retry in 1...3 {
            XCTAssertEqual(log.lines.filter { $0.contains("retry \(retry) ") }.count, 1, "retry \(retry) logged once: \(log.lines)")
        }
        XCTAssertTrue(second.isRunning)
    }

    /// `close` is final, as the Python client's: a call in flight ends with `.closed`, so does
    /// every later call (no connection is made again), and an event stream being read ends.
    func testCloseIsFinal() async throws {
        let daemon = try DaemonProcess(config: Self.config)
        let client = Client(socketPath: daemon.socket, callTimeout: nil)
        _ = try await client.listSlots()
        let events = client.events(slots: ["r"])
        _ = try await Self.read(events, until: "subscribed") { $0.kind == "subscribed" }
        // Stopped, so that the call surely waits when the client is closed.
        try Self.suspend(daemon)
        var resumed = false
        defer { if !resumed { kill(daemon.pid, SIGCONT) } }
        let waiting = Task { try await client.listSlots() }
        client.close()
        func closed(_ what: String, _ operation: () async throws -> Void) async {
            do {
                try await operation()
                XCTFail("\(what) after close succeeded")
            } catch let error as AdorchError {
                XCTAssertEqual(error.kind, .closed, "\(what): \(error)")
            } catch {
                XCTFail("\(what): not an AdorchError: \(error)")
            }
        }
        await closed("the call in flight") { _ = try await waiting.value }
        XCTAssertEqual(kill(daemon.pid, SIGCONT), 0)
        resumed = true
        await closed("a later call") { _ = try await client.getStatus() }
        await closed("a later RewardedAd.show") { _ = try await RewardedAd(client: client, slot: "r").show(userID: "u") }
        do {
            _ = try await Self.read(events, until: "an event after close") { _ in true }
            XCTFail("the event stream went on after close")
        } catch let failure as TestFailure {
            XCTAssertTrue(failure.description.contains("the stream ended before"), "\(failure)")
        }
    }

    /// SIGSTOP, and returns once the daemon is stopped: until one of its threads takes the
    /// signal, the others still answer. The caller resumes it (SIGCONT) before it is stopped.
    static func suspend(_ daemon: DaemonProcess) throws {
        guard kill(daemon.pid, SIGSTOP) == 0 else { throw TestFailure("SIGSTOP \(daemon.pid): \(String(cString: strerror(errno)))") }
        var status: Int32 = 0
        while waitpid(daemon.pid, &status, WUNTRACED) < 0 {
            guard errno == EINTR else { throw TestFailure("waitpid \(daemon.pid): \(String(cString: strerror(errno)))") }
        }
        // WIFSTOPPED: the low byte is 0x7f (the Glibc overlay does not import the macro).
        guard status & 0xff == 0x7f else { throw TestFailure("adorchd \(daemon.pid) ended instead of stopping: status \(status)") }
    }

    /// The stream's elements up to the first that `matches`, or a failure after `timeout`.
    static func read<Element: Sendable>(_ elements: AsyncThrowingStream<Element, any Error>, until what: String, timeout: Duration = .seconds(30),
                                        _ matches: @escaping @Sendable (Element) -> Bool) async throws -> [Element] {
        let seen = Heard<Element>()
        return try await withThrowingTaskGroup(of: [Element].self) { group in
            group.addTask {
                for try await element in elements {
                    seen.append(element)
                    if matches(element) { return seen.elements }
                }
                throw TestFailure("the stream ended before \(what); heard \(seen.elements)")
            }
            group.addTask {
                try await Task.sleep(for: timeout.scaled)
                throw TestFailure("no \(what) within \(timeout.scaled); heard \(seen.elements)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// examples/swift, a package of its own depending on this one by path, builds and shows
    /// a rewarded ad on the embedded default config.
    func testTheExamplePackageBuildsAndPrintsTheReward() throws {
        let scratch = packageRoot.appendingPathComponent(".build-examples-swift").path
        let build = try runCommand("/usr/bin/env", ["swift", "build", "--package-path", packageRoot.appendingPathComponent("examples/swift").path,
                                                    "--scratch-path", scratch])
        XCTAssertEqual(build.status, 0, "swift build of examples/swift:\n\(build.stdout)\n\(build.stderr)")
        let daemon = try DaemonProcess()
        let run = try runCommand(scratch + "/debug/rewarded-ad", [], environment: ["ADORCH_SOCKET": daemon.socket])
        XCTAssertEqual(run.status, 0, "rewarded-ad:\n\(run.stdout)\n\(run.stderr)")
        XCTAssertTrue(run.stdout.contains("reward: 10 coins for player-1 (transaction "), run.stdout + run.stderr)
    }
}

/// A Unix socket server for one connection after the other: reads one call on each, then
/// hangs up (nil) or sends the answer given for that connection; records the methods.
private final class HangingUpServer: Sendable {
    let path: String
    private let calls = Mutex<[String]>([])
    var received: [String] { calls.withLock { $0 } }

    init(answers: [[String: JSONValue]?]) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-hangup-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        path = dir.appendingPathComponent("s.sock").path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 8) == 0 else { throw TestFailure("bind \(path): \(String(cString: strerror(errno)))") }
        Thread { [self] in
            for answer in answers {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { break }
                var message: [UInt8] = []
                var byte: UInt8 = 0
                while recv(fd, &byte, 1, 0) == 1, byte != 0 { message.append(byte) }
                let method = JSONValue.parse(Data(message))?["method"]?.stringValue ?? "?"
                calls.withLock { $0.append(method) }
                if let answer {
                    let reply = Array(JSONValue.object(["parameters": .object(answer)]).jsonData) + [0]
                    _ = reply.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
                close(fd)
            }
            close(listener)
            try? FileManager.default.removeItem(at: dir)
        }.start()
    }
}

/// What a stream delivered so far, for the failure message of a wait that timed out.
private final class Heard<Element: Sendable>: Sendable {
    private let stored = Mutex<[Element]>([])
    var elements: [Element] { stored.withLock { $0 } }
    func append(_ element: Element) { stored.withLock { $0.append(element) } }
}

/// The client's log lines, through a swift-log handler of the test's own: all of them, and
/// as a stream to wait on.
private final class LogLines: Sendable {
    private let stored = Mutex<[String]>([])
    let stream: AsyncThrowingStream<String, any Error>
    private let continuation: AsyncThrowingStream<String, any Error>.Continuation
    var lines: [String] { stored.withLock { $0 } }

    init() { (stream, continuation) = AsyncThrowingStream.makeStream(of: String.self) }

    var logger: Logger {
        Logger(label: "swift-client-test") { _ in Handler(lines: self) }
    }

    private struct Handler: LogHandler {
        let lines: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.stored.withLock { $0.append("\(event.message)") }
            lines.continuation.yield("\(event.message)")
        }
    }
}
