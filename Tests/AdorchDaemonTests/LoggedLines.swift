import AdorchLocking
import Logging

/// What a `Logger` wrote, each line with its level: for tests of what the daemon tells the journal.
struct LoggedLines: Sendable {
    private let lines = LockedValue<[(level: Logger.Level, message: String)]>([])

    /// A logger at info, as the daemon's, writing here.
    var logger: Logger {
        let lines = self.lines
        return Logger(label: "test") { _ in Handler(lines: lines) }
    }

    var all: [String] { lines.withLock { $0.map(\.message) } }

    func at(_ level: Logger.Level) -> [String] { lines.withLock { $0.filter { $0.level == level }.map(\.message) } }

    private struct Handler: LogHandler {
        let lines: LockedValue<[(level: Logger.Level, message: String)]>
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.withLock { $0.append((event.level, "\(event.message)")) } }
    }
}
