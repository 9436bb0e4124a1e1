/// Reads a base64url segment of a TC or GPP string as a sequence of big-endian bit fields.
///
/// Each character is 6 bits, first character first. The bits are kept per character rather
/// than decoded to bytes, as GPP pads its sections to 6 bits only; TCF pads to bytes, and
/// `wholeBytes` then leaves out the bits of the last character that make no whole byte (what
/// a base64 decoder to bytes drops), so a field read into them counts as truncated.
/// Bits after the last field are padding, and are not looked at.
struct Base64URLBitReader {
    /// The 6-bit value of each character.
    private let sextets: [UInt8]
    /// Prefixed to every field name in an error (`core`, `header`, `usnat.gpc`).
    let segment: String
    let bitCount: Int
    private(set) var position = 0

    var remaining: Int { bitCount - position }

    /// `text` must not be empty; `offset` is its byte offset in the string the caller was
    /// given, for error messages. Up to two `=` of padding may end it.
    init(_ text: Substring, segment: String, offset: Int, wholeBytes: Bool) throws(ConsentStringError) {
        self.segment = segment
        let bytes = text.utf8
        let padding = bytes.reversed().prefix(while: { $0 == UInt8(ascii: "=") }).count
        var sextets: [UInt8] = []
        sextets.reserveCapacity(bytes.count)
        for (index, byte) in bytes.enumerated() {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            case UInt8(ascii: "=") where padding <= 2 && index >= bytes.count - padding: continue
            default:
                let characterIndex = text.utf8.index(text.startIndex, offsetBy: index)
                let character = text[characterIndex...].first ?? "?"
                throw .badBase64Character(field: segment, character: character, offset: offset + index)
            }
            sextets.append(value)
        }
        if sextets.isEmpty { throw .empty(field: segment) }
        self.sextets = sextets
        bitCount = wholeBytes ? sextets.count * 6 / 8 * 8 : sextets.count * 6
    }

    /// `width` (at most 62) bits as an unsigned number.
    mutating func int(_ width: Int, _ field: String) throws(ConsentStringError) -> Int {
        try need(width, field)
        var value = 0
        for _ in 0..<width { value = value << 1 | nextBit() }
        return value
    }

    mutating func bool(_ field: String) throws(ConsentStringError) -> Bool {
        try int(1, field) == 1
    }

    /// `count` bits, each one an id from 1 up: the ids whose bit is set, kept as a bitmap
    /// (`IDSet`) of `count` bits, which the string itself holds.
    mutating func bitField(_ count: Int, _ field: String) throws(ConsentStringError) -> IDSet {
        try need(count, field)
        var words = [UInt64](repeating: 0, count: (count + 63) / 64)
        for index in 0..<count where nextBit() == 1 {
            words[index / 64] |= 1 << UInt64(index % 64)
        }
        return IDSet(bitmap: words)
    }

    /// Two letters of 6 bits each, 0 being `A` (a language or country code).
    mutating func letters(_ field: String) throws(ConsentStringError) -> String {
        let first = try int(6, field), second = try int(6, field)
        // 26...63 are not letters; TCF leaves them undefined, and they are shown as they are
        // numbered rather than refused, as no decision rests on these codes.
        func letter(_ value: Int) -> String { value < 26 ? String(UnicodeScalar(UInt8(65 + value))) : "[\(value)]" }
        return letter(first) + letter(second)
    }

    /// A Fibonacci-coded positive number (GPP): bit i adds the i-th Fibonacci number (1, 2, 3,
    /// 5, ...), and two set bits in a row end it (the second is the terminator).
    mutating func fibonacci(_ field: String) throws(ConsentStringError) -> Int {
        let start = position
        var value = 0
        var term = 0
        var previousSet = false
        while true {
            guard remaining > 0 else {
                throw .truncated(field: qualified(field), atBit: start, needed: position - start + 1, available: 0)
            }
            let set = nextBit() == 1
            if set && previousSet { return value }
            if set {
                guard term < Self.fibonacciTerms.count else { throw .badFibonacciNumber(field: qualified(field), atBit: start) }
                let (sum, overflow) = value.addingReportingOverflow(Self.fibonacciTerms[term])
                if overflow { throw .badFibonacciNumber(field: qualified(field), atBit: start) }
                value = sum
            }
            previousSet = set
            term += 1
        }
    }

    /// 1, 2, 3, 5, 8, ... up to the largest that fits an Int.
    private static let fibonacciTerms: [Int] = {
        var terms = [1, 2]
        while case let (sum, false) = terms[terms.count - 2].addingReportingOverflow(terms[terms.count - 1]) { terms.append(sum) }
        return terms
    }()

    /// `segment.field`, the name errors carry.
    func qualified(_ field: String) -> String { "\(segment).\(field)" }

    private func need(_ width: Int, _ field: String) throws(ConsentStringError) {
        if width > remaining {
            throw .truncated(field: qualified(field), atBit: position, needed: width, available: remaining)
        }
    }

    private mutating func nextBit() -> Int {
        let bit = Int(sextets[position / 6] >> (5 - position % 6)) & 1
        position += 1
        return bit
    }
}
