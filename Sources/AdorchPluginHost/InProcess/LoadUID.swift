/// A request's load_uid (plugin.h, ABI 1.3): 128 random bits as 32 lowercase hex digits, so
/// that a network's trans_id built from it never repeats, across loads or daemon runs.
public func newLoadUID() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<2).map { _ in
        let hex = String(generator.next() as UInt64, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }.joined()
}
