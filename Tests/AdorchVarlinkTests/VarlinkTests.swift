import Foundation
import XCTest

@testable import AdorchVarlink

final class FramerTests: XCTestCase {
    func testSplitsOnNulAndKeepsTheRest() throws {
        var framer = VarlinkFramer(maxMessageSize: 100)
        XCTAssertEqual(try framer.append(Data("{\"a\":1}\0{\"b\"".utf8)), [Data("{\"a\":1}".utf8)])
        XCTAssertEqual(framer.pendingBytes, 4)
        XCTAssertEqual(try framer.append(Data(":2}\0\0".utf8)), [Data("{\"b\":2}".utf8), Data()])
        XCTAssertEqual(framer.pendingBytes, 0)
    }

    func testRefusesAMessageLargerThanTheLimitEvenBeforeItsNul() {
        var framer = VarlinkFramer(maxMessageSize: 8)
        XCTAssertThrowsError(try framer.append(Data(repeating: 0x41, count: 9))) {
            XCTAssertEqual($0 as? VarlinkFramer.Failure, .messageTooLarge(limit: 8))
        }
        var whole = VarlinkFramer(maxMessageSize: 8)
        XCTAssertThrowsError(try whole.append(Data(repeating: 0x41, count: 9) + Data([0])))
        var exact = VarlinkFramer(maxMessageSize: 8)
        XCTAssertEqual(try exact.append(Data(repeating: 0x41, count: 8) + Data([0])).count, 1)
    }

    /// Issue 20: a message dripped a byte at a time was searched again from its start on
    /// every byte. Each byte is searched once: 4 MB and 100,000 single bytes take
    /// milliseconds (searched again each time, 400 GB).
    func testAMessageDrippedAByteAtATimeIsSearchedOnce() throws {
        var framer = VarlinkFramer(maxMessageSize: 8 << 20)
        let started = ContinuousClock.now
        try [UInt8](repeating: 0x41, count: 4_000_000).withUnsafeBytes { try framer.append($0) }
        var byte: UInt8 = 0x41
        for _ in 0..<100_000 { try withUnsafeBytes(of: &byte) { try framer.append($0) } }
        byte = 0
        try withUnsafeBytes(of: &byte) { try framer.append($0) }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
        XCTAssertEqual(framer.takeMessage { $0.count }, 4_100_000)
    }

    /// Messages cut at every point, taken as they come or left to pile up, come out whole and
    /// in order.
    func testMessagesCutAnywhereComeOutWholeAndInOrder() throws {
        let messages = (0..<300).map { Array(String(repeating: "m\($0)", count: $0 % 37 + 1).utf8) }
        let stream: [UInt8] = messages.flatMap { message -> [UInt8] in message + [0] }
        var generator = SystemRandomNumberGenerator()
        var framer = VarlinkFramer(maxMessageSize: 1 << 16)
        var out: [[UInt8]] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + Int.random(in: 1...300, using: &generator))
            try stream[offset..<end].withUnsafeBytes { try framer.append($0) }
            offset = end
            if Bool.random(using: &generator) {
                while let message = framer.takeMessage({ Array($0) }) { out.append(message) }
            }
        }
        while let message = framer.takeMessage({ Array($0) }) { out.append(message) }
        XCTAssertEqual(out, messages)
        XCTAssertEqual(framer.pendingBytes, 0)
    }

    /// A large message's storage goes once it is taken, not at the next read; a closed
    /// connection's goes at once.
    func testStorageIsGivenBackOnceDrainedAndOnRelease() throws {
        var framer = VarlinkFramer(maxMessageSize: 1 << 20)
        try ([UInt8](repeating: 0x41, count: 900_000) + [0]).withUnsafeBytes { try framer.append($0) }
        XCTAssertGreaterThan(framer.reservedBytes, 900_000)
        XCTAssertEqual(framer.takeMessage { $0.count }, 900_000)
        XCTAssertLessThanOrEqual(framer.reservedBytes, 1 << 16)
        try [UInt8](repeating: 0x41, count: 500_000).withUnsafeBytes { try framer.append($0) }
        framer.release()
        XCTAssertEqual(framer.reservedBytes, 0)
        XCTAssertEqual(framer.pendingBytes, 0)
    }
}

final class CallDecodingTests: XCTestCase {
    private func decode(_ text: String) -> Result<VarlinkCall, VarlinkError> { VarlinkCall.decode(Data(text.utf8)) }

    private func error(_ text: String) -> VarlinkError? {
        if case .failure(let e) = decode(text) { e } else { nil }
    }

