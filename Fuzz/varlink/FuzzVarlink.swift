import AdorchFuzzSupport
import AdorchVarlink
import Foundation

/// Anything a client can send: framing across two reads, then each message decoded as a
/// call and its parameters read through every typed accessor the daemon uses; and the JSON
/// parser held to Foundation's on every NUL-free piece of the input.
func fuzzVarlink(_ data: Data) {
    var framer = VarlinkFramer(maxMessageSize: 4096)
    let cut = data.isEmpty ? 0 : Int(data[data.startIndex]) % (data.count + 1)
    for chunk in [data.prefix(cut), data.dropFirst(cut)] {
        guard let messages = try? framer.append(chunk) else { break }
        for message in messages {
            guard case .success(let call) = VarlinkCall.decode(message) else { continue }
            _ = (call.interface, call.member)
            for name in call.parameters.keys {
                _ = try? call.string(name)
                _ = try? call.optionalString(name)
                _ = try? call.optionalInt(name)
                _ = try? call.optionalStringArray(name)
            }
            _ = try? call.onlyParameters(["slot", "user_id"])
            _ = JSONValue.object(call.parameters).jsonData
        }
    }
    // Pieces hold no NUL, so Foundation never takes them for UTF-16 or UTF-32 text.
    for piece in data.split(separator: 0, omittingEmptySubsequences: false) { compareWithFoundation(Array(piece)) }
}

/// The parser accepts exactly what JSONSerialization accepts, but for the differences
/// JSONParser documents, and what it accepts comes back the same through the writer.
func compareWithFoundation(_ input: [UInt8]) {
    var text = input
    // A UTF-8 byte order mark, which Foundation skips: refused here, the rest compared.
    let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
    if text.starts(with: bom) {
        precondition(parse(text).failure?.reason == .unexpectedByte, "a byte order mark was taken")
        text.removeFirst(bom.count)
    }
    while true {
        switch parse(text) {
        case .success(let value):
            precondition(foundationTakes(text), "taken, Foundation refuses: \(String(decoding: text, as: UTF8.self).debugDescription)")
            let again = value.jsonData.withUnsafeBytes { try? JSONValue.parse(bytes: $0) }
            precondition(again == value, "does not round-trip: \(value)")
        case .failure(let error) where error.reason == .trailingComma:
            // A trailing comma, which Foundation takes: removed, and the rest compared.
            let comma = text[..<error.offset].lastIndex { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
            precondition(comma.map { text[$0] } == UInt8(ascii: ","), "no trailing comma at \(error.offset)")
            text.remove(at: comma!)
            continue
        case .failure(let error):
            precondition(!foundationTakes(text), "refused (\(error)), Foundation takes: \(String(decoding: text, as: UTF8.self).debugDescription)")
        }
        return
    }
}

private func parse(_ text: [UInt8]) -> Result<JSONValue, JSONParseError> {
    text.withUnsafeBytes { bytes in Result { () throws(JSONParseError) in try JSONValue.parse(bytes: bytes) } }
}

private func foundationTakes(_ text: [UInt8]) -> Bool {
    (try? JSONSerialization.jsonObject(with: Data(text), options: .fragmentsAllowed)) != nil
}

extension Result {
    fileprivate var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}

@main enum Main { static func main() { FuzzTarget.main(fuzzVarlink) } }
