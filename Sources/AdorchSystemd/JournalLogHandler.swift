import CSystemd
import Foundation
import Logging

/// A swift-log handler that writes native journal entries through sd_journal_sendv(3):
/// MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE/LINE/FUNC, and every metadata key as a
/// field of its own (`slot` → `SLOT=`, `message_id` → `MESSAGE_ID=`).
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    private let identifier: String

    public init(identifier: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil) {
        self.identifier = identifier
        self.logLevel = level
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = [
            "MESSAGE=\(event.message)", "PRIORITY=\(Self.priority(event.level))", "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(event.file)", "CODE_LINE=\(event.line)", "CODE_FUNC=\(event.function)",
        ]
        if let error = event.error { fields.append("ERROR=\(error)") }
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        for (key, value) in all.sorted(by: { $0.key < $1.key }) {
            guard let name = Self.fieldName(key) else { continue }
            fields.append("\(name)=\(value)")
        }
        Self.send(fields)
    }

    /// Writes one entry; fields are "NAME=value", values may hold newlines.
    static func send(_ fields: [String]) {
        let buffers = fields.map { Array($0.utf8) }
        var pinned: [UnsafeMutableRawPointer] = []
        defer { pinned.forEach { $0.deallocate() } }
        var vectors = buffers.map { bytes -> iovec in
            let memory = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
            memory.copyMemory(from: bytes, byteCount: bytes.count)
            pinned.append(memory)
            return iovec(iov_base: memory, iov_len: bytes.count)
        }
        _ = sd_journal_sendv(&vectors, Int32(vectors.count))
    }

    /// journald's rule for field names: A–Z, 0–9 and _, not starting with _ or a digit
    /// (leading _ is reserved for trusted fields), at most 64 bytes. Anything else is dropped
    /// rather than guessed at.
    public static func fieldName(_ key: String) -> String? {
        let name = key.uppercased().map { $0 == "-" || $0 == "." ? "_" : $0 }
        guard let first = name.first, first.isASCII, first.isLetter, name.count <= 64,
              name.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber || $0 == "_") })
        else { return nil }
        let field = String(name)
        // These are the handler's own; metadata must not forge them.
        return ["MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC"].contains(field) ? nil : field
    }

    /// syslog priorities, as journalctl -p reads them.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// Whether journald is there to take entries: stderr is already the journal stream
    /// (started by systemd), or journald's socket exists.
    public static var journalIsAvailable: Bool {
        if stderrIsJournalStream { return true }
        return access("/run/systemd/journal/socket", W_OK) == 0
    }

    /// JOURNAL_STREAM names the device and inode of the stream systemd connected to stderr.
    public static var stderrIsJournalStream: Bool {
        guard let value = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        var info = stat()
        guard parts.count == 2, fstat(2, &info) == 0 else { return false }
        return UInt64(parts[0]) == UInt64(info.st_dev) && UInt64(parts[1]) == UInt64(info.st_ino)
    }
}
