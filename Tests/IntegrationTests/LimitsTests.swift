import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// Issue 8, acceptance 2: each limit, hit on purpose by one client, leaves another client's
/// calls answered in normal time, and the offender gets a named error or a logged disconnect.
final class LimitsTests: XCTestCase {
    /// A client that behaves: connected before the offender starts, it must keep getting
    /// answers, each well within `normal`.
    private final class Bystander {
        let client: VarlinkClient
        var slowest: Duration = .zero
        init(_ daemon: DaemonProcess) throws { client = try daemon.client(timeout: .seconds(5)) }

        func check(file: StaticString = #filePath, line: UInt = #line) throws {
            let started = ContinuousClock.now
            let reply = try client.call("io.adorch.Ads.ListSlots")
            slowest = max(slowest, ContinuousClock.now - started)
            XCTAssertNil(reply.error, file: file, line: line)
            XCTAssertEqual(reply.parameters["slots"]?.arrayValue?.isEmpty, false, file: file, line: line)
        }
    }

    /// The bound for "normal time" on this shared machine: generous, yet far below any
    /// timeout a stuck daemon would produce.
    private let normal: Duration = .milliseconds(500)

    private func daemon(limits: String, fileLimit: Int? = nil) throws -> DaemonProcess {
        let daemon = try DaemonProcess(config: simConfig(slots: """
        [limits]
        \(limits)

        [[slots]]
        id = "s"
        format = "interstitial"
        buffer = 10
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "latency_ms=0"
        """), fileLimit: fileLimit)
        try daemon.waitFor("s full") { try daemon.allSlotsFull() }
        return daemon
    }

