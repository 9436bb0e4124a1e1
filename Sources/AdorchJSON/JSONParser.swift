/// A strict RFC 8259 parser straight from UTF-8 bytes to `JSONValue`.
///
/// It refuses everything Foundation's JSONDecoder and JSONSerialization refuse, and its values
/// are the ones `JSONValue`'s Codable init gave. Where it differs from Foundation, on purpose:
/// - a trailing comma is refused (Foundation takes `[1,]`);
/// - the text is UTF-8 without a byte order mark (Foundation skips a BOM and guesses UTF-16/32
///   from NUL bytes; Varlink is UTF-8, and a message never holds a NUL).
/// Like Foundation: the first of duplicate keys wins; containers nest at most
/// `JSONValue.maximumDepth` deep; a `\u` escape of a lone surrogate is refused.
/// A parser given `maximumValues` (a message from a client) fails once it has read that many.
package struct JSONParser {
    private let base: UnsafePointer<UInt8>
    private let end: Int
    private let maximumValues: Int
    private var position = 0
    private var depth = 0
    private var values = 0
    /// An object of the text had a key twice (the first was kept): its bytes then say more than
    /// the value parsed, and must not be passed on as they are.
    package private(set) var sawDuplicateKey = false

    /// `bytes` must outlive the parser.
    package init(_ bytes: UnsafeRawBufferPointer, maximumValues: Int = .max) {
        // An empty buffer may have no address; any valid pointer does, as nothing is read.
        base = bytes.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) } ?? UnsafePointer(bitPattern: 1)!
        end = bytes.count
        self.maximumValues = maximumValues
    }

    /// The single value the bytes hold, with nothing but whitespace around it.
    package mutating func document() throws(JSONParseError) -> JSONValue {
        let value = try value()
        try finish()
        return value
    }

    /// Fails unless only whitespace is left.
    package mutating func finish() throws(JSONParseError) {
        skipWhitespace()
        if position < end { throw failure(.trailingGarbage) }
    }

    private func failure(_ reason: JSONParseError.Reason, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(reason: reason, offset: offset ?? position)
    }

    private mutating func skipWhitespace() {
        while position < end {
            switch base[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    /// The next byte that is not whitespace, not consumed.
    package mutating func peek() throws(JSONParseError) -> UInt8 {
        skipWhitespace()
        guard position < end else { throw failure(.unexpectedEnd) }
        return base[position]
    }

    package mutating func value() throws(JSONParseError) -> JSONValue {
        values += 1
        guard values <= maximumValues else { throw failure(.tooManyValues) }
        switch try peek() {
        case UInt8(ascii: "{"):
            var members: [String: JSONValue] = [:]
            try self.members { parser, key throws(JSONParseError) in
                let value = try parser.value()
                // The first of duplicate keys wins, as it did through JSONDecoder.
                if members.index(forKey: key) == nil { members[key] = value } else { parser.sawDuplicateKey = true }
            }
            return .object(members)
        case UInt8(ascii: "["):
            var items: [JSONValue] = []
            try elements { parser throws(JSONParseError) in items.append(try parser.value()) }
            return .array(items)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure(.unexpectedByte)
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        for i in 0..<count {
            guard position + i < end else { throw failure(.unexpectedEnd, at: end) }
            guard base[position + i] == word.utf8Start[i] else { throw failure(.unexpectedByte, at: position + i) }
        }
        position += count
    }

    private mutating func enter() throws(JSONParseError) {
        guard depth < JSONValue.maximumDepth else { throw failure(.tooDeep) }
        depth += 1
        position += 1
    }

    /// Reads an object, calling `member` at each key with the parser on its value, which
    /// `member` must read.
    package mutating func members(_ member: (inout JSONParser, String) throws(JSONParseError) -> Void) throws(JSONParseError) {
        guard try peek() == UInt8(ascii: "{") else { throw failure(.unexpectedByte) }
        try enter()
        if try peek() == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return
        }
        while true {
            guard try peek() == UInt8(ascii: "\"") else { throw failure(.unexpectedByte) }
            let key = try string()
            guard try peek() == UInt8(ascii: ":") else { throw failure(.unexpectedByte) }
            position += 1
            try member(&self, key)
            let separator = try peek()
            position += 1
            if separator == UInt8(ascii: "}") { break }
            guard separator == UInt8(ascii: ",") else { throw failure(.unexpectedByte, at: position - 1) }
            if try peek() == UInt8(ascii: "}") { throw failure(.trailingComma) }
        }
        depth -= 1
    }

    private mutating func elements(_ element: (inout JSONParser) throws(JSONParseError) -> Void) throws(JSONParseError) {
        try enter()
        if try peek() == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return
        }
        while true {
            try element(&self)
            let separator = try peek()
            position += 1
            if separator == UInt8(ascii: "]") { break }
            guard separator == UInt8(ascii: ",") else { throw failure(.unexpectedByte, at: position - 1) }
            if try peek() == UInt8(ascii: "]") { throw failure(.trailingComma) }
        }
        depth -= 1
    }

    // MARK: Strings

    /// A string, its quotes included. One pass validates (escapes, control characters, UTF-8)
    /// and finds the end; only a string with escapes needs a second, to unescape.
    package mutating func string() throws(JSONParseError) -> String {
        guard try peek() == UInt8(ascii: "\"") else { throw failure(.unexpectedByte) }
        position += 1
        let start = position
        var escaped = false
        while true {
            guard position < end else { throw failure(.unexpectedEnd) }
            let byte = base[position]
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                try validateEscape()
            } else if byte < 0x20 {
                throw failure(.controlCharacter)
            } else if byte < 0x80 {
                position += 1
            } else {
                try validateUTF8Sequence()
            }
        }
        let raw = UnsafeBufferPointer(start: base + start, count: position - start)
        position += 1
        return escaped ? Self.unescape(raw) : String(decoding: raw, as: UTF8.self)
    }

    /// One escape at `position` (its backslash); a high surrogate takes its low one with it.
    private mutating func validateEscape() throws(JSONParseError) {
        let escape = position
        guard position + 1 < end else { throw failure(.unexpectedEnd, at: end) }
        switch base[position + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            position += 2
        case UInt8(ascii: "u"):
            let unit = try hexQuad(at: position + 2)
            position += 6
            if UTF16.isTrailSurrogate(unit) { throw failure(.loneSurrogate, at: escape) }
            if UTF16.isLeadSurrogate(unit) {
                guard position + 1 < end, base[position] == UInt8(ascii: "\\"), base[position + 1] == UInt8(ascii: "u"),
                      UTF16.isTrailSurrogate(try hexQuad(at: position + 2))
                else { throw failure(.loneSurrogate, at: escape) }
                position += 6
            }
        default:
            throw failure(.invalidEscape, at: escape)
        }
    }

    private func hexQuad(at offset: Int) throws(JSONParseError) -> UInt16 {
        guard offset + 4 <= end else { throw failure(.unexpectedEnd, at: end) }
        var unit: UInt16 = 0
        for i in offset..<(offset + 4) {
            guard let digit = Self.hexDigit(base[i]) else { throw failure(.invalidEscape, at: i) }
            unit = unit << 4 | UInt16(digit)
        }
        return unit
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// One multi-byte UTF-8 sequence at `position`, held to the well-formed ranges of the
    /// Unicode standard's table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF.
    private mutating func validateUTF8Sequence() throws(JSONParseError) {
        let lead = base[position]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondRange = 0x80...0x9F
        case 0xF0: length = 4; secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondRange = 0x80...0x8F
        default: throw failure(.invalidUTF8)
        }
        guard position + length <= end else { throw failure(.invalidUTF8) }
        guard secondRange.contains(base[position + 1]) else { throw failure(.invalidUTF8) }
        for i in 2..<length where base[position + i] & 0xC0 != 0x80 { throw failure(.invalidUTF8) }
        position += length
    }

    /// The contents of a validated string with escapes: never longer than its escaped form.
    private static func unescape(_ raw: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: raw.count) { out in
            var written = 0
            var i = 0
            func put(_ byte: UInt8) {
                out[written] = byte
                written += 1
            }
            while i < raw.count {
                let byte = raw[i]
                guard byte == UInt8(ascii: "\\") else {
                    put(byte)
                    i += 1
                    continue
                }
                let kind = raw[i + 1]
                i += 2
                switch kind {
                case UInt8(ascii: "b"): put(0x08)
                case UInt8(ascii: "f"): put(0x0C)
                case UInt8(ascii: "n"): put(0x0A)
                case UInt8(ascii: "r"): put(0x0D)
                case UInt8(ascii: "t"): put(0x09)
                case UInt8(ascii: "u"):
                    var scalar = UInt32(quad(raw, i))
                    i += 4
                    if UTF16.isLeadSurrogate(UInt16(scalar)) {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (UInt32(quad(raw, i + 2)) - 0xDC00)
                        i += 6
                    }
                    for unit in UTF8.encode(Unicode.Scalar(scalar)!)! { put(unit) }
                default: put(kind)  // " \ /
                }
            }
            return written
        }
    }

    private static func quad(_ raw: UnsafeBufferPointer<UInt8>, _ offset: Int) -> UInt16 {
        (0..<4).reduce(0) { $0 << 4 | UInt16(hexDigit(raw[offset + $1])!) }
    }

    // MARK: Numbers

    /// A number: `.int` when JSONDecoder would have decoded it as an Int64, else `.double`.
    private mutating func number() throws(JSONParseError) -> JSONValue {
        let start = position
        let negative = base[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        let integerStart = position
        guard skipDigits() > 0 else { throw failure(.invalidNumber) }
        if base[integerStart] == UInt8(ascii: "0"), position - integerStart > 1 { throw failure(.invalidNumber, at: integerStart) }
        var plainInteger = true
        if position < end, base[position] == UInt8(ascii: ".") {
            plainInteger = false
            position += 1
            guard skipDigits() > 0 else { throw failure(.invalidNumber) }
        }
        if position < end, base[position] | 0x20 == UInt8(ascii: "e") {
            plainInteger = false
            position += 1
            if position < end, base[position] == UInt8(ascii: "+") || base[position] == UInt8(ascii: "-") { position += 1 }
            guard skipDigits() > 0 else { throw failure(.invalidNumber) }
        }
        let text = UnsafeBufferPointer(start: base + start, count: position - start)
        if plainInteger, let integer = Self.int64(digits: text.dropFirst(negative ? 1 : 0), negative: negative) {
            return .int(integer)
        }
        // Swift's own parser (strtod in the C locale): correctly rounded, locale-proof.
        guard let double = Double(String(decoding: text, as: UTF8.self)) else { throw failure(.invalidNumber, at: start) }
        guard double.isFinite else { throw failure(.numberOutOfRange, at: start) }
        // JSONDecoder's rule for Int64 from a number with a fraction or an exponent: the
        // Double, when it is a whole number below 2^53; beyond, the decimal text truncated.
        if Int64(exactly: double) != nil {
            if double.magnitude < 0x1p53 { return .int(Int64(double)) }
            if let integer = Self.truncatedInt64(text, negative: negative) { return .int(integer) }
        }
        return .double(double)
    }

    private mutating func skipDigits() -> Int {
        let start = position
        while position < end, base[position] &- UInt8(ascii: "0") < 10 { position += 1 }
        return position - start
    }

    private static func int64(digits: Slice<UnsafeBufferPointer<UInt8>>, negative: Bool) -> Int64? {
        var magnitude: UInt64 = 0
        for digit in digits {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(digit &- UInt8(ascii: "0")))
            guard !o1, !o2 else { return nil }
            magnitude = sum
        }
        if negative { return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    /// The whole part of a number with a fraction or an exponent, exactly from its digits, if
    /// its magnitude is at most Int64.max (as Foundation's Decimal path: even Int64.min is
    /// refused there, and becomes a Double).
    private static func truncatedInt64(_ text: UnsafeBufferPointer<UInt8>, negative: Bool) -> Int64? {
        var digits: [UInt8] = []
        var exponent = 0
        var i = negative ? 1 : 0
        var fractionDigits = 0
        var inFraction = false
        while i < text.count {
            let byte = text[i]
            if byte == UInt8(ascii: ".") {
                inFraction = true
            } else if byte | 0x20 == UInt8(ascii: "e") {
                var sign = 1
                i += 1
                if text[i] == UInt8(ascii: "-") { sign = -1; i += 1 } else if text[i] == UInt8(ascii: "+") { i += 1 }
                // Saturates: only exponents near the digit count can give an Int64 at all.
                for digit in text[i...] { exponent = min(exponent * 10 + Int(digit - UInt8(ascii: "0")), 1_000_000) }
                exponent *= sign
                break
            } else {
                digits.append(byte - UInt8(ascii: "0"))
                if inFraction { fractionDigits += 1 }
            }
            i += 1
        }
        let wholeDigits = digits.count - fractionDigits + exponent
        var magnitude: UInt64 = 0
        for place in 0..<max(wholeDigits, 0) {
            let digit = place < digits.count ? UInt64(digits[place]) : 0
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(digit)
            guard !o1, !o2, sum <= UInt64(Int64.max) else { return nil }
            magnitude = sum
        }
        return negative ? -Int64(magnitude) : Int64(magnitude)
    }
}
