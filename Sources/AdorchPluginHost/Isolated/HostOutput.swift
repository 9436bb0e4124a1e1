import AdorchEngine
import Foundation
import Logging

/// What a host writes on its stdout and stderr: a pipe the daemon reads, never the daemon's
/// own stderr (a plugin could otherwise write lines that look like the daemon's, unbounded,
/// or truncate a console log file). Each line is logged as the plugin's, `stderr: …`, escaped
/// and cut like a `host->log` line and counted in the same 200 lines a second. Past them, or
/// past `bytesPerSecond`, the pipe is left unread until the second ends, so a plugin that
/// keeps writing blocks on its own writes and costs the daemon nothing more.
enum HostOutput {
    /// A second's worth of the most a plugin may log: its lines, each at the text bound.
    static let bytesPerSecond = CallbackBounds.logLinesPerSecond * CallbackBounds.textBytes

    /// Reads `fd` (the pipe's read end) on a thread of its own until every writer is gone,
    /// then closes it. `lines` is the plugin's log-line window, shared with its `host->log`.
    static func startReading(_ fd: Int32, name: String, logger: Logger, lines: SecondWindow) {
        let thread = Thread {
            var reader = LineReader(logger: logger, lines: lines)
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            var second = ContinuousClock.now
            var bytesThisSecond = 0
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                let now = ContinuousClock.now
                if now - second >= .seconds(1) { (second, bytesThisSecond) = (now, 0) }
                bytesThisSecond += n
                let withinLines = reader.take(chunk[0..<n])
                if !withinLines || bytesThisSecond >= bytesPerSecond {
                    let rest = second + .seconds(1) - ContinuousClock.now
                    if rest > .zero { Thread.sleep(forTimeInterval: rest.seconds) }
                }
            }
            reader.finish()
            close(fd)
        }
        thread.name = "adorch.host-output.\(name)"
        thread.start()
    }

    /// Splits what is read into lines and logs each; a line longer than the text bound is
    /// logged cut as soon as it passes the bound, and the rest of it dropped.
    struct LineReader {
        let logger: Logger
        let lines: SecondWindow
        private var pending: [UInt8] = []
        private var skippingRest = false
        private var allAdmitted = true

        init(logger: Logger, lines: SecondWindow) {
            (self.logger, self.lines) = (logger, lines)
        }

        /// Takes a chunk; false when some line in it was over the plugin's lines per second.
        /// A line at a time, not a byte: an endless line (an outside attack wrote 400 MB
        /// without a newline) costs a search for the next newline, nothing more.
        mutating func take(_ bytes: ArraySlice<UInt8>) -> Bool {
            allAdmitted = true
            var rest = bytes
            while !rest.isEmpty {
                let newline = rest.firstIndex(of: UInt8(ascii: "\n"))
                if !skippingRest {
                    // One byte past the bound, so that logText cuts the line and says so.
                    pending.append(contentsOf: rest[..<(newline ?? rest.endIndex)].prefix(CallbackBounds.textBytes + 1 - pending.count))
                    if pending.count > CallbackBounds.textBytes {
                        emit()
                        pending.removeAll(keepingCapacity: true)
                        skippingRest = true
                    }
                }
                guard let newline else { break }
                if !skippingRest { emit() }
                skippingRest = false
                pending.removeAll(keepingCapacity: true)
                rest = rest[(newline + 1)...]
            }
            return allAdmitted
        }

        /// What is left when every writer closed: a last line without its newline.
        mutating func finish() {
            if !pending.isEmpty, !skippingRest { emit() }
        }

        private mutating func emit() {
            guard lines.admit(warning: logger, FloodNote.logLines) else {
                allAdmitted = false
                return
            }
            logger.warning("stderr: \(CallbackBounds.logText(String(decoding: pending, as: UTF8.self)))")
        }
    }
}
