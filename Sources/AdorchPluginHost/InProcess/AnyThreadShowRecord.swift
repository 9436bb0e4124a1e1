/// The daemon's judgement of an any-thread ad_show (ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD): a
/// call over `bound` counts against the plugin, and `strikes` of them among its last
/// `window` calls withdraw the flag for good. One slow call is not enough, because on a busy
/// host the scheduler alone can hold a thread that long; a plugin that blocks is slow again
/// and again. LoadedPlugin.showNow and adorch-plugin-validate both judge by this record.
public struct AnyThreadShowRecord: Sendable {
    /// plugin.h asks for 1 ms; the rest is room for the scheduler.
    public static let bound: Duration = .milliseconds(10)
    public static let strikes = 3
    public static let window = 100

    /// Whether each of the last `window` calls was over the bound, oldest first.
    private var recent: [Bool] = []
    public private(set) var calls = 0
    public private(set) var slowCalls = 0
    public private(set) var slowest = Duration.zero
    public private(set) var withdrawn = false

    public init() {}

    /// Counts one call that took `took`; true if this call withdraws the flag.
    public mutating func note(_ took: Duration) -> Bool {
        let slow = took > Self.bound
        calls += 1
        slowest = max(slowest, took)
        if slow { slowCalls += 1 }
        recent.append(slow)
        if recent.count > Self.window { recent.removeFirst() }
        guard !withdrawn, slow, recent.lazy.filter({ $0 }).count >= Self.strikes else { return false }
        withdrawn = true
        return true
    }
}
