import Foundation

/// The command line the daemon starts adorch-plugin-host with, and the host reads back:
/// one definition for both ends. The plugin's path and config come over the channel
/// (PluginWire's start), so that nothing secret is in `ps`.
public struct PluginHostArguments: Sendable, Equatable {
    /// The channel to the daemon is always this descriptor in the host.
    public static let channelFD: Int32 = 3
    /// In a box (`ChildSpawn.spawnBoxed`), the box's pid 1 writes the host's wait status here
    /// for the daemon: the host itself is pid 2 and closes it.
    public static let statusFD: Int32 = 4

    /// The plugin's name in the daemon's config, for the process title and logs.
    public var name: String
    /// The daemon's pid: the host ends itself when its parent is no longer this one.
    public var parent: pid_t
    public var confinement: Confinement

    public init(name: String, parent: pid_t, confinement: Confinement) {
        self.name = name
        self.parent = parent
        self.confinement = confinement
    }

    public var arguments: [String] { ["--plugin", name, "--parent", String(parent)] + confinement.arguments }
}
