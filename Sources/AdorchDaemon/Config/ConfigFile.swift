import Foundation

/// Reads the files a config is made of or names (the config, its drop-ins, the reward key)
/// with the system's own calls, so that what went wrong is said with the path and the
/// system's reason ("is a directory", "too many levels of symbolic links"): Foundation's
/// readers answer some of these with nothing but "NSCocoaErrorDomain error 256".
enum ConfigFile {
    /// No config or key is this large: a bigger file (or /dev/zero) is a mistake, not read to its end.
    static let maxBytes = 4 << 20

    /// The text of the file at `path` (a pipe too: `--config <(…)`); errors name `location`
    /// ("file", or the key that named it).
    static func text(_ path: String, location: String = "file") throws(ConfigError) -> String {
        // O_NONBLOCK: opening a FIFO that has no writer must not wait for one.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw unreadable(path, location, reason(errno)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw unreadable(path, location, reason(errno)) }
        if info.st_mode & S_IFMT == S_IFDIR { throw unreadable(path, location, reason(EISDIR)) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw unreadable(path, location, reason(errno)) }
            if n == 0 { break }
            bytes += chunk[..<n]
            guard bytes.count <= maxBytes else { throw unreadable(path, location, "is more than \(maxBytes >> 20) MiB, too large for a config or key file") }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw unreadable(path, location, "is not UTF-8 text") }
        return text
    }

    /// The `*.toml` files in the drop-in directory `dir`, in name order; none if it does not exist.
    static func dropIns(in dir: String) throws(ConfigError) -> [String] {
        guard let stream = opendir(dir) else {
            if errno == ENOENT { return [] }
            throw ConfigError(file: dir, location: "directory", message: "cannot be read: \(reason(errno))")
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".toml") { names.append(name) }
        }
        return names.sorted().map { dir + "/" + $0 }
    }

    /// The system's words for `code`, as a sentence goes on: "no such file or directory".
    static func reason(_ code: Int32) -> String {
        let text = String(cString: strerror(code))
        return text.prefix(1).lowercased() + text.dropFirst()
    }

    private static func unreadable(_ path: String, _ location: String, _ why: String) -> ConfigError {
        ConfigError(file: path, location: location, message: "cannot be read: \(why)")
    }
}