    func testAWellFormedCall() throws {
        let call = try decode(#"{"method":"io.adorch.Ads.Show","parameters":{"slot":"x"},"more":true}"#).get()
        XCTAssertEqual(call.interface, "io.adorch.Ads")
        XCTAssertEqual(call.member, "Show")
        XCTAssertEqual(try call.string("slot"), "x")
        XCTAssertTrue(call.more)
        XCTAssertFalse(call.oneway)
    }

    func testMalformedMessagesAreNamed() {
        XCTAssertEqual(error("not json")?.parameters["parameter"], "message: not JSON")
        XCTAssertEqual(error("[1,2]")?.parameters["parameter"], "message: not a JSON object")
        XCTAssertEqual(error(#"{"parameters":{}}"#)?.parameters["parameter"], "method: missing")
        XCTAssertEqual(error(#"{"method":42}"#)?.parameters["parameter"], "method: not an interface-qualified method name")
        XCTAssertEqual(error(#"{"method":"NoDots"}"#)?.parameters["parameter"], "method: not an interface-qualified method name")
        XCTAssertEqual(error(#"{"method":"a.B","parameters":[]}"#)?.parameters["parameter"], "parameters: not an object")
        XCTAssertEqual(error(#"{"method":"a.B","more":"yes"}"#)?.parameters["parameter"], "more: not a boolean")
        XCTAssertTrue(error(#"{"method":"a.B"}"#) == nil)
        XCTAssertEqual(error("not json")?.name, "org.varlink.service.InvalidParameter")
    }

    func testTypedParametersNameTheOffendingField() throws {
        let call = try decode(#"{"method":"a.B","parameters":{"slot":5,"ids":["x",3],"n":1.5,"ok":"s"}}"#).get()
        XCTAssertThrowsError(try call.string("slot")) { XCTAssertEqual($0 as? VarlinkError, .invalidParameter("slot")) }
        XCTAssertThrowsError(try call.string("missing")) { XCTAssertEqual($0 as? VarlinkError, .invalidParameter("missing")) }
        XCTAssertThrowsError(try call.optionalStringArray("ids")) { XCTAssertEqual($0 as? VarlinkError, .invalidParameter("ids")) }
        XCTAssertThrowsError(try call.optionalInt("n")) { XCTAssertEqual($0 as? VarlinkError, .invalidParameter("n")) }
        XCTAssertEqual(try call.optionalString("ok"), "s")
        XCTAssertNil(try call.optionalString("absent"))
        XCTAssertThrowsError(try call.onlyParameters(["slot", "ids", "n"])) { XCTAssertEqual($0 as? VarlinkError, .invalidParameter("ok")) }
    }
}

final class InterfaceTests: XCTestCase {
    func testMethodsAreReadFromTheIDL() {
        let interface = VarlinkInterface(description: """
        # comment
        interface com.example.Test

        type T (a: int)

        method One() -> ()
        method Two(x: string) -> (y: T)
        error Bad ()
        """)
        XCTAssertEqual(interface.name, "com.example.Test")
        XCTAssertEqual(interface.methods, ["One", "Two"])
    }
}

final class SendBufferTests: XCTestCase {
    /// A subscriber's connection lives for days: what was written must not stay stored.
    func testStorageStaysBoundedOverALongStream() {
        var buffer = SendBuffer()
        let event = Data(repeating: 0x41, count: 400)
        var written = 0
        for round in 0..<100_000 {
            buffer.append(event)
            buffer.append(event)
            // A socket that often takes less than is offered, as a busy reader's does.
            let n = buffer.write { min($0.count, 500 + round % 700) }
            XCTAssertGreaterThan(n, 0)
            written += n
            let unsent = 800 * (round + 1) - written
            // Held bytes stay within a small multiple of what is still unsent.
            if buffer.storedBytes > 2 * unsent + 1600 { return XCTFail("round \(round): \(buffer.storedBytes) bytes held for \(unsent) unsent") }
        }
        while !buffer.isEmpty { written += buffer.write { $0.count } }
        XCTAssertEqual(written, 100_000 * 800)
        XCTAssertEqual(buffer.storedBytes, 0)
    }

    func testBytesLeaveInOrderAcrossPartialWrites() {
        var buffer = SendBuffer()
        var out: [UInt8] = []
        for value in UInt8(0)..<200 {
            buffer.append(Data([value, value]))
            _ = buffer.write { bytes in out.append(bytes[0]); return 1 }
        }
        while !buffer.isEmpty { _ = buffer.write { out.append(contentsOf: $0); return $0.count } }
        XCTAssertEqual(out, (UInt8(0)..<200).flatMap { [$0, $0] })
    }

    func testAnErrorWritesNothing() {
        var buffer = SendBuffer()
        buffer.append(Data("abc".utf8))
        XCTAssertEqual(buffer.write { _ in -1 }, -1)
        var out = Data()
        _ = buffer.write { out.append(contentsOf: $0); return $0.count }
        XCTAssertEqual(out, Data("abc".utf8))
    }

    func testDroppingKeepsOnlyTheMessageBeingWritten() {
        var buffer = SendBuffer()
        buffer.append(Data("one\0two\0three\0".utf8))
        _ = buffer.write { _ in 5 }  // "one\0t": "two" is cut in half on the wire
        buffer.dropUnsentMessages()
        buffer.append(Data("end\0".utf8))
        var out = Data()
        _ = buffer.write { out.append(contentsOf: $0); return $0.count }
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "wo\0end\0")

        var boundary = SendBuffer()
        boundary.append(Data("one\0two\0".utf8))
        _ = boundary.write { _ in 4 }
        boundary.dropUnsentMessages()
        XCTAssertTrue(boundary.isEmpty, "nothing was cut: everything unsent goes")
    }

    /// What a slow reader was not sent, and a closed connection's buffer, go back to the
    /// allocator: after an attack the daemon's memory can shrink again.
    func testDroppedAndReleasedBytesAreNotKept() {
        var buffer = SendBuffer()
        let event = [UInt8](repeating: 0x41, count: 64 << 10) + [0]
        for _ in 0..<64 { buffer.append(event) }
        _ = buffer.write { _ in 100 }
        XCTAssertGreaterThan(buffer.reservedBytes, 4 << 20)
        buffer.dropUnsentMessages()
        XCTAssertEqual(buffer.unsent, event.count - 100, "only the message cut in half stays")
        XCTAssertLessThanOrEqual(buffer.reservedBytes, 2 * event.count)
        buffer.append(event)
        buffer.release()
        XCTAssertEqual(buffer.reservedBytes, 0)
        XCTAssertTrue(buffer.isEmpty)
    }
}
