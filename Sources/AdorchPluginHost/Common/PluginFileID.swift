import Foundation

/// A plugin file as the dynamic loader tells files apart. glibc's dlopen answers a file it has
/// open already (the same device and inode, so through a symlink or a hard link too) with the
/// object it holds: one file under two plugin names would be one set of globals, the host
/// table of whichever init ran last among them. A copy of the file is a file of its own.
public struct PluginFileID: Hashable, Sendable, CustomStringConvertible {
    public let device: UInt64
    public let inode: UInt64

    /// What goes wrong when two plugin names are one library, for every message that refuses it.
    public static let sharedGlobals = "a process loads a shared object once, so both names would share its globals"
        + " and the later init would take over the earlier one's callbacks"

    /// The file `path` leads to, symlinks followed; nil if it cannot be reached.
    public init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// As `stat -L -c 'device %d, inode %i' FILE` prints it, to compare by hand.
    public var description: String { "device \(device), inode \(inode)" }
}
