// The entry points to JSONParser and the bounds it parses within.

extension JSONValue {
    /// How deeply arrays and objects may nest, in what is parsed and in what is encoded: the
    /// parser recurses per level, so this bounds its stack. Foundation's bound, so the same
    /// texts are accepted.
    public static let maximumDepth = 512
    /// How many values (each object, array, string, number, literal) one message from a client
    /// may hold. Each costs the parser an allocation or more, and one refused call of many
    /// small values (80 000 keys in 870 KB) cost the daemon 120 ms, the other clients' time:
    /// past this the parse stops. A real call holds a few dozen.
    public static let maximumMessageValues = 16384

    /// Parses one JSON text from UTF-8 bytes (see `JSONParser` for the rules).
    public static func parse(bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes)
        return try parser.document()
    }

    /// A text to pass on as it is if it parses to exactly what it says: its value, and whether
    /// an object in it had a key twice (then only the value, written again, says one thing).
    package static func parseForwarding(_ text: String) -> (value: JSONValue, hadDuplicateKeys: Bool)? {
        var text = text
        return text.withUTF8 { utf8 in
            var parser = JSONParser(UnsafeRawBufferPointer(utf8))
            guard let value = try? parser.document() else { return nil }
            return (value, parser.sawDuplicateKey)
        }
    }
}
