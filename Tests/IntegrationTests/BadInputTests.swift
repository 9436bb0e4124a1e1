import AdorchLocking
import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// Acceptance 6: every kind of bad input gets its named error or a clean close, while a
/// well-behaved client on another connection sees no error at all.
final class BadInputTests: XCTestCase {
    private var daemon: DaemonProcess!
    private var polite: PoliteClient!

    override func setUpWithError() throws {
        daemon = try DaemonProcess()
        try daemon.waitFor("demo slots full") { try daemon.allSlotsFull() }
        polite = PoliteClient(socket: daemon.socket)
        polite.start()
        // Running before the bad input starts, however busy the machine: its first answer.
        XCTAssertTrue(polite.waitForFirstCall(), "the polite client got no answer within 10 s")
    }

    override func tearDownWithError() throws {
        // XCTest keeps every test case to the end of the run: let go of the daemon here, so a
        // failed test's daemon is stopped now, not left running beside the rest.
        defer { (daemon, polite) = (nil, nil) }
        // A setUp that threw left the polite client unset; its error is the test's failure already.
        guard let daemon else { return }
        guard let polite else { return _ = daemon.stop() }
        let (calls, errors) = polite.stop()
        XCTAssertGreaterThan(calls, 0, "the polite client made calls meanwhile")
        XCTAssertEqual(errors, [], "the polite client saw errors")
        // Every bad connection is gone: only the one asking remains.
        try eventually("connections back to zero") { try daemon.status()["connections"]?["open"]?.intValue == 1 }
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// Sends raw bytes and returns the error reply, then checks the daemon closed the connection.
    private func refusal(_ raw: Data, closes: Bool = true) throws -> (String?, [String: JSONValue]) {
        let client = try daemon.client(timeout: .seconds(5))
        try client.sendRaw(raw)
        let reply = try client.nextReply()
        if closes {
            XCTAssertThrowsError(try client.nextReply(), "the connection is closed after a broken message")
        }
        return (reply.error, reply.parameters)
    }

    private func frame(_ text: String) -> Data { Data(text.utf8) + Data([0]) }

    func testBrokenMessagesGetInvalidParameterAndAClose() throws {
        let cases: [(String, String)] = [
            ("this is not json", "message: not JSON"),
            ("[1,2,3]", "message: not a JSON object"),
            (#""just a string""#, "message: not a JSON object"),
            (#"{"parameters":{}}"#, "method: missing"),
            (#"{"method":7}"#, "method: not an interface-qualified method name"),
            (#"{"method":"io.adorch.Ads.Show","parameters":"slot"}"#, "parameters: not an object"),
        ]
        for (text, parameter) in cases {
            let (error, parameters) = try refusal(frame(text))
            XCTAssertEqual(error, "org.varlink.service.InvalidParameter", text)
            XCTAssertEqual(parameters["parameter"]?.stringValue, parameter, text)
        }
    }

    func testWrongCallsGetTheirNamedErrorsAndTheConnectionStaysUsable() throws {
        let client = try daemon.client()
        func expect(_ method: String, _ parameters: [String: JSONValue], _ error: String, _ field: String? = nil, more: Bool = false) throws {
            let reply = try client.call(method, parameters, more: more)
            XCTAssertEqual(reply.error, error, "\(method) \(parameters)")
            if let field { XCTAssertNotNil(reply.parameters[field], "\(error) names its \(field)") }
        }
        try expect("com.example.Nope.Call", [:], "org.varlink.service.InterfaceNotFound", "interface")
        try expect("io.adorch.Ads.Nope", [:], "org.varlink.service.MethodNotFound", "method")
        try expect("io.adorch.Ads.Show", ["slot": 5], "org.varlink.service.InvalidParameter", "parameter")
        try expect("io.adorch.Ads.Show", [:], "org.varlink.service.InvalidParameter", "parameter")
        try expect("io.adorch.Ads.Show", ["slot": "fullscreen_main", "colour": "red"], "org.varlink.service.InvalidParameter", "parameter")
        try expect("io.adorch.Ads.Show", ["slot": "no_such_slot"], "io.adorch.Ads.SlotNotFound", "message")
        try expect("io.adorch.Ads.Show", ["slot": "rewarded_main"], "io.adorch.Ads.InvalidParameter", "message")
        try expect("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": ""], "io.adorch.Ads.InvalidParameter", "message")
        try expect("io.adorch.Ads.Report", ["ad_id": "deadbeef-1", "event": "impression"], "io.adorch.Ads.AdNotValid", "message")
        try expect("io.adorch.Ads.Report", ["ad_id": "x", "event": "dance"], "io.adorch.Ads.InvalidParameter", "message")
        try expect("io.adorch.Ads.Subscribe", [:], "org.varlink.service.ExpectedMore")
        try expect("io.adorch.Ads.ListSlots", ["extra": true], "org.varlink.service.InvalidParameter", "parameter")
        // After all of that, the same connection still serves.
        let slots = try client.call("io.adorch.Ads.ListSlots")
        XCTAssertNil(slots.error)
        XCTAssertEqual(slots.parameters["slots"]?.arrayValue?.count, 7)
    }

    func testAMessageOverTheSizeLimitClosesTheConnection() throws {
        // One byte over the default 1 MiB, never NUL-terminated: the daemon must not wait for more.
        let huge = Data(#"{"method":"io.adorch.Ads.ListSlots","parameters":{"pad":""#.utf8) + Data(repeating: 0x61, count: 1 << 20)
        let (error, parameters) = try refusal(huge)
        XCTAssertEqual(error, "org.varlink.service.InvalidParameter")
        XCTAssertEqual(parameters["parameter"]?.stringValue, "message: larger than 1048576 bytes")
    }

    func testHalfMessagesThenHangUpsAndThousandsOfConnections() throws {
        for i in 0..<3000 {
            let client = try RawClient(daemon.socket)
            // Half a message, then gone.
            if i % 3 == 0 { client.send(#"{"method":"io.adorch.Ads.Sh"#, nul: false) }
        }
        let status = try daemon.status()
        XCTAssertGreaterThanOrEqual(status["connections"]?["accepted"]?.intValue ?? 0, 3000)
    }

    /// Clients connecting and hanging up all at once, with calls in flight, replies unread,
    /// subscriptions open or half a message sent: the daemon answers the callers that wait,
    /// and every descriptor it took for the others comes back.
    func testConcurrentHangUpsWithCallsInFlightLeaveNoDescriptorBehind() throws {
        let observer = try daemon.client()
        let settled = { try observer.call("io.adorch.Manager.GetStatus").parameters["connections"]?["open"]?.intValue == 2 }
        try eventually("only the polite client and the observer connected", settled)
        let descriptors = { [pid = daemon.pid] in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1 }
        let baseline = descriptors()
        let answered = LockedValue(0)
        let failures = LockedValue<[String]>([])
        let socket = daemon.socket
        let workers = 8, rounds = 600
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            for round in 0..<rounds {
                do {
                    let client = try RawClient(socket)
                    switch (worker + round) % 6 {
                    case 0: break
                    case 1: client.send(#"{"method":"org.varlink.service.GetInfo"}"#)
                    case 2: client.send(#"{"method":"io.adorch.Ads.Show","parameters":{"slot":"interstitial_main"}}"#)
                    case 3:
                        client.send(#"{"method":"io.adorch.Ads.Subscribe","more":true}"#)
                        let first = client.readMessage()
                        if !first.contains(#""kind":"subscribed""#) { failures.withLock { $0.append("Subscribe: \(first)") } }
                    case 4: client.send(#"{"method":"io.adorch.Ads.ListSl"#, nul: false)
                    default:
                        client.send(#"{"method":"io.adorch.Ads.ListSlots"}"#)
                        let reply = client.readMessage()
                        if reply.contains("interstitial_main") { answered.withLock { $0 += 1 } } else { failures.withLock { $0.append("ListSlots: \(reply)") } }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        XCTAssertEqual(answered.withLock { $0 }, workers * rounds / 6)
        try eventually("the hung-up connections closed", timeout: .seconds(10).scaled, settled)
        XCTAssertEqual(descriptors(), baseline, "the daemon's open descriptors after \(workers * rounds) connections")
        XCTAssertTrue(daemon.isRunning, daemon.howItEnded ?? "")
    }

    /// Re-checks a condition on each fresh reply until it holds (for state that changes
    /// without an engine event, such as connections closing).
    private func eventually(_ what: String, timeout: Duration = .seconds(5), _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            if ContinuousClock.now >= deadline { throw TestFailure("timed out waiting for \(what)") }
        }
    }
}

/// A client that keeps making ordinary calls on its own connection and records any error.
final class PoliteClient: Sendable {
    private struct State {
        var running = true
        var calls = 0
        var errors: [String] = []
    }

    private let socket: String
    private let state = LockedValue(State())
    private let done = DispatchSemaphore(value: 0)
    private let firstCall = DispatchSemaphore(value: 0)

    init(socket: String) { self.socket = socket }

    func start() {
        Thread.detachNewThread { [self] in
            defer { done.signal() }
            do {
                let client = try VarlinkClient(path: socket)
                while state.withLock({ $0.running }) {
                    for method in ["io.adorch.Ads.ListSlots", "org.varlink.service.GetInfo"] {
                        let reply = try client.call(method)
                        record(reply.error.map { "\(method): \($0)" })
                    }
                }
            } catch {
                record("\(error)")
            }
        }
    }

    private func record(_ error: String?) {
        let first = state.withLock {
            $0.calls += 1
            if let error { $0.errors.append(error) }
            return $0.calls == 1
        }
        if first { firstCall.signal() }
    }

    func waitForFirstCall() -> Bool { firstCall.wait(timeout: .now() + 10) == .success }

    func stop() -> (calls: Int, errors: [String]) {
        state.withLock { $0.running = false }
        done.wait()
        return state.withLock { ($0.calls, $0.errors) }
    }
}
