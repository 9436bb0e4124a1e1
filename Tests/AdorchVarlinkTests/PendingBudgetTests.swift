import Foundation
import XCTest

@testable import AdorchVarlink

/// Calls received and not yet handled are bounded in bytes, per connection and per uid.
final class PendingBudgetTests: XCTestCase {
    static let messageSize = 64 << 10
    static let padding: JSONValue = .string(String(repeating: "p", count: 16 << 10))

    /// `count` Echo calls of 16 KiB each, numbered from 0.
    static func calls(_ count: Int) -> [UInt8] {
        (0..<count).flatMap { VarlinkWire.call("org.example.test.Echo", ["n": .int(Int64($0)), "pad": padding], more: false) }
    }

    /// Starts a Stream on `client`, so the calls sent after it wait behind it.
    static func startStream(_ client: RawConnection) {
        XCTAssertTrue(client.call("org.example.test.Stream", more: true))
        XCTAssertEqual(client.readMessage(), #"{"continues":true,"parameters":{"n":0}}"#)
    }

    /// Issue 20: a call kept in progress (Subscribe) and 1 MB calls pipelined behind it took
    /// the daemon to 2 GB, as max_queued_calls counts calls, not bytes. A connection is not
    /// read while a largest message's worth of calls waits; nothing is dropped.
    func testQueuedCallsAreBoundedInBytes() throws {
        let test = try TestServer(limits: VarlinkLimits(maxMessageSize: Self.messageSize))
        let client = try RawConnection(test.path)
        Self.startStream(client)
        let count = 64  // 1 MiB of calls: 16 largest messages
        let sent = Atomic(false)
        let writer = Thread {
            client.send(Self.calls(count))
            sent.set(true)
        }
        writer.start()
        try test.wait("a largest message's worth of calls queued") { test.server.queue.sync { test.server.pendingBytes(of: 0) } >= Self.messageSize }
        // Proving that reading stays paused takes a while of it not happening.
        var most = 0
        for _ in 0..<30 {
            most = max(most, test.server.queue.sync { test.server.pendingBytes(of: 0) })
            usleep(10_000)
        }
        // One largest message queued, one read of 64 KiB past it, and a partial message.
        XCTAssertLessThanOrEqual(most, 3 * Self.messageSize)
        XCTAssertFalse(sent.get(), "the writer waits on the socket")
        test.record.allStreams.first?.reply(["n": 1])
        XCTAssertEqual(client.readMessage(), #"{"parameters":{"n":1}}"#)
        for n in 0..<count {
            guard let reply = client.readMessage() else { return XCTFail("no reply to call \(n)") }
            guard reply == #"{"parameters":{"n":\#(n)}}"# else { return XCTFail("call \(n) got \(reply)") }
        }
        XCTAssertFalse(client.isClosed())
        XCTAssertEqual(test.server.queue.sync { test.server.pendingBytes(of: 0) }, 0)
    }

    /// Issue 20: the same over many connections of one uid. Their sum stays within
    /// max_pending_bytes_per_uid: the connection whose read would take it over is answered
    /// TooManyPendingBytes and closed, and what it sent is released.
    func testThePendingBytesOfOneUidAreBounded() throws {
        try requireRoot()
        let perUID = 256 << 10
        let test = try TestServer(limits: VarlinkLimits(maxMessageSize: Self.messageSize, maxPendingBytesPerUID: perUID))
        let clients = try (0..<6).map { _ in try RawConnection(test.path, uid: 4321) }
        for client in clients { Self.startStream(client) }
        // Each would hold more than a largest message: six hold more than the budget.
        for client in clients { Thread { client.send(Self.calls(12)) }.start() }
        var most = 0
        try test.wait("a connection refused") {
            most = max(most, test.server.queue.sync { test.server.pendingBytes(of: 4321) })
            return test.server.counts.droppedPendingBytes > 0
        }
        XCTAssertLessThanOrEqual(most, perUID)
        let refused = clients.filter { client in
            var byte: UInt8 = 0
            return recv(client.fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK)) == 1
        }
        XCTAssertFalse(refused.isEmpty)
        for client in refused {
            let messages = client.readToEnd()
            XCTAssertEqual(messages.count, 1, "the error ends the stream: \(messages)")
            XCTAssertTrue(messages.last?.contains("io.adorch.TooManyPendingBytes") == true, "\(messages)")
            XCTAssertTrue(messages.last?.contains("max_pending_bytes_per_uid") == true, "the message names the budget")
        }
        XCTAssertEqual(test.logLines("uid 4321 has").count, 1, "one line a minute per uid and kind")
        XCTAssertEqual(test.logLines("the limit is \(perUID)").count, 1)
        XCTAssertLessThanOrEqual(test.server.queue.sync { test.server.pendingBytes(of: 4321) }, perUID)
        // The others are served on.
        for stream in test.record.allStreams { stream.reply(["n": 1]) }
        try test.wait("every call handled") { test.server.queue.sync { test.server.pendingBytes(of: 4321) } == 0 }
    }

    /// Root, the operator, is held only to the per-connection bound.
    func testRootIsExemptFromThePendingBudget() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root") }
        let test = try TestServer(limits: VarlinkLimits(maxMessageSize: Self.messageSize, maxPendingBytesPerUID: 64 << 10))
        let clients = try (0..<3).map { _ in try RawConnection(test.path) }
        for client in clients { Self.startStream(client) }
        for client in clients { Thread { client.send(Self.calls(12)) }.start() }
        try test.wait("root over the budget") { test.server.queue.sync { test.server.pendingBytes(of: 0) } > 2 * Self.messageSize }
        XCTAssertEqual(test.server.counts.droppedPendingBytes, 0)
        for stream in test.record.allStreams { stream.reply(["n": 1]) }
        for client in clients {
            XCTAssertEqual(client.readMessage(), #"{"parameters":{"n":1}}"#)
            for n in 0..<12 { XCTAssertEqual(client.readMessage(), #"{"parameters":{"n":\#(n)}}"#) }
        }
    }
}

/// A flag one thread sets and another reads.
private final class Atomic: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Bool
    init(_ value: Bool) { self.value = value }
    func set(_ new: Bool) { lock.withLock { value = new } }
    func get() -> Bool { lock.withLock { value } }
}
