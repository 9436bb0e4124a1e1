import AdorchFuzzSupport
import AdorchVarlink
import Foundation

/// Anything a client can send: framing across two reads, then each message decoded as a
/// call and its parameters read through every typed accessor the daemon uses.
func fuzzVarlink(_ data: Data) {
    var framer = VarlinkFramer(maxMessageSize: 4096)
    let cut = data.isEmpty ? 0 : Int(data[data.startIndex]) % (data.count + 1)
    for chunk in [data.prefix(cut), data.dropFirst(cut)] {
        guard let messages = try? framer.append(chunk) else { return }
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
}

@main enum Main { static func main() { FuzzTarget.main(fuzzVarlink) } }
