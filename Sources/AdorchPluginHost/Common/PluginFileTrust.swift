import Foundation

/// The checks sudo and PAM make on the modules they load, made on a plugin before `dlopen`
/// runs any of its code: a file someone else could have replaced is not loaded.
public enum PluginFileTrust {
    /// Refuses `path` when it is reached through a symlink that leaves its folder, or when the
    /// file or any folder above it is owned by a user other than root and `owner`, or is
    /// writable by group or others. A root-owned folder with the sticky bit (/tmp) is accepted:
    /// in it only an entry's owner can rename or remove the entry, so the path below it cannot
    /// be swapped. `root` is root's uid as the caller sees it (another in a user namespace
    /// that does not map it).
    public static func check(_ path: String, owner: uid_t, root: uid_t = 0) throws(PluginLoadError) {
        let owners: Set<uid_t> = [root, owner]
        let folder = (path as NSString).deletingLastPathComponent
        guard let realFolder = resolved(folder.isEmpty ? "." : folder), let realFile = resolved(path) else {
            throw .untrusted(path: path, reason: "cannot resolve it: \(String(cString: strerror(errno)))")
        }
        guard (realFile as NSString).deletingLastPathComponent == realFolder else {
            throw .untrusted(path: path, reason: "it leads to \(realFile) through a symlink, outside the plugin folder \(realFolder)")
        }
        var current = realFile
        while true {
            var info = stat()
            guard lstat(current, &info) == 0 else {
                throw .untrusted(path: path, reason: "cannot stat \(current): \(String(cString: strerror(errno)))")
            }
            let what = current == realFile ? "the file" : "the folder \(current)"
            guard owners.contains(info.st_uid) else {
                let allowed = root == 0 ? owners.sorted().map { "uid \($0)" }.joined(separator: " or ") : "uid \(owner) or root"
                throw .untrusted(path: path, reason: "\(what) is owned by uid \(info.st_uid), not by \(allowed)")
            }
            let isFolder = info.st_mode & S_IFMT == S_IFDIR
            let stickyRootFolder = isFolder && info.st_mode & S_ISVTX != 0 && info.st_uid == root
            if info.st_mode & (S_IWGRP | S_IWOTH) != 0, !stickyRootFolder {
                let who = info.st_mode & S_IWOTH != 0 ? "anyone" : "its group (gid \(info.st_gid))"
                throw .untrusted(path: path, reason: "\(what) is writable by \(who) (mode \(String(info.st_mode & 0o7777, radix: 8)))")
            }
            if current == "/" { break }
            current = (current as NSString).deletingLastPathComponent
        }
    }

    private static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }
}
