import Foundation

/// [engine queue] Moves a damaged SQLite file of the state directory aside, to
/// `PATH.broken-SECONDS`, with its WAL and shared memory: the writes not yet merged are in
/// there, for whoever looks at it. Where it went, or nil if it could not be moved.
func moveAsideDamaged(_ path: String) -> String? {
    let aside = path + ".broken-\(Int(Date().timeIntervalSince1970))"
    guard (try? FileManager.default.moveItem(atPath: path, toPath: aside)) != nil else { return nil }
    for suffix in ["-wal", "-shm"] { try? FileManager.default.moveItem(atPath: path + suffix, toPath: aside + suffix) }
    return aside
}
