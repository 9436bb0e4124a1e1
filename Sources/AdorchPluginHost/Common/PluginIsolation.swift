/// Where a plugin's code runs: in a host process of its own, or in the process that drives it
/// (the daemon, the validator). Both `isolation` in a plugin's config and the validator's
/// `--isolation` take these names.
public enum PluginIsolation: String, CaseIterable, Sendable {
    /// A crash, a spin or a balloon costs the plugin's own host process, never the caller.
    case process
    /// No message crosses a process boundary, but the plugin's crash is the caller's.
    case inProcess = "in-process"

    /// Isolated: a plugin that crashes must not take every other plugin's ads down with it.
    public static let `default` = PluginIsolation.process
}
