import Foundation

/// Why a Unix socket could not be set up; each case names the path and what to do.
public enum VarlinkSocketError: Error, CustomStringConvertible, Sendable {
    case pathTooLong(String)
    case inUse(String)
    case system(path: String, call: String, errno: Int32)
    /// The socket's folder is one another user could put another socket in, or take this one from.
    case unsafeFolder(String, reason: String)

    public var description: String {
        switch self {
        case .pathTooLong(let path): "socket path \(path) is longer than the \(UnixSocket.maxPathBytes) bytes a Unix socket allows"
        case .inUse(let path): "another process is already serving on \(path)"
        case .system(let path, let call, let code): "\(call) \(path): \(String(cString: strerror(code)))"
        case .unsafeFolder(let folder, let reason):
            "the socket's folder \(folder) \(reason): another user could replace the socket with one of theirs; use a folder of this user's that only it may write"
        }
    }
}

public enum UnixSocket {
    /// The longest path a Unix socket can be bound to: sun_path, less its terminating NUL.
    public static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    static func address(_ path: String) throws(VarlinkSocketError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathBytes else { throw .pathTooLong(path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    static func withSockaddr<R>(_ address: inout sockaddr_un, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// A connected, blocking stream socket.
    static func connect(path: String) throws(VarlinkSocketError) -> Int32 {
        var address = try address(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system(path: path, call: "socket", errno: errno) }
        let rc = withSockaddr(&address) { Glibc.connect(fd, $0, $1) }
        if rc != 0 {
            let code = errno
            Glibc.close(fd)
            throw .system(path: path, call: "connect", errno: code)
        }
        return fd
    }

    /// A non-blocking listening socket at `path`, making its folder if needed. A socket file
    /// nobody answers on is a leftover and is replaced.
    static func bindListening(path: String) throws(VarlinkSocketError) -> Int32 {
        var address = try address(path)
        try prepareFolder(forSocket: path)
        var info = stat()
        if lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK {
            if let probe = try? connect(path: path) {
                Glibc.close(probe)
                throw .inUse(path)
            }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .system(path: path, call: "socket", errno: errno) }
        let bound = withSockaddr(&address) { bind(fd, $0, $1) }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(path: path, call: "bind", errno: code)
        }
        // Who may call what is the daemon's decision (by peer credentials), not the file mode's.
        chmod(path, 0o666)
        guard Glibc.listen(fd, SOMAXCONN) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(path: path, call: "listen", errno: code)
        }
        return fd
    }

    /// Makes the socket's folder if it is missing (mode 0755) and checks it (`checkFolder`).
    static func prepareFolder(forSocket path: String) throws(VarlinkSocketError) {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty { try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try checkFolder(folder.isEmpty ? "." : folder)
    }

    /// The socket's folder must be this user's or root's, and writable by no one else: in a
    /// folder another user owns or may write (a /tmp/adorch-UID someone made first, mode 0777),
    /// that user could unlink the socket and bind an impostor in its place. A root-owned folder
    /// with the sticky bit (/tmp) is accepted: there only an entry's owner may remove it.
    static func checkFolder(_ folder: String) throws(VarlinkSocketError) {
        var info = stat()
        guard lstat(folder, &info) == 0 else { throw .system(path: folder, call: "stat", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw .unsafeFolder(folder, reason: "is not a folder (a symbolic link or another file)") }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw .unsafeFolder(folder, reason: "belongs to uid \(info.st_uid), not to this daemon's uid \(geteuid()) or root")
        }
        let stickyRoot = info.st_mode & S_ISVTX != 0 && info.st_uid == 0
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0, !stickyRoot {
            throw .unsafeFolder(folder, reason: "is writable by \(info.st_mode & S_IWOTH != 0 ? "anyone" : "its group (gid \(info.st_gid))") (mode \(String(info.st_mode & 0o7777, radix: 8)))")
        }
    }

    static func boundPath(_ fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        return withUnsafeBytes(of: address.sun_path) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var credentials = KernelUcred()
        var length = socklen_t(MemoryLayout<KernelUcred>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: peerGroups(fd))
    }

    /// The peer's supplementary groups as they were at connect time (SO_PEERGROUPS, Linux
    /// 4.13), so that group rules see what the kernel saw rather than today's /etc/group.
    private static func peerGroups(_ fd: Int32) -> [UInt32] {
        let soPeerGroups: Int32 = 59  // <asm-generic/socket.h>; not in Glibc's Swift overlay
        var groups = [UInt32](repeating: 0, count: 64)
        while true {
            var length = socklen_t(groups.count * MemoryLayout<UInt32>.size)
            if getsockopt(fd, SOL_SOCKET, soPeerGroups, &groups, &length) == 0 {
                return Array(groups.prefix(Int(length) / MemoryLayout<UInt32>.size))
            }
            // ERANGE says how much room is needed.
            guard errno == ERANGE, Int(length) > groups.count * MemoryLayout<UInt32>.size else { return [] }
            groups = [UInt32](repeating: 0, count: Int(length) / MemoryLayout<UInt32>.size)
        }
    }
}

/// struct ucred from <sys/socket.h>, which Glibc's Swift overlay hides behind _GNU_SOURCE;
/// the kernel's layout is fixed: pid, uid, gid, 32 bits each.
private struct KernelUcred {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
