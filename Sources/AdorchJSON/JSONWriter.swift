/// Compact JSON into a byte buffer, byte for byte what JSONEncoder wrote with `.sortedKeys`
/// and `.withoutEscapingSlashes`: keys in UTF-8 byte order, `"` `\` and control characters
/// escaped (short forms for \b \f \n \r \t, `\u00xx` in lower case for the rest), everything
/// else as it is; integers in decimal, doubles as Swift's `description` less a final ".0".
///
/// Unlike JSONEncoder it encodes containers nested `JSONValue.maximumDepth` deep (JSONEncoder
/// stopped one short), so that whatever the parser accepts can be written back.
package struct JSONWriter {
    /// A NaN or infinite Double, or nesting past `JSONValue.maximumDepth`: JSON cannot say it.
    package struct Unencodable: Error {}

    package var bytes: [UInt8] = []
    /// Object members by these names whose value is a string hold JSON text that was parsed and
    /// checked already (an ad's payload, as its plugin wrote it): written as it is, not quoted.
    package var verbatim: Set<String> = []

    package init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// `depth` is the nesting of the containers around `value`.
    package mutating func write(_ value: JSONValue, depth: Int = 0) throws(Unencodable) {
        switch value {
        case .null: append("null")
        case .bool(let b): append(b ? "true" : "false")
        case .int(let i): write(i)
        case .double(let d): try write(d)
        case .string(let s): write(s)
        case .array(let items):
            guard depth < JSONValue.maximumDepth else { throw Unencodable() }
            bytes.append(UInt8(ascii: "["))
            for (n, item) in items.enumerated() {
                if n > 0 { bytes.append(UInt8(ascii: ",")) }
                try write(item, depth: depth + 1)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            guard depth < JSONValue.maximumDepth else { throw Unencodable() }
            bytes.append(UInt8(ascii: "{"))
            try writeMembers(members, depth: depth + 1)
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// An object's members without its braces, keys sorted: for messages that add members
    /// of their own around them.
    package mutating func writeMembers(_ members: [String: JSONValue], depth: Int) throws(Unencodable) {
        // The indices are sorted in place on the stack: no array of keys per object.
        try withUnsafeTemporaryAllocation(of: Dictionary<String, JSONValue>.Index.self, capacity: members.count) { (order: UnsafeMutableBufferPointer<Dictionary<String, JSONValue>.Index>) throws(Unencodable) in
            var order = order
            _ = order.initialize(from: members.indices)
            defer { order.deinitialize() }
            order.sort { members[$0].key.utf8.lexicographicallyPrecedes(members[$1].key.utf8) }
            for (n, index) in order.enumerated() {
                if n > 0 { bytes.append(UInt8(ascii: ",")) }
                let (key, value) = members[index]
                write(key)
                bytes.append(UInt8(ascii: ":"))
                if !verbatim.isEmpty, case .string(let json) = value, verbatim.contains(key) {
                    bytes.append(contentsOf: json.utf8)
                } else {
                    try write(value, depth: depth)
                }
            }
        }
    }

    package mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    package mutating func write(_ integer: Int64) {
        var magnitude = integer.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if integer < 0 { bytes.append(UInt8(ascii: "-")) }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    package mutating func write(_ double: Double) throws(Unencodable) {
        guard double.isFinite else { throw Unencodable() }
        let text = double.description
        let utf8 = text.utf8
        bytes.append(contentsOf: text.hasSuffix(".0") ? utf8.dropLast(2) : utf8[...])
    }

    package mutating func write(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var run = 0  // start of the bytes not yet copied
            for (i, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i]))
                run = i + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    append("u00")
                    bytes.append(Self.hex[Int(byte >> 4)])
                    bytes.append(Self.hex[Int(byte & 0xF)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)
}

extension JSONValue {
    /// Compact JSON with sorted keys; `null` for a value JSON cannot hold (a NaN, an infinity,
    /// nesting past `maximumDepth`), as JSONEncoder's failure gave.
    package var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        do { try writer.write(self) } catch { return Array("null".utf8) }
        return writer.bytes
    }
}
