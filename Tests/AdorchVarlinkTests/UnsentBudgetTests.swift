import Foundation
import XCTest

@testable import AdorchVarlink

/// Unread replies are bounded per uid, not only per connection.
final class UnsentBudgetTests: XCTestCase {
    /// Issue 20: subscribers that never read took the daemon to gigabytes, each within its
    /// connection's limit. Their uid's sum stays within max_unsent_bytes_per_uid: the
    /// connection that would push it over is dropped as a slow reader.
    func testTheUnsentBytesOfOneUidAreBounded() throws {
        try requireRoot()
        let perUID = 1 << 20
        let test = try TestServer(limits: VarlinkLimits(maxUnsentBytes: 8 << 20, maxUnsentBytesPerUID: perUID))
        let sleepers = try (0..<6).map { _ in try RawConnection(test.path, uid: 4321, receiveBuffer: 4096) }
        for sleeper in sleepers {
            XCTAssertTrue(sleeper.call("org.example.test.Stream", more: true))
            XCTAssertEqual(sleeper.readMessage(), #"{"continues":true,"parameters":{"n":0}}"#)
        }
        try test.wait("every stream started") { test.record.allStreams.count == sleepers.count }
        let event: JSONValue = .string(String(repeating: "e", count: 64 << 10))
        var most = 0
        for _ in 0..<100 {
            test.server.broadcast(["n": 1, "payload": event], to: test.record.allStreams)
            most = max(most, test.server.queue.sync { test.server.unsentBytes(of: 4321) })
        }
        XCTAssertLessThanOrEqual(most, perUID)
        XCTAssertGreaterThan(test.server.counts.droppedSlowReaders, 0)
        XCTAssertEqual(test.logLines("does not read its replies: uid 4321 has").count, 1, "one line a minute per uid and kind")
        // A dropped one reads the events that were written, then the reason.
        let dropped = sleepers.first { $0.readToEnd().last?.contains("io.adorch.ReaderTooSlow") == true }
        XCTAssertNotNil(dropped)
        for sleeper in sleepers { _ = sleeper.readToEnd() }
        try test.wait("all dropped or drained") { test.server.queue.sync { test.server.unsentBytes(of: 4321) } == 0 }
    }

    /// Root, the operator, is held only to the per-connection limit.
    func testRootIsHeldOnlyToTheConnectionLimit() throws {
        let test = try TestServer(limits: VarlinkLimits(maxUnsentBytes: 1 << 20, maxUnsentBytesPerUID: 64 << 10))
        guard geteuid() == 0 else { throw XCTSkip("needs root") }
        let sleeper = try RawConnection(test.path, receiveBuffer: 4096)
        XCTAssertTrue(sleeper.call("org.example.test.Stream", more: true))
        XCTAssertNotNil(sleeper.readMessage())
        try test.wait("the stream started") { test.record.allStreams.count == 1 }
        let event: JSONValue = .string(String(repeating: "e", count: 32 << 10))
        for _ in 0..<16 { test.server.broadcast(["payload": event], to: test.record.allStreams) }
        XCTAssertGreaterThan(test.server.queue.sync { test.server.unsentBytes(of: 0) }, 64 << 10)
        XCTAssertEqual(test.server.counts.droppedSlowReaders, 0)
        for _ in 0..<40 { test.server.broadcast(["payload": event], to: test.record.allStreams) }
        XCTAssertEqual(test.server.counts.droppedSlowReaders, 1)
        XCTAssertEqual(test.logLines("bytes unsent, the limit is 1048576").count, 1)
    }
}
