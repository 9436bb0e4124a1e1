import Foundation

/// Says which check was running when a plugin crashes the validator, from a signal handler
/// (only write(2) is safe there): the line a plugin author most needs.
public enum CrashNote {
    private nonisolated(unsafe) static let buffer: UnsafeMutablePointer<CChar> = {
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: 512)
        p.initialize(repeating: 0, count: 512)
        return p
    }()

    /// The handlers that were there before (the Swift runtime's backtracer): they run after the note.
    private nonisolated(unsafe) static let previous: UnsafeMutablePointer<sigaction> = {
        let p = UnsafeMutablePointer<sigaction>.allocate(capacity: 32)
        p.initialize(repeating: sigaction(), count: 32)
        return p
    }()

    /// Installs the handlers for the signals a crashing plugin raises.
    public static func install() {
        for signal in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                _ = write(STDERR_FILENO, CrashNote.buffer, strlen(CrashNote.buffer))
                // No formatting in a signal handler: the number's two digits by hand.
                var tail: (UInt8, UInt8, UInt8, UInt8) = (0x30 + UInt8(number / 10), 0x30 + UInt8(number % 10), 0x29, 0x0A)
                _ = withUnsafeBytes(of: &tail) { write(STDERR_FILENO, $0.baseAddress, 4) }
                // The previous handler takes it from here, once this one returns and the fault repeats.
                sigaction(number, CrashNote.previous + Int(number), nil)
                if number == SIGABRT { raise(number) }
            }
            sigaction(signal, &action, previous + Int(signal))
        }
    }

    static func set(_ check: String) {
        let text = "FAIL  \(check): the plugin crashed the validator (signal "
        _ = text.withCString { strncpy(buffer, $0, 511) }
    }
}
