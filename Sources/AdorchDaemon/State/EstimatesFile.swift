import AdorchEngine
import Foundation
import Logging

/// What the scheduler learned, kept in the state directory so that a restarted daemon does
/// not start cold (docs/scheduler.md, "Across restarts"). Written on the engine queue every
/// minute and at stop; a missing file is a first start, a corrupt or unreadable one is logged
/// and ignored, and a failed write is logged once (and once more when writes work again).
/// Nothing about it is ever fatal.
struct EstimatesFile {
    static let name = "scheduler-estimates.json"
    /// A larger file is not read: a real one is kilobytes (a slot is a few hundred bytes).
    static let largest = 16 << 20
    /// How often the running daemon writes it.
    static let interval: Duration = .seconds(60)

    let path: String
    /// Whether the last write failed, so a failing disk is logged once, not every minute.
    private(set) var failing = false

    init(stateDir: String) { path = stateDir + "/" + Self.name }

    private struct Contents: Codable {
        var version: Int
        /// Seconds since 1970: how long the daemon was away decays the demand.
        var savedAt: Double
        var estimates: SchedulerEstimates
    }

    /// The kept estimates and how long ago they were saved, or nil.
    func load(logger: Logger) -> (SchedulerEstimates, away: Duration)? {
        guard FileManager.default.fileExists(atPath: path) else {
            logger.info("no scheduler estimates at \(path) yet: demand is learned from now on")
            return nil
        }
        do {
            let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
            guard size <= Self.largest else {
                logger.warning("ignoring scheduler estimates \(path): \(size) bytes, more than \(Self.largest) a real one could have")
                return nil
            }
            let contents = try JSONDecoder().decode(Contents.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            guard contents.version == 1 else {
                logger.warning("ignoring scheduler estimates \(path): version \(contents.version), expected 1")
                return nil
            }
            let away = Duration.seconds(max(0, Date().timeIntervalSince1970 - contents.savedAt))
            logger.info("scheduler estimates restored from \(path), saved \(Int(away.seconds)) s ago")
            return (contents.estimates, away)
        } catch {
            logger.warning("ignoring scheduler estimates \(path), which cannot be read: \(inWords(error)); demand is learned from now on")
            return nil
        }
    }

    mutating func save(_ estimates: SchedulerEstimates, logger: Logger) {
        do {
            let data = try JSONEncoder().encode(Contents(version: 1, savedAt: Date().timeIntervalSince1970, estimates: estimates))
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
            if failing { logger.notice("scheduler estimates are written to \(path) again") }
            failing = false
        } catch {
            if !failing {
                logger.warning("cannot write scheduler estimates to \(path): \(inWords(error)); the scheduler runs on, but a restart will start cold")
            }
            failing = true
        }
    }
}

/// An error in words: Foundation's file errors say "NSCocoaErrorDomain error 4" otherwise.
func inWords(_ error: Error) -> String {
    let ns = error as NSError
    if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
        return String(cString: strerror(Int32(underlying.code)))
    }
    if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
    if error is DecodingError { return "not valid JSON of the expected shape (\(error))" }
    return ns.localizedDescription
}
