import AdorchLocking
import Foundation

/// A folder made for this test process that every uid may enter and read. The checkout may
/// lie where only its owner can enter (a 0700 home, as Debian makes them): whatever a test
/// hands to another uid (a script, adorchctl, a client program) is copied here first, with
/// `RunFolder.copy(of:)`, and `asUser` refuses a path that uid could not reach.
enum RunFolder {
    /// `adorch-run-PID` in the temporary folder, mode 0755; removed when the test process
    /// exits, and by the next run if this one crashed (its pid is in the name).
    static var root: URL { get throws { try made.get() } }

    private static let made: Result<URL, TestFailure> = {
        let temporary = FileManager.default.temporaryDirectory
        removeCrashedRuns(in: temporary)
        let root = temporary.appendingPathComponent("\(prefix)\(getpid())")
        try? FileManager.default.removeItem(at: root)
        do {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        } catch {
            return .failure(TestFailure("cannot make the run folder \(root.path): \(error)"))
        }
        chmod(root.path, 0o755)
        atexit { if case .success(let root) = RunFolder.made { try? FileManager.default.removeItem(at: root) } }
        return .success(root)
    }()

    private static let prefix = "adorch-run-"
    private static let copies = LockedValue<[String: URL]>([:])

    /// `source` (a file or a folder), copied into the run folder once and made readable by
    /// every uid (executable where its owner may execute it); the copy's path, which mirrors
    /// the source's so that two sources never share one.
    static func copy(of source: URL) throws -> URL {
        let path = source.standardizedFileURL.path
        let root = try root
        return try copies.withLock { copies in
            if let copy = copies[path] { return copy }
            let copy = root.appendingPathComponent(String(path.drop { $0 == "/" }))
            try FileManager.default.createDirectory(at: copy.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: URL(fileURLWithPath: path), to: copy)
            try openToEveryone(copy)
            var parent = copy.deletingLastPathComponent()
            while parent.path.count > root.path.count {
                chmod(parent.path, 0o755)
                parent = parent.deletingLastPathComponent()
            }
            copies[path] = copy
            return copy
        }
    }

    /// a+r on files, a+x where the owner has x, 0755 on folders; whatever the umask was.
    private static func openToEveryone(_ url: URL) throws {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { throw TestFailure("\(url.path): \(String(cString: strerror(errno)))") }
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            chmod(url.path, 0o755)
            for name in try FileManager.default.contentsOfDirectory(atPath: url.path) {
                try openToEveryone(url.appendingPathComponent(name))
            }
        case S_IFREG:
            chmod(url.path, info.st_mode & 0o100 != 0 ? 0o755 : 0o644)
        default:
            break
        }
    }

    /// Run folders of test processes that are gone (a crash skips the removal at exit).
    private static func removeCrashedRuns(in temporary: URL) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(at: temporary.appendingPathComponent(name))
        }
    }
}

/// The argv that runs `command` as `uid`, with its own gid and `groups` (none unless named),
/// through setpriv: how the tests (root) become an app's user; like `diesWithTheTests`, it
/// dies with the thread that spawns it. Every path in `command` must be reachable by that uid
/// (folders on the way searchable, through symbolic links too, the program executable, a file
/// readable, a folder readable and searchable) or this fails naming the path, rather than
/// letting the command fail far from the cause; `unreadable` names paths the test hands over
/// unreadable on purpose.
func asUser(_ uid: Int, groups: [Int] = [], _ command: [String], unreadable: Set<String> = []) throws -> [String] {
    let identity = Identity(uid: uid_t(uid), gids: Set([gid_t(uid)] + groups.map { gid_t($0) }))
    for (index, argument) in command.enumerated() where argument.hasPrefix("/") && !unreadable.contains(argument) {
        let real = URL(fileURLWithPath: argument).resolvingSymlinksInPath().path
        guard let why = identity.cannotUse(argument, execute: index == 0) ?? identity.cannotUse(real, execute: index == 0) else { continue }
        let inRunFolder = (try? RunFolder.root).map { argument.hasPrefix($0.path + "/") } ?? false
        let remedy = inRunFolder
            ? "the run folder is in the temporary folder, which other uids must be able to enter: set TMPDIR to one they can (make test does)"
            : "hand it a copy in the run folder (RunFolder.copy(of:))"
        throw TestFailure("uid \(uid) cannot use \(argument)\(real == argument ? "" : " (\(real))"): \(why); \(remedy)")
    }
    let setpriv = ["--reuid=\(uid)", "--regid=\(uid)", groups.isEmpty ? "--clear-groups" : "--groups=\(groups.map(String.init).joined(separator: ","))"]
    return ["/usr/bin/setpriv", "--pdeathsig", "KILL"] + setpriv + command
}

/// A uid and its groups, checked against mode bits the way the kernel does (no ACLs here).
private struct Identity {
    let uid: uid_t
    let gids: Set<gid_t>

    /// Why this identity cannot use `path`, or nil; a path that does not exist is not
    /// checked (an argument that only looks like a path, or one the command will create).
    func cannotUse(_ path: String, execute: Bool) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        var prefix = ""
        for component in path.split(separator: "/").dropLast() {
            prefix += "/" + component
            var folder = stat()
            guard stat(prefix, &folder) == 0 else { return nil }
            if !allows(folder, 0o1) { return "\(prefix) cannot be entered (mode \(String(folder.st_mode & 0o7777, radix: 8)), owner \(folder.st_uid))" }
        }
        let mode = String(info.st_mode & 0o7777, radix: 8)
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            return allows(info, 0o5) ? nil : "the folder cannot be listed (mode \(mode), owner \(info.st_uid))"
        case S_IFSOCK:
            return nil
        default:
            if !allows(info, 0o4) { return "it cannot be read (mode \(mode), owner \(info.st_uid))" }
            if execute, !allows(info, 0o1) { return "it cannot be executed (mode \(mode))" }
            return nil
        }
    }

    /// Whether the class of the mode bits that applies to this identity has all of `bits`.
    private func allows(_ info: stat, _ bits: mode_t) -> Bool {
        if uid == 0 { return true }
        let shift: mode_t = info.st_uid == uid ? 6 : gids.contains(info.st_gid) ? 3 : 0
        return (info.st_mode >> shift) & bits == bits
    }
}
