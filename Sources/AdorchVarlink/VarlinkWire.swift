/// Messages as they go on the wire, each with its NUL, written straight into bytes. The
/// members are in the order JSONEncoder's `.sortedKeys` gave them, so the bytes are the
/// ones the daemon always sent. Public for the wire benchmark.
public enum VarlinkWire {
    /// `verbatim`: members whose string value is JSON text already checked, written unquoted
    /// (JSONWriter.verbatim).
    public static func reply(_ parameters: [String: JSONValue], continues: Bool, verbatim: Set<String> = []) -> [UInt8] {
        message(verbatim: verbatim) { writer throws(JSONWriter.Unencodable) in
            if continues { writer.append(#""continues":true,"#) }
            try writeParameters(parameters, &writer)
        }
    }

    public static func error(_ error: VarlinkError) -> [UInt8] {
        message { writer throws(JSONWriter.Unencodable) in
            writer.append(#""error":"#)
            writer.write(error.name)
            writer.append(",")
            try writeParameters(error.parameters, &writer)
        }
    }

    /// A call, as a client sends it.
    static func call(_ method: String, _ parameters: [String: JSONValue], more: Bool) -> [UInt8] {
        message { writer throws(JSONWriter.Unencodable) in
            writer.append(#""method":"#)
            writer.write(method)
            writer.append(more ? #","more":true,"# : ",")
            try writeParameters(parameters, &writer)
        }
    }

    private static func writeParameters(_ parameters: [String: JSONValue], _ writer: inout JSONWriter) throws(JSONWriter.Unencodable) {
        writer.append(#""parameters":{"#)
        // Depth 2: inside the message's object and the parameters' own.
        try writer.writeMembers(parameters, depth: 2)
        writer.append("}")
    }

    /// One object around `members`. A value JSON cannot hold makes the message `null`, as
    /// JSONEncoder's failure did.
    private static func message(verbatim: Set<String> = [], _ members: (inout JSONWriter) throws(JSONWriter.Unencodable) -> Void) -> [UInt8] {
        // Most replies fit; a larger one grows the buffer a few times.
        var writer = JSONWriter(capacity: 256)
        writer.verbatim = verbatim
        writer.append("{")
        do { try members(&writer) } catch { return Array("null\0".utf8) }
        writer.append("}\0")
        return writer.bytes
    }
}
