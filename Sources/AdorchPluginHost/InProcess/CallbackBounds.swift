import AdorchLocking
import CAdorchPlugin
import Foundation
import Logging

/// What the host takes from a plugin's callbacks (plugin.h, ADORCH_PAYLOAD_MAX_BYTES and the
/// rest), applied where the callbacks arrive: in the daemon for an in-process plugin, in its
/// host for an isolated one (the daemon applies the rates again to what a host sends, which a
/// plugin could forge on its channel).
public enum CallbackBounds {
    public static let payloadBytes = Int(ADORCH_PAYLOAD_MAX_BYTES)
    public static let textBytes = Int(ADORCH_TEXT_MAX_BYTES)
    public static let logLinesPerSecond = Int(ADORCH_LOG_LINES_PER_S)
    public static let callbacksPerSecond = Int(ADORCH_CALLBACKS_PER_S)
    /// Callbacks are also paced within the second: each slice of it admits that share of
    /// callbacksPerSecond. A second's worth sent at once (20,000 in a few ms) is work the
    /// daemon does ahead of every Show queued behind it: it held Shows up 100 ms and more.
    public static let callbackSlicesPerSecond = Int(ADORCH_CALLBACK_SLICES_PER_S)
    /// Event details a plugin may send in a second, in bytes: a real event's detail is tens of
    /// bytes, and an outside attack's 16 KiB details at 16,000 events a second, passed on to a
    /// subscriber, held every app's Shows up for 20 s and took the daemon to 440 MB.
    public static let detailBytesPerSecond = Int(ADORCH_DETAIL_BYTES_PER_S)
    /// The daemon's own bound, after the callbacks': the events about one plugin's doings it
    /// sends subscribers in a second, rewards granted and network pauses aside (EventFeed). A
    /// network serving a hundred Shows a second makes a few hundred. Each goes to every
    /// subscriber that may see it, so a plugin's 20,000 callbacks a second became 400,000
    /// messages for one app's 20 subscriptions: in an outside attack Shows waited 38 s and the
    /// daemon grew to 410 MB. Past it, subscribers miss the rest of that second's; ListEvents
    /// keeps them.
    public static let publishedEventsPerSecond = 1_000
    /// Callbacks a call into the plugin earns outside the per-second bound (plugin.h).
    public static let callbacksPerLoad = Int(ADORCH_CALLBACKS_PER_LOAD)
    public static let callbacksPerShow = Int(ADORCH_CALLBACKS_PER_SHOW)
    /// The most a plugin keeps of what it earned: one slice's worth.
    public static let mostCallbacksEarned = callbacksPerSecond / callbackSlicesPerSecond

    /// A plugin's text for one log line: cut at textBytes, and every control and format
    /// character written as an escape: C0 (tabs too, which split a line into fields for
    /// whoever reads the log), DEL, C1, the Unicode line and paragraph separators, and the
    /// bidirectional and other invisible format characters (U+202E shows the rest of a line
    /// reversed). No line break can make a line of its own that looks like the daemon's, and
    /// what a reader sees is what the plugin wrote.
    public static func logText(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if out.utf8.count >= textBytes { return out + "…" }
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where isEscaped(scalar): out += String(format: "\\u{%x}", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// A failure's message, which log lines and events carry: as a log line's text.
    public static func message(_ text: String) -> String { logText(text) }
}

/// What bounds a plugin's callbacks (plugin.h): those its host's calls earned first, then at
/// most ADORCH_CALLBACKS_PER_S in a second. Without the earned ones, a plugin kept busy past
/// the bound lost the answers to its loads: each load then timed out, its entry backed off,
/// and a full slot ran dry for minutes under a load the network served.
public final class CallbackBudget: Sendable {
    private let window = SecondWindow(perSecond: CallbackBounds.callbacksPerSecond, slices: CallbackBounds.callbackSlicesPerSecond)
    private let earned = LockedValue(0)

    public init() {}

    /// A call into the plugin that it may answer with `callbacks` callbacks.
    public func earn(_ callbacks: Int) {
        earned.withLock { $0 = min($0 + callbacks, CallbackBounds.mostCallbacksEarned) }
    }

    /// Whether this callback is admitted: earned, or within the second's bound. A second that
    /// dropped some is said once, as a warning.
    public func admit(warning logger: Logger) -> Bool {
        let spent = earned.withLock { balance -> Bool in
            guard balance > 0 else { return false }
            balance -= 1
            return true
        }
        return spent || window.admit(warning: logger, FloodNote.callbacks)
    }

    /// What is earned and not used yet.
    var balance: Int { earned.withLock { $0 } }
}

/// Admits at most `perSecond` events (or units of cost: bytes) in each second, and with
/// `slices` above 1 at most perSecond / slices in each of the second's slices, and counts the
/// events it refuses; once a second passed with some dropped, `admit` hands their count over
/// once, for one log line.
/// Its counters are behind its lock: it is called from plugin threads.
public final class SecondWindow: Sendable {
    private struct Counts {
        var start = ContinuousClock.now
        var admitted = 0
        var dropped = 0
        var slice = 0
        var admittedInSlice = 0
    }

    private let perSecond: Int
    private let slices: Int
    private let perSlice: Int
    private let state = LockedValue(Counts())

    public init(perSecond: Int, slices: Int = 1) {
        self.perSecond = perSecond
        self.slices = max(1, slices)
        perSlice = max(1, perSecond / max(1, slices))
    }

    /// Whether this one (of `cost` units) is admitted, and how many were dropped in the second
    /// that just ended.
    public func admit(cost: Int = 1) -> (admitted: Bool, droppedBefore: Int) {
        state.withLock { s in
            let now = ContinuousClock.now
            var dropped = 0
            if now - s.start >= .seconds(1) {
                dropped = s.dropped
                s = Counts(start: now)
            }
            let slice = Int((now - s.start) / (Duration.seconds(1) / slices))
            if slice != s.slice { (s.slice, s.admittedInSlice) = (slice, 0) }
            if s.admitted + cost <= perSecond, slices == 1 || s.admittedInSlice + cost <= perSlice {
                s.admitted += cost
                s.admittedInSlice += cost
                return (true, dropped)
            }
            s.dropped += 1
            return (false, dropped)
        }
    }

    /// Whether this one is admitted; what the second that just ended dropped is said once, as
    /// a warning `note` words from the count.
    public func admit(cost: Int = 1, warning logger: Logger, metadata: Logger.Metadata? = nil, _ note: (Int) -> String) -> Bool {
        let (admitted, dropped) = admit(cost: cost)
        if dropped > 0 { logger.warning("\(note(dropped))", metadata: metadata) }
        return admitted
    }
}
