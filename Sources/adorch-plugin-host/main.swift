import AdorchPluginHost
import ArgumentParser
import Foundation

/// [host process] Runs one isolated plugin for adorchd (docs/isolation.md). Not for people:
/// the daemon starts it, with the channel on fd 3, and ends it.
@main
struct AdorchPluginHost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adorch-plugin-host",
        abstract: "Run one adorch plugin in a process of its own, for adorchd (isolation = \"process\").",
        discussion: """
            adorchd starts one of these per isolated plugin, with its end of a socketpair on \
            fd \(PluginHostArguments.channelFD), and hands it the plugin over that channel. It is \
            not meant to be run by hand: without adorchd on fd \(PluginHostArguments.channelFD) it exits. \
            See docs/isolation.md.
            """
    )

    @Option(help: "The plugin's name in adorchd's config.")
    var plugin: String

    @Option(help: "adorchd's pid: the host exits if its parent is another process.")
    var parent: Int32

    @Option(name: .customLong("hide"), help: "A path the plugin may not open (repeatable).")
    var hidden: [String] = []

    @Option(help: "The host's address-space limit in MiB (RLIMIT_AS).")
    var addressSpaceMb: UInt64?

    func validate() throws {
        var info = stat()
        guard fstat(PluginHostArguments.channelFD, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else {
            throw ValidationError("fd \(PluginHostArguments.channelFD) is not a socket: adorch-plugin-host is started by adorchd, not by hand")
        }
    }

    func run() throws {
        let confinement = Confinement(hiddenPaths: hidden, addressSpaceBytes: addressSpaceMb.map { $0 << 20 })
        PluginHostService.run(PluginHostArguments(name: plugin, parent: parent, confinement: confinement))
    }
}
