/// What a Load (and a slot's defaults for it) may ask for: the engine checks a call against
/// these and the config checks a slot against the same numbers.
public enum LoadBounds {
    /// Ads in one native load; other formats load one.
    public static let count: ClosedRange<Int> = 1...10
    /// Banner and native sizes, in points.
    public static let size: ClosedRange<Int> = 0...10_000
    /// How long one Load may take in all, in milliseconds (timeout_ms, load_timeout_ms).
    public static let timeoutMilliseconds: ClosedRange<Int64> = 1...60_000
    static let timeoutInWords = "\(timeoutMilliseconds.lowerBound) ms to \(timeoutMilliseconds.upperBound / 1000) s"
}
