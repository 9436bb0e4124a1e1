import Glibc
import GRDB

/// A database of the daemon's state directory (the reward ledger, the frequency caps'
/// history, the privacy records): one SQLite file in WAL mode, migrated as it is opened.
/// One connection each: a pool would open reader connections (two files each) on demand and
/// keep them, so the daemon's open files would depend on its history.
public enum StateDatabase {
    /// What a commit waits for before it returns.
    public enum Sync: String, Sendable {
        /// The disk: the commit survives a power loss (rewards, privacy records).
        case full = "FULL"
        /// The kernel: it survives the daemon's death, `kill -9` included, not a power loss,
        /// and nothing waits for the disk (impressions).
        case normal = "NORMAL"
    }

    /// Opens `path` (making it if there is none) and runs `migrations`. With `table`, a file
    /// whose table lacks any of `columns` after migrating (another program's, or damaged) is
    /// refused with `SchemaError`, so that it is moved aside rather than failing every write.
    public static func open(_ path: String, sync: Sync, migrations: (inout DatabaseMigrator) -> Void,
                            table: String? = nil, columns: Set<String> = []) throws -> DatabaseQueue {
        // Made owner-only before SQLite opens it, whatever the umask of a daemon started by
        // hand: SQLite gives its -wal and -shm files the database's mode, and the files hold
        // user ids and consent strings.
        let made = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        if made >= 0 { close(made) }
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(sync.rawValue)") }
        configuration.journalMode = .wal
        let database = try DatabaseQueue(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrations(&migrator)
        try migrator.migrate(database)
        if let table {
            let present = try database.read { db in Set(try db.columns(in: table).map(\.name)) }
            let missing = columns.subtracting(present)
            guard missing.isEmpty else { throw SchemaError(table: table, missing: missing.sorted()) }
        }
        return database
    }

    /// Whether `open`'s error says the file itself is bad (not SQLite, corrupt, another
    /// schema), not the moment (too many open files, no memory, an I/O error).
    public static func isDamage(_ error: Error) -> Bool {
        if error is SchemaError { return true }
        guard let database = error as? DatabaseError else { return false }
        return [.SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_FORMAT].contains(database.resultCode)
    }

    /// The file's table lacks columns its store writes.
    public struct SchemaError: Error, CustomStringConvertible {
        public var table: String
        public var missing: [String]
        public var description: String { "its \(table) table has no column \(missing.joined(separator: ", "))" }
    }
}
