import Foundation
import XCTest

/// A disk the test can fill to the last byte: a small tmpfs, for what must survive a full disk.
extension XCTestCase {
    /// A tmpfs of `megabytes` mounted on a new folder, unmounted at teardown; skips where
    /// this process may not mount (not root, or no mount namespace of its own to do it in).
    func smallDisk(megabytes: Int) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-fulldisk-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let mounted = try runCommand("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0755", "tmpfs", folder.path])
        guard mounted.status == 0 else {
            try? FileManager.default.removeItem(at: folder)
            throw XCTSkip("a full disk is made with a tmpfs, which this process may not mount: \(mounted.stderr)")
        }
        addTeardownBlock {
            _ = try? runCommand("/bin/umount", ["-l", folder.path])
            try? FileManager.default.removeItem(at: folder)
        }
        return folder
    }

    /// Writes zeros to `path` until the disk is full.
    func fillDisk(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0, count: 4096)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
    }
}
