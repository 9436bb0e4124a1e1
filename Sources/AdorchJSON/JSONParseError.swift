/// Why bytes are not a JSON text, and the byte offset where that showed.
public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case unexpectedEnd
        case unexpectedByte
        /// `[1,]` or `{"a":1,}`: Foundation takes these, RFC 8259 and this parser do not.
        case trailingComma
        /// Containers nested deeper than `JSONValue.maximumDepth`.
        case tooDeep
        /// More values than the parser was given as its bound (`JSONValue.maximumMessageValues`).
        case tooManyValues
        case invalidNumber
        /// A number whose magnitude is beyond Double's (Foundation refuses these too).
        case numberOutOfRange
        case invalidEscape
        /// A `\u` escape of half a surrogate pair without its other half.
        case loneSurrogate
        case controlCharacter
        case invalidUTF8
        /// Something other than whitespace after the value.
        case trailingGarbage
    }

    public var reason: Reason
    public var offset: Int

    public var description: String { "\(reason) at byte \(offset)" }
}
