import Foundation
import XCTest

@testable import AdorchVarlink

/// What JSONValue was before the hand-written parser and writer: its Codable conformance
/// through JSONDecoder and JSONEncoder, kept to hold the new code to the old results.
private enum Foundation_ {
    static func parse(_ text: String) -> JSONValue? { parse(Data(text.utf8)) }
    static func parse(_ data: Data) -> JSONValue? { try? JSONDecoder().decode(JSONValue.self, from: data) }
    static func encode(_ value: JSONValue) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) }
    }
}

private func parse(_ text: String) -> JSONValue? { JSONValue.parse(Data(text.utf8)) }

private func reason(_ bytes: [UInt8]) -> JSONParseError.Reason? {
    bytes.withUnsafeBytes { raw in
        do throws(JSONParseError) {
            _ = try JSONValue.parse(bytes: raw)
            return nil
        } catch {
            return error.reason
        }
    }
}

private func reason(_ text: String) -> JSONParseError.Reason? { reason(Array(text.utf8)) }

/// A small, seeded generator: the same random values on every run.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

final class JSONParserTests: XCTestCase {
    /// The numbers whose case (.int or .double) JSONDecoder decided: pinned to its results.
    /// A member named verbatim holds JSON text checked already (an ad's payload): it goes out
    /// as it came, among the sorted members; anywhere else, or without the name, a string.
    func testAVerbatimMemberIsWrittenAsTheJSONItHolds() {
        let payload = #"{"title": "Hi", "n": [1, 2.5]}"#
        let ad: [String: JSONValue] = ["ad": ["slot": "s", "payload": .string(payload), "id": "x"]]
        XCTAssertEqual(String(decoding: VarlinkWire.reply(ad, continues: false, verbatim: ["payload"]), as: UTF8.self),
                       #"{"parameters":{"ad":{"id":"x","payload":{"title": "Hi", "n": [1, 2.5]},"slot":"s"}}}"# + "\0")
        XCTAssertEqual(String(decoding: VarlinkWire.reply(ad, continues: false), as: UTF8.self),
                       #"{"parameters":{"ad":{"id":"x","payload":"{\"title\": \"Hi\", \"n\": [1, 2.5]}","slot":"s"}}}"# + "\0")
        // Not a string: written as any value.
        XCTAssertEqual(String(decoding: VarlinkWire.reply(["payload": ["a": 1]], continues: false, verbatim: ["payload"]), as: UTF8.self),
                       #"{"parameters":{"payload":{"a":1}}}"# + "\0")
    }

    func testNumbersKeepTheCasesJSONDecoderGave() {
        let expected: [(String, JSONValue)] = [
            ("1.0", .int(1)), ("1e3", .int(1000)), ("1E+2", .int(100)), ("-0", .int(0)), ("-0.0", .int(0)), ("0.1e1", .int(1)),
            ("9223372036854775807", .int(.max)), ("-9223372036854775808", .int(.min)),
            ("9223372036854775808", .double(9_223_372_036_854_775_808)), ("-9223372036854775809", .double(-9_223_372_036_854_775_808)),
            ("9223372036854775807.0", .double(9_223_372_036_854_775_808)), ("-9223372036854775808.0", .double(-9_223_372_036_854_775_808)),
            ("9007199254740993.0", .int(9_007_199_254_740_993)), ("123456789012345678e1", .int(1_234_567_890_123_456_780)),
            ("100000000000000000000e-2", .int(1_000_000_000_000_000_000)), ("1e18", .int(1_000_000_000_000_000_000)),
            ("1e19", .double(1e19)), ("1.5", .double(1.5)), ("0.1", .double(0.1)), ("-1.5e-1", .double(-0.15)),
            ("1e-400", .int(0)), ("5e-324", .double(.leastNonzeroMagnitude)), ("1.7976931348623157e308", .double(.greatestFiniteMagnitude)),
            ("123456789012345678901234567890", .double(1.2345678901234568e29)),
        ]
        for (text, value) in expected {
            XCTAssertEqual(parse(text), value, text)
            XCTAssertEqual(Foundation_.parse(text), value, "JSONDecoder on \(text)")
        }
    }

    func testRefusesWhatFoundationRefuses() {
        let refused: [(String, JSONParseError.Reason)] = [
            ("", .unexpectedEnd), (" ", .unexpectedEnd), ("01", .invalidNumber), ("-01", .invalidNumber), ("1.", .invalidNumber),
            ("-", .invalidNumber), (".5", .unexpectedByte), ("+1", .unexpectedByte), ("1e", .invalidNumber), ("1e+", .invalidNumber),
            ("NaN", .unexpectedByte), ("Infinity", .unexpectedByte), ("-Infinity", .invalidNumber), ("1e400", .numberOutOfRange),
            ("-1e400", .numberOutOfRange), ("1" + String(repeating: "0", count: 400), .numberOutOfRange),
            ("1 2", .trailingGarbage), ("{}x", .trailingGarbage), ("[1 2]", .unexpectedByte), ("[1,,2]", .unexpectedByte),
            ("[,1]", .unexpectedByte), (#"{"a" 1}"#, .unexpectedByte), ("{1:1}", .unexpectedByte), (#"{"a":1,,"b":2}"#, .unexpectedByte),
            ("tru", .unexpectedEnd), ("nul", .unexpectedEnd), ("trux", .unexpectedByte), (#""abc"#, .unexpectedEnd),
            (#""\x""#, .invalidEscape), (#""\U0041""#, .invalidEscape), (#""\u00g0""#, .invalidEscape), (#""\u004""#, .invalidEscape),
            (#""\ud800""#, .loneSurrogate), (#""\udc00""#, .loneSurrogate), (#""\ud800\u0041""#, .loneSurrogate),
            (#""\ud800\ud800""#, .loneSurrogate), ("\"\u{1}\"", .controlCharacter), ("\"a\nb\"", .controlCharacter),
            ("\u{0B}1", .unexpectedByte), ("\u{0C}1", .unexpectedByte), ("\u{A0}1", .unexpectedByte),
        ]
        for (text, expected) in refused {
            XCTAssertEqual(reason(text), expected, text.debugDescription)
            XCTAssertNil(Foundation_.parse(text), "JSONDecoder takes \(text.debugDescription)")
            XCTAssertNil(try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed), text.debugDescription)
        }
    }

    func testInvalidUTF8IsRefused() {
        let quoted: [[UInt8]] = [
            [0xFF], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80],
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xC3], [0xE2, 0x82], [0x80], [0xC3, 0x28],
        ]
        for bytes in quoted {
            XCTAssertEqual(reason([0x22] + bytes + [0x22]), .invalidUTF8, "\(bytes)")
            XCTAssertNil(Foundation_.parse(Data([0x22] + bytes + [0x22])), "JSONDecoder takes \(bytes)")
        }
        XCTAssertEqual(parse("\"\u{7F}é€😀\u{10FFFF}\""), .string("\u{7F}é€😀\u{10FFFF}"))
    }

    func testEscapes() {
        XCTAssertEqual(parse(#""\"\\\/\b\f\n\r\t\u0000\u00e9\u20AC\ud83d\ude00""#), .string("\"\\/\u{8}\u{C}\n\r\t\u{0}é€😀"))
        XCTAssertEqual(parse(#"{"k\u0065y":"v"}"#), ["key": "v"])
    }

    /// Deliberate differences from Foundation, each on purpose (see JSONParser).
    func testTrailingCommasAndByteOrderMarksAreRefused() {
        XCTAssertEqual(reason("[1,]"), .trailingComma)
        XCTAssertEqual(reason(#"{"a":1 , }"#), .trailingComma)
        XCTAssertNotNil(Foundation_.parse("[1,]"), "Foundation takes a trailing comma")
        XCTAssertEqual(reason([0xEF, 0xBB, 0xBF, 0x31]), .unexpectedByte)
    }

    /// As JSONDecoder: the first wins. Keys that Swift's String calls equal (canonically
    /// equivalent) are the same key.
    func testTheFirstOfDuplicateKeysWins() {
        for text in [#"{"a":1,"a":2}"#, #"{"a":{"x":1},"a":2}"#, "{\"é\":1,\"e\u{301}\":2}"] {
            XCTAssertEqual(parse(text), Foundation_.parse(text), text)
        }
        XCTAssertEqual(parse(#"{"a":1,"a":2}"#), ["a": 1])
    }

    func testNestingIsBounded() {
        func nested(_ depth: Int) -> String { String(repeating: "[", count: depth) + String(repeating: "]", count: depth) }
        XCTAssertNotNil(parse(nested(JSONValue.maximumDepth)))
        XCTAssertEqual(reason(nested(JSONValue.maximumDepth + 1)), .tooDeep)
        XCTAssertNil(Foundation_.parse(nested(JSONValue.maximumDepth + 1)), "the same bound as Foundation's")
        XCTAssertEqual(reason(String(repeating: #"{"a":"#, count: 100_000)), .tooDeep, "deep input fails fast, with no deep recursion")
    }

    /// A call of many small values cost the daemon 120 ms to refuse: a message's values are
    /// bounded, and the parse stops at the bound. Other JSON (replies, files) is not.
    func testTheValuesOfAMessageAreBounded() {
        func message(values: Int) -> [UInt8] {
            let keys = (0..<values).map { "\"k\($0)\":0" }.joined(separator: ",")
            return Array(#"{"method":"a.b","parameters":{"# .utf8) + Array(keys.utf8) + Array("}}".utf8)
        }
        func decoded(_ bytes: [UInt8]) -> Result<VarlinkCall, VarlinkError> { bytes.withUnsafeBytes { VarlinkCall.decode(bytes: $0) } }
        // The call's own members (method, parameters) count too.
        let most = JSONValue.maximumMessageValues - 2
        guard case .success(let call) = decoded(message(values: most)) else { return XCTFail("a call at the bound is taken") }
        XCTAssertEqual(call.parameters.count, most)
        XCTAssertEqual(decoded(message(values: most + 1)).failure,
                       .invalidParameter("message: more than \(JSONValue.maximumMessageValues) JSON values"))
        XCTAssertEqual(decoded(Array("[\(String(repeating: "0,", count: 100_000))0]".utf8)).failure,
                       .invalidParameter("message: more than \(JSONValue.maximumMessageValues) JSON values"), "in any position")
        XCTAssertNotNil(parse("[\(String(repeating: "0,", count: 100_000))0]"), "only messages from clients are bounded")
        let bytes = message(values: 100_000)
        let failure = bytes.withUnsafeBytes { raw -> JSONParseError? in
            do throws(JSONParseError) {
                var parser = JSONParser(raw, maximumValues: JSONValue.maximumMessageValues)
                _ = try parser.document()
                return nil
            } catch {
                return error
            }
        }
        XCTAssertEqual(failure?.reason, .tooManyValues)
        XCTAssertLessThan(failure?.offset ?? .max, bytes.count / 4, "the parse stops at the bound, not at the end")
    }

    /// The parameter a call should not carry is named in one pass, however many there are.
    func testAStrayParameterIsNamedWithoutSorting() {
        let call = VarlinkCall(method: "a.b", parameters: Dictionary(uniqueKeysWithValues: (0..<10_000).map { ("k\($0)", JSONValue.null) } + [("slot", .null)]))
        XCTAssertThrowsError(try call.onlyParameters(["slot"])) { XCTAssertEqual($0 as? VarlinkError, .invalidParameter("k0")) }
        XCTAssertNoThrow(try VarlinkCall(method: "a.b", parameters: ["slot": .null]).onlyParameters(["slot"]))
    }

    /// Texts both parsers take give the same values.
    func testAgreesWithJSONDecoder() {
        let texts = [
            "null", "true", " false ", "\t0\r\n", "\"\"", "[]", "{}", "[ ]", "{ }", #"{"a" : [1, 2.5, "x", null, true, {"b": {}}]}"#,
            #"{"method":"io.adorch.Ads.Show","parameters":{"slot":"s0","user_id":"u-1","targeting":{"age":30}},"more":false}"#,
            "[1e2, 1E-2, -0.5, 12345.678e-3, 4.9e-324, 0.30000000000000004]", #"["a/b", "\u2028", "😀"]"#,
        ]
        for text in texts {
            XCTAssertNotNil(parse(text), text)
            XCTAssertEqual(parse(text), Foundation_.parse(text), text)
        }
    }
}

final class JSONWriterTests: XCTestCase {
    func testMatchesJSONEncoder() {
        let values: [JSONValue] = [
            .null, true, false, 0, -1, .int(.max), .int(.min), 4.0, 0.1, -0.0, 1e20, 1e16, 1e15, 123456789.123, .double(.leastNonzeroMagnitude),
            .double(.greatestFiniteMagnitude), 1e-7, 2.5e-5, 100.0, 0.30000000000000004,
            .string((0..<0x20).map { String(UnicodeScalar(UInt8($0))) }.joined() + "\"\\/\u{7F}\u{2028}é😀"),
            ["a10": 1, "a2": 2, "B": 3, "a": 4, "b": 5, "A": 6, "_": 7, "é": 8, "e": 9, "": 10, "a b": 11, "\u{1}": 12, "ab": 13],
            ["x": [[], [:], [1, "y", ["z": .null]]]],
        ]
        for value in values { XCTAssertEqual(value.jsonString, Foundation_.encode(value), "\(value)") }
    }

    func testMatchesJSONEncoderOnRandomValues() {
        var random = SplitMix(state: 42)
        func scalar() -> Character {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: Character(UnicodeScalar(UInt8.random(in: 0..<0x20, using: &random)))
            case 1: ["\"", "\\", "/", "\u{7F}"].randomElement(using: &random)!
            case 2: Character(UnicodeScalar(UInt32.random(in: 0x80...0xD7FF, using: &random))!)
            case 3: Character(UnicodeScalar(UInt32.random(in: 0x10000...0x10FFFF, using: &random))!)
            default: Character(UnicodeScalar(UInt8.random(in: 0x20..<0x7F, using: &random)))
            }
        }
        func string() -> String { String((0..<Int.random(in: 0..<12, using: &random)).map { _ in scalar() }) }
        func value(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 4 ? 6 : 8), using: &random) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &random))
            case 2: return .int(Int64(bitPattern: random.next()) >> Int.random(in: 0..<64, using: &random))
            case 3:
                let d = Double(bitPattern: random.next())
                return .double(d.isFinite ? d : Double.random(in: -1e6...1e6, using: &random))
            case 4: return .double(Double(Int.random(in: -1000...1000, using: &random)) / 8)
            case 5: return .string(string())
            case 6: return .array((0..<Int.random(in: 0..<5, using: &random)).map { _ in value(depth + 1) })
            default: return .object(Dictionary((0..<Int.random(in: 0..<6, using: &random)).map { _ in (string(), value(depth + 1)) }) { a, _ in a })
            }
        }
        for _ in 0..<3000 {
            let v = value(0)
            XCTAssertEqual(v.jsonString, Foundation_.encode(v), "\(v)")
        }
    }

    /// JSON cannot hold these: the document is `null`, as JSONEncoder's failure made it.
    func testUnencodableValuesGiveNull() {
        XCTAssertEqual(JSONValue.array([.double(.nan), 1]).jsonString, "null")
        XCTAssertEqual(JSONValue.object(["x": .double(.infinity)]).jsonString, "null")
        var deep = JSONValue.array([])
        for _ in 1..<JSONValue.maximumDepth { deep = .array([deep]) }
        XCTAssertEqual(JSONValue.parse(deep.jsonData), deep, "what the parser takes, the writer writes")
        XCTAssertEqual(JSONValue.array([deep]).jsonString, "null")
    }

    func testRoundTrips() {
        for text in [#"{"a":[1,2.5,-3e-7,"\u0001é",{"b":null}],"c":1e300,"d":-9223372036854775808.0}"#, "0.1", #""\ud83d\ude00""#] {
            let value = parse(text)!
            XCTAssertEqual(JSONValue.parse(value.jsonData), value, text)
        }
    }
}

final class WireTests: XCTestCase {
    /// The bytes JSONEncoder gave for the same messages.
    func testRepliesAreTheBytesTheyWere() {
        let parameters: [String: JSONValue] = ["slot": "s0", "ad": ["id": "a/1", "payload": ["w": 320, "h": 480.5]], "ok": true]
        XCTAssertEqual(String(decoding: VarlinkWire.reply(parameters, continues: false), as: UTF8.self),
                       Foundation_.encode(["parameters": .object(parameters)])! + "\0")
        XCTAssertEqual(String(decoding: VarlinkWire.reply(parameters, continues: true), as: UTF8.self),
                       Foundation_.encode(["parameters": .object(parameters), "continues": true])! + "\0")
        XCTAssertEqual(String(decoding: VarlinkWire.reply([:], continues: false), as: UTF8.self), #"{"parameters":{}}"# + "\0")
        let error = VarlinkError.invalidParameter("slot")
        XCTAssertEqual(String(decoding: VarlinkWire.error(error), as: UTF8.self),
                       Foundation_.encode(["error": .string(error.name), "parameters": .object(error.parameters)])! + "\0")
        XCTAssertEqual(String(decoding: VarlinkWire.call("a.B", ["x": 1], more: true), as: UTF8.self),
                       #"{"method":"a.B","more":true,"parameters":{"x":1}}"# + "\0")
        XCTAssertEqual(String(decoding: VarlinkWire.reply(["x": .double(.nan)], continues: false), as: UTF8.self), "null\0")
    }

    func testCallsAreDecodedAsBefore() throws {
        func failure(_ text: String) -> String? {
            if case .failure(let e) = VarlinkCall.decode(Data(text.utf8)) { e.parameters["parameter"]?.stringValue ?? e.name } else { nil }
        }
        // A syntax error anywhere is named before what is missing.
        XCTAssertEqual(failure(#"{"parameters":{"a":tru}}"#), "message: not JSON")
        XCTAssertEqual(failure(#"{"method":"a.B"} x"#), "message: not JSON")
        XCTAssertEqual(failure(#"{"method":"a.B",}"#), "message: not JSON")
        XCTAssertEqual(failure(""), "message: not JSON")
        XCTAssertEqual(failure(#""a.B""#), "message: not a JSON object")
        XCTAssertEqual(failure(#"{"method":"a.B","oneway":1}"#), "oneway: not a boolean")
        XCTAssertEqual(failure(#"{"method":"a.B","upgrade":"x"}"#), "upgrade: not a boolean")
        XCTAssertEqual(failure(#"{"method":"a.B","upgrade":true}"#), "org.varlink.service.MethodNotImplemented")
        XCTAssertEqual(failure(#"{"method":"a.B","method":5}"#), nil, "the first of duplicate keys wins")
        XCTAssertEqual(failure(#"{"method":5,"method":"a.B"}"#), "method: not an interface-qualified method name")
        let qualified = ["a.B", "io.adorch.Ads.Show", "a_1.b-2", "é.ß", "a.\u{661}"]
        let unqualified = ["a..B", ".a", "a.", "a b.c", "a.b/c", "a.\u{2028}", "."]
        for name in qualified { XCTAssertNil(failure(#"{"method":"\#(name)"}"#), name) }
        for name in unqualified { XCTAssertEqual(failure(#"{"method":"\#(name)"}"#), "method: not an interface-qualified method name", name) }
        let call = try VarlinkCall.decode(Data(#" {"m\u0065thod":"a.B","parameters":null,"oneway":null,"more":true,"x":[1]} "#.utf8)).get()
        XCTAssertEqual(call.method, "a.B")
        XCTAssertEqual(call.parameters, [:])
        XCTAssertTrue(call.more)
    }
}

final class FramerInPlaceTests: XCTestCase {
    /// A stream whose reads always end inside a message never drains the storage: what was
    /// taken must still be let go.
    func testStorageStaysBoundedWhenReadsEndMidMessage() throws {
        var framer = VarlinkFramer(maxMessageSize: 1000)
        let message = Array(#"{"method":"a.B"}"#.utf8) + [0]
        var stream: [UInt8] = []
        for _ in 0..<2000 { stream += message }
        var taken = 0
        for chunk in stride(from: 0, to: stream.count, by: 23) {
            try stream[chunk..<min(chunk + 23, stream.count)].withUnsafeBytes { try framer.append($0) }
            while let length = framer.takeMessage({ $0.count }) {
                XCTAssertEqual(length, message.count - 1)
                taken += 1
            }
            XCTAssertLessThan(framer.pendingBytes, message.count)
            XCTAssertLessThanOrEqual(framer.storedBytes, 2 * (message.count + 23))
        }
        XCTAssertEqual(taken, 2000)
        XCTAssertEqual(framer.messageCount, 0)
    }
}

private extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
