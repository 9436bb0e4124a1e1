import Foundation
import XCTest

@testable import AdorchVarlink

/// The connection limits: a refused connection is answered at once and holds nothing, root
/// keeps its reserve, and idle connections go.
final class ConnectionLimitTests: XCTestCase {
    private func assertRefusedAtOnce(_ connection: RawConnection, saying text: String, file: StaticString = #filePath, line: UInt = #line) {
        // Before any call: the answer is there to read, then the end of the stream.
        let answer = connection.readToEnd()
        XCTAssertEqual(answer.count, 1, "\(answer)", file: file, line: line)
        XCTAssertTrue(answer.first?.contains(#""error":"io.adorch.TooManyConnections""#) == true, "\(answer)", file: file, line: line)
        XCTAssertTrue(answer.first?.contains(text) == true, "\(answer)", file: file, line: line)
    }

    /// Issue 20: one uid's idle connections past its limit were kept open until their first
    /// call and counted against everyone's limit.
    func testAUidOverItsLimitIsRefusedAtOnceAndHoldsNothing() throws {
        try requireRoot()
        let test = try TestServer(limits: VarlinkLimits(maxConnections: 6, rootReservedConnections: 0, maxConnectionsPerUID: 3))
        let held = try (0..<3).map { _ in try RawConnection(test.path, uid: 4321) }
        for connection in held {
            XCTAssertTrue(connection.call("org.example.test.Echo", ["n": 1]))
            XCTAssertEqual(connection.readMessage(), #"{"parameters":{"n":1}}"#)
        }
        var refused: [RawConnection] = []
        for _ in 0..<5 {
            let over = try RawConnection(test.path, uid: 4321)
            assertRefusedAtOnce(over, saying: "uid 4321 has 3 connections open, the most one user may")
            refused.append(over)
        }
        // The refused ones, still open on the client's side, count toward nothing.
        let others = try (0..<3).map { _ in try RawConnection(test.path, uid: 4322) }
        for connection in others {
            XCTAssertTrue(connection.call("org.example.test.Echo", ["n": 2]))
            XCTAssertEqual(connection.readMessage(), #"{"parameters":{"n":2}}"#)
        }
        let counts = test.server.counts
        XCTAssertEqual(counts.open, 6)
        XCTAssertEqual(counts.refused, 5)
        XCTAssertEqual(counts.accepted, 11)
        XCTAssertEqual(test.logLines("refusing a connection: over the limit of 3 connections for uid 4321").count, 1, "one line a minute per uid and kind")
        XCTAssertTrue(test.logLines("refusing a connection").allSatisfy { $0.hasSuffix("uid=4321") }, "\(test.record.log)")
    }

    /// The blocking client reads the refusal even when the daemon closed before its call went out.
    func testTheClientReportsTheRefusalNotABrokenPipe() throws {
        let test = try TestServer(limits: VarlinkLimits(maxConnections: 1, rootReservedConnections: 0))
        let held = try VarlinkClient(path: test.path)
        XCTAssertNil(try held.call("org.varlink.service.GetInfo").error)
        let over = try VarlinkClient(path: test.path)
        try test.wait("the refusal") { test.server.counts.refused == 1 }
        let reply = try over.call("org.varlink.service.GetInfo")
        XCTAssertEqual(reply.error, "io.adorch.TooManyConnections")
        XCTAssertEqual(reply.parameters["message"]?.stringValue, "the daemon serves at most 1 connections")
    }

    /// Of max_connections, root_reserved_connections are for root only: the operator gets in
    /// when the apps have taken the rest.
    func testRootKeepsItsReserve() throws {
        try requireRoot()
        let test = try TestServer(limits: VarlinkLimits(maxConnections: 4, rootReservedConnections: 2))
        let apps = try [4321, 4322].map { try RawConnection(test.path, uid: uid_t($0)) }
        for app in apps { XCTAssertTrue(app.call("org.example.test.Echo", ["n": 3])) }
        for app in apps { XCTAssertEqual(app.readMessage(), #"{"parameters":{"n":3}}"#) }
        assertRefusedAtOnce(try RawConnection(test.path, uid: 4323), saying: "the daemon serves at most 4 connections, 2 of them only for root")
        let operators = try (0..<2).map { _ in try RawConnection(test.path) }
        for connection in operators {
            XCTAssertTrue(connection.call("org.example.test.Echo", ["n": 4]))
            XCTAssertEqual(connection.readMessage(), #"{"parameters":{"n":4}}"#)
        }
        assertRefusedAtOnce(try RawConnection(test.path), saying: "the daemon serves at most 4 connections")
        XCTAssertEqual(test.server.counts.refused, 2)
    }

    /// Idle connections close; one with a call in progress (a subscriber) or part of a
    /// message is not idle.
    func testIdleConnectionsAreClosedButSubscribersStay() throws {
        let idle = Duration.milliseconds(300)
        let clock = ManualClock()
        let test = try TestServer(limits: VarlinkLimits(partialMessageTimeout: .seconds(10), idleConnectionTimeout: idle), clock: clock.varlink)
        let silent = try RawConnection(test.path)
        let caller = try RawConnection(test.path)
        let subscriber = try RawConnection(test.path)
        XCTAssertTrue(subscriber.call("org.example.test.Stream", more: true))
        XCTAssertEqual(subscriber.readMessage(), #"{"continues":true,"parameters":{"n":0}}"#)
        XCTAssertTrue(caller.call("org.example.test.Echo", ["n": 5]))
        XCTAssertEqual(caller.readMessage(), #"{"parameters":{"n":5}}"#)
        // Just short of the timeout: nobody is closed.
        clock.advance(by: idle - .milliseconds(1))
        test.server.sweepNow()
        XCTAssertEqual(test.server.counts.closedIdle, 0)
        clock.advance(by: .milliseconds(1))
        test.server.sweepNow()
        XCTAssertEqual(silent.readToEnd(), [], "closed, with nothing to say")
        XCTAssertEqual(caller.readToEnd(), [])
        // Three idle timeouts later, the subscriber still gets its events.
        clock.advance(by: idle * 3)
        test.server.sweepNow()
        test.server.broadcast(["n": 1], to: test.record.allStreams)
        XCTAssertEqual(subscriber.readMessage(), #"{"continues":true,"parameters":{"n":1}}"#)
        XCTAssertEqual(test.server.counts.closedIdle, 2)
        XCTAssertEqual(test.server.counts.open, 1)
    }
}
