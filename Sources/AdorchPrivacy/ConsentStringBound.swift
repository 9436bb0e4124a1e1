/// How much consent text the decoders read at most.
public enum ConsentStringBound {
    /// The longest TC or GPP string decoded, in bytes of text. A string comes from an app, so
    /// an unbounded one would let it make the daemon allocate and loop at will; real strings
    /// are a few hundred bytes (a BitField over today's ~1,000 registered vendors is ~170
    /// characters), and 8 KiB leaves room for a GPP string carrying many sections.
    public static let maxBytes = 8 * 1024
}
