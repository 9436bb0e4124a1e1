/// How a user id appears in the journal: never itself (docs/privacy.md, "In the journal"), but
/// as a tag that stays the same for the same id until the daemon restarts, so that an operator
/// can follow one viewer's events through a run without the journal saying who they are.
public enum UserTag {
    /// SipHash of the id, keyed with the process's random seed (Swift's `Hasher`), as 16 hex
    /// digits. Without the seed, which never leaves the process, a tag can be neither reversed
    /// nor matched against a list of likely ids; a restart draws a new one.
    public static func of(_ userID: String) -> String {
        var hasher = Hasher()
        hasher.combine(userID)
        let hex = String(UInt64(bitPattern: Int64(hasher.finalize())), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
