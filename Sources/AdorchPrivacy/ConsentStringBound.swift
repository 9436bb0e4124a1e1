/// How much consent text the decoders read at most, and how many GPP sections.
public enum ConsentStringBound {
    /// The longest TC or GPP string decoded, in bytes of text. A string comes from an app, so
    /// an unbounded one would let it make the daemon allocate and loop at will; real strings
    /// are a few hundred bytes (a BitField over today's ~1,000 registered vendors is ~170
    /// characters), and 8 KiB leaves room for a GPP string carrying many sections.
    public static let maxBytes = 8 * 1024

    /// The most sections a GPP string may carry, and so the most ids its header may list and
    /// a `gpp_sid` may name. The specification defines fewer than 25 section ids today (those
    /// carrying consent are 2 and 5 to 23), and a string carries the few that apply to its
    /// viewer; 32 leaves room for ids it adds.
    /// Within `maxBytes` alone, a string could carry 4,000 one-character sections and a
    /// `gpp_sid` naming them all, checked again on every call that carries them.
    public static let maxGPPSections = 32

    /// The highest GPP section id a header may list, and so a `gpp_sid` name. The
    /// specification's ids run to 23 today; a header's Fibonacci-coded ids have no bound of
    /// their own, and an id past what a plugin's `uint32_t gpp_sid` holds must never reach
    /// the host (which refuses the whole call and exits: an app's string would end a plugin).
    public static let maxGPPSectionID = 1_000

    /// The most publisher restrictions a TC string may carry: one per purpose id (6 bits) and
    /// restriction type (2 bits), 256 pairs, each said once. Within `maxBytes` alone, 2,444
    /// restrictions naming no vendor fit, and a decoded one costs more than its 20 bits: kept
    /// for every record an app sets, they made a string's decoded form 7.5 times its size.
    public static let maxPublisherRestrictions = 256
}