    func testTheConnectionsOfOneUidAreLimited() throws {
        let daemon = try daemon(limits: "max_connections_per_uid = 4")
        let bystander = try Bystander(daemon)
        // uid 4321 holds four connections: four subscribers of adorch-bench's load generator.
        let holder = Process()
        let argv = try asUser(4321, [try RunFolder.copy(of: productsDirectory.appendingPathComponent("adorch-bench")).path,
                                     "subscribe", "--socket", daemon.socket, "--count", "4"])
        holder.executableURL = URL(fileURLWithPath: argv[0])
        holder.arguments = Array(argv.dropFirst())
        let stdin = Pipe(), stdout = Pipe()
        holder.standardInput = stdin
        holder.standardOutput = stdout
        try holder.run()
        defer {
            try? stdin.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        var said = Data()
        while !String(decoding: said, as: UTF8.self).contains("4 subscribed") {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { throw TestFailure("the subscribers did not attach:\n\(daemon.log)") }
            said.append(chunk)
        }
        let over = try adorchctl(as: 4321, daemon, ["slots"])
        XCTAssertNotEqual(over.status, 0)
        XCTAssertTrue(over.stderr.contains("io.adorch.TooManyConnections: uid 4321 has 4 connections open, the most one user may"), over.stderr)
        XCTAssertTrue(daemon.log.contains("refusing a connection: over the limit of 4 connections for uid 4321"), daemon.log)
        try bystander.check()
        // Another user is not held to 4321's share.
        let other = try adorchctl(as: 4322, daemon, ["slots"])
        XCTAssertEqual(other.status, 0, other.stderr)
        let status = try bystander.client.call("io.adorch.Manager.GetStatus").parameters
        XCTAssertEqual(status["connections"]?["refused"]?.intValue, 1)
        XCTAssertEqual(status["limits"]?["max_connections_per_uid"]?.intValue, 4)
        XCTAssertLessThan(bystander.slowest, normal)
    }

    func testTheConnectionsInAllAreLimited() throws {
        let daemon = try daemon(limits: "max_connections = 8\nroot_reserved_connections = 0")
        let bystander = try Bystander(daemon)
        let held = try (0..<7).map { _ in try RawClient(daemon.socket) }  // with the bystander's, 8
        let over = try RawClient(daemon.socket)
        over.send(#"{"method":"org.varlink.service.GetInfo"}"#)
        let answer = over.readToEnd()
        XCTAssertTrue(answer.contains(#""error":"io.adorch.TooManyConnections""#), answer)
        XCTAssertTrue(answer.contains("the daemon serves at most 8 connections"), answer)
        try bystander.check()
        XCTAssertTrue(daemon.log.contains("refusing a connection: over the limit of 8 connections"), daemon.log)
        XCTAssertEqual(held.count, 7)
        XCTAssertLessThan(bystander.slowest, normal)
    }

    /// Out of descriptors (here a limit of 64; under systemd, more clients than the limit):
    /// new connections wait in the listen backlog and one line says why, the connected
    /// clients are answered in normal time, and the waiting ones once descriptors are free.
    func testRunningOutOfDescriptorsMakesNewConnectionsWaitNotFail() throws {
        let daemon = try daemon(limits: "", fileLimit: 64)
        let bystander = try Bystander(daemon)
        var crowd = try (0..<48).map { _ in try RawClient(daemon.socket) }
        for client in crowd { client.send(#"{"method":"org.varlink.service.GetInfo"}"#) }
        let deadline = ContinuousClock.now + Duration.seconds(10).scaled
        while !daemon.log.contains("cannot accept connections: Too many open files") {
            guard ContinuousClock.now < deadline else { throw daemon.diagnosis("no word of running out of descriptors") }
            try bystander.check()
        }
        try bystander.check()
        XCTAssertLessThan(bystander.slowest, normal)
        // Half the crowd leaves: the rest, those that waited included, get their answers.
        let stayed = Array(crowd.suffix(24))
        crowd.removeAll()
        for client in stayed {
            XCTAssertTrue(client.readMessage().contains(#""product":"adorchd""#), "a connection that waited is served")
        }
        try bystander.check()  // after the backlog is empty: the line saying so is written
        XCTAssertEqual(daemon.log.components(separatedBy: "cannot accept connections").count - 1, 1, "one line for one shortage")
        XCTAssertEqual(daemon.log.components(separatedBy: "accepting connections again").count - 1, 1, "and one for its end")
        XCTAssertTrue(daemon.isRunning)
    }

    func testHalfAMessageOrAnOversizedOneIsCutOff() throws {
        let daemon = try daemon(limits: "partial_message_timeout_ms = 300")
        let bystander = try Bystander(daemon)
        let stalled = try RawClient(daemon.socket)
        stalled.send(#"{"method":"org.varlink.service.GetIn"#, nul: false)
        try bystander.check()
        let started = ContinuousClock.now
        let answer = stalled.readToEnd()
        XCTAssertTrue(answer.contains(#""error":"io.adorch.IncompleteMessage""#), answer)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "cut off after the timeout, not never")
        XCTAssertTrue(daemon.log.contains("bytes of a message and no end within 0.3 seconds"), daemon.log)

        let huge = try RawClient(daemon.socket)
        huge.send(String(repeating: "x", count: 2 << 20), nul: false)
        XCTAssertTrue(huge.readToEnd().contains("larger than 1048576 bytes"))
        try bystander.check()
        XCTAssertLessThan(bystander.slowest, normal)
    }

    func testASubscriberThatStopsReadingIsDisconnectedNotBuffered() throws {
        let daemon = try daemon(limits: "max_unsent_bytes = 65536\nshows_per_second_per_uid = 0")
        let bystander = try Bystander(daemon)
        let sleeper = try RawClient(daemon.socket, receiveBuffer: 4096)
        sleeper.send(#"{"method":"io.adorch.Ads.Subscribe","more":true}"#)
        XCTAssertTrue(sleeper.readMessage().contains(#""kind":"subscribed""#))
        // Events pile up for the sleeper while the bystander shows and reports.
        let worker = try daemon.client(timeout: .seconds(5))
        var shows = 0
        try daemon.waitFor("the sleeper dropped", timeout: .seconds(30)) {
            let reply = try worker.call("io.adorch.Ads.Show", ["slot": "s"])
            if let ad = reply.parameters["ad"]?["id"]?.stringValue {
                shows += 1
                XCTAssertNil(try worker.call("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "close"]).error)
            }
            try bystander.check()
            return daemon.log.contains("disconnecting a client that does not read its replies")
        }
        XCTAssertGreaterThan(shows, 0)
        XCTAssertTrue(daemon.log.contains("the limit is 65536"), daemon.log)
        // What it gets when it finally reads: the events that fit, then the final error.
        let rest = sleeper.readToEnd()
        XCTAssertTrue(rest.contains(#""error":"io.adorch.ReaderTooSlow""#), String(rest.suffix(400)))
        XCTAssertEqual(try daemon.status()["subscribers"]?.intValue, 0)
        XCTAssertLessThan(bystander.slowest, normal)
    }

    func testShowIsRateLimitedPerUid() throws {
        let daemon = try daemon(limits: "shows_per_second_per_uid = 0.1\nshow_burst_per_uid = 2")
        let bystander = try Bystander(daemon)
        var limited: [String] = []
        for _ in 0..<6 {
            let greedy = try adorchctl(as: 4321, daemon, ["show", "s"])
            if greedy.status != 0 { limited.append(greedy.stderr) }
        }
        XCTAssertEqual(limited.count, 4, "a burst of 2, then one every 10 s")
        XCTAssertTrue(limited.first?.contains("io.adorch.Ads.RateLimited: uid 4321 called Show faster than [limits] shows_per_second_per_uid allows; try again in") ?? false,
                      "\(limited)")
        // Another uid has its own bucket, and root (the operator) is not limited.
        XCTAssertEqual(try adorchctl(as: 4322, daemon, ["show", "s"]).status, 0)
        for _ in 0..<3 { XCTAssertNil(try bystander.client.call("io.adorch.Ads.Show", ["slot": "s"]).error) }
        try bystander.check()
        let limits = try bystander.client.call("io.adorch.Manager.GetStatus").parameters["limits"]
        XCTAssertEqual(limits?["shows_rate_limited"]?.intValue, 4)
        XCTAssertEqual(limits?["shows_per_second_per_uid"]?.doubleValue, 0.1)
        XCTAssertTrue(daemon.log.contains("Show rate limit: uid 4321 may show again in"), daemon.log)
        XCTAssertLessThan(bystander.slowest, normal)
    }
}
