import AdorchLocking
import Foundation
import XCTest

@testable import AdorchVarlink

/// One client's bytes, however they come, cost the others a turn, not their answers.
final class FairnessTests: XCTestCase {
    /// Issue 20: 900 KB of a message without its NUL, then a byte a millisecond. The others
    /// are answered meanwhile, and the dripper is cut off at the deadline counted from its
    /// first byte, however it keeps sending.
    func testADrippingClientStallsNobodyAndIsCutOffOnTime() throws {
        let timeout = Duration.milliseconds(800)
        let clock = ManualClock()
        let test = try TestServer(limits: VarlinkLimits(partialMessageTimeout: timeout), clock: clock.varlink)
        let bystander = try VarlinkClient(path: test.path, timeout: .seconds(5))
        let dripper = try RawConnection(test.path)
        let cutOff = LockedDuration()
        let dripping = LockedValue(0)
        let drip = Thread {
            let started = ContinuousClock.now
            _ = dripper.send(Array(#"{"method":"org.example.test.Echo","parameters":{"n":1,"pad":""#.utf8) + [UInt8](repeating: 0x61, count: 900_000))
            // A byte a millisecond (the drip's pace, not a wait for the server) until it is cut off.
            while ContinuousClock.now - started < .seconds(30), dripper.send([0x61]) {
                dripping.withLock { $0 += 1 }
                usleep(1000)
            }
            cutOff.set(ContinuousClock.now - started)
        }
        drip.start()
        var slowest = Duration.zero
        for _ in 0..<200 {
            let started = ContinuousClock.now
            XCTAssertNil(try bystander.call("org.varlink.service.GetInfo").error)
            slowest = max(slowest, ContinuousClock.now - started)
        }
        // The 900 kB went through the socket, so the server has read the message's beginning.
        try test.wait("the drip begun") { dripping.withLock { $0 } > 10 }
        // The drip goes on; just short of its deadline it is not cut off, at the deadline it is.
        clock.advance(by: timeout - .milliseconds(1))
        test.server.sweepNow()
        XCTAssertNil(cutOff.value, "cut off before its deadline")
        XCTAssertEqual(test.server.counts.incompleteMessages, 0)
        clock.advance(by: .milliseconds(1))
        test.server.sweepNow()
        try test.wait("the dripper cut off") { cutOff.value != nil }
        XCTAssertLessThan(slowest, .milliseconds(500), "a bystander's call waited behind the dripper")
        let answer = dripper.readToEnd()
        XCTAssertEqual(answer.count, 1)
        XCTAssertTrue(answer.first?.contains(#""error":"io.adorch.IncompleteMessage""#) == true, "\(answer)")
        XCTAssertEqual(test.server.counts.incompleteMessages, 1)
        XCTAssertEqual(test.logLines("bytes of a message and no end within").count, 1)
    }

    /// The deadline is for one message: a client that keeps ending messages is never cut off,
    /// even when every read stops inside the next one.
    func testMessagesThatEndInTimeAreNeverCutOff() throws {
        let clock = ManualClock()
        let test = try TestServer(limits: VarlinkLimits(partialMessageTimeout: .milliseconds(200)), clock: clock.varlink)
        let client = try RawConnection(test.path)
        let call = VarlinkWire.call("org.example.test.Echo", ["n": 7], more: false)
        let half = call.count / 2
        XCTAssertTrue(client.send(Array(call[..<half])))
        // Each message ends 150 ms after it began, 1.2 s in all: never one over 200 ms.
        for _ in 0..<8 {
            clock.advance(by: .milliseconds(150))
            test.server.sweepNow()
            XCTAssertTrue(client.send(Array(call[half...]) + Array(call[..<half])))
            XCTAssertEqual(client.readMessage(), #"{"parameters":{"n":7}}"#)
        }
        XCTAssertEqual(test.server.counts.incompleteMessages, 0)
        // The half message left now is cut off once its 200 ms have passed.
        clock.advance(by: .milliseconds(200))
        test.server.sweepNow()
        XCTAssertTrue(client.readToEnd().last?.contains(#""error":"io.adorch.IncompleteMessage""#) == true)
        XCTAssertEqual(test.server.counts.incompleteMessages, 1)
    }

    /// Issue 20, lesser: 1,024 pipelined calls dropped the connection. With a small queue,
    /// the socket is read only as calls leave it, and every call is answered, in order.
    func testPipelinedCallsWaitForRoomAndAreAllAnsweredInOrder() throws {
        let test = try TestServer(limits: VarlinkLimits(maxQueuedCalls: 4))
        let client = try RawConnection(test.path)
        let calls = 5000
        let writer = Thread {
            var bytes: [UInt8] = []
            for n in 0..<calls { bytes += VarlinkWire.call("org.example.test.Echo", ["n": .int(Int64(n))], more: false) }
            client.send(bytes)
        }
        writer.start()
        for n in 0..<calls {
            guard let reply = client.readMessage() else { return XCTFail("no reply to call \(n)") }
            guard reply == #"{"parameters":{"n":\#(n)}}"# else { return XCTFail("call \(n) got \(reply)") }
        }
        XCTAssertFalse(client.isClosed())
    }

    /// A client that sends its calls and shuts down its sending side (a half-close) is still
    /// answered every one, in order, and then the daemon closes.
    func testAHalfClosedClientGetsEveryAnswerThenTheClose() throws {
        let test = try TestServer(limits: VarlinkLimits())
        let client = try RawConnection(test.path)
        let calls = 50
        var bytes: [UInt8] = []
        for n in 0..<calls { bytes += VarlinkWire.call("org.example.test.Echo", ["n": .int(Int64(n))], more: false) }
        XCTAssertTrue(client.send(bytes))
        XCTAssertEqual(shutdown(client.fd, Int32(SHUT_WR)), 0)
        for n in 0..<calls {
            guard let reply = client.readMessage() else { return XCTFail("no reply to call \(n)") }
            XCTAssertEqual(reply, #"{"parameters":{"n":\#(n)}}"#)
        }
        XCTAssertNil(client.readMessage(), "closed once everything is answered")
    }

    /// A flood of calls on one connection takes turns with another's: the other is answered
    /// long before the flood is.
    func testAFloodOfCallsTakesTurnsWithOthers() throws {
        let test = try TestServer(limits: VarlinkLimits())
        let flooder = try RawConnection(test.path)
        let bystander = try VarlinkClient(path: test.path, timeout: .seconds(5))
        let bytes = [UInt8](repeating: 0, count: 20_000).flatMap { _ in VarlinkWire.call("org.varlink.service.GetInfo", [:], more: false) }
        let reader = Thread { while flooder.readMessage() != nil {} }
        reader.start()
        let writer = Thread { flooder.send(bytes) }
        writer.start()
        let started = ContinuousClock.now
        XCTAssertNil(try bystander.call("org.varlink.service.GetInfo").error)
        XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(500))
    }
}

/// A duration one thread sets and another reads.
final class LockedDuration: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Duration?
    func set(_ value: Duration) { lock.withLock { stored = value } }
    var value: Duration? { lock.withLock { stored } }
}
