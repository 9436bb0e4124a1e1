/// Who hears how a run goes beside its results: each check as it starts (the one to blame if
/// the plugin crashes before the next) and that calls into the plugin still return.
public struct RunWatcher: Sendable {
    public var checkStarted: @Sendable (String) -> Void
    public var progressed: @Sendable () -> Void

    public init(checkStarted: @escaping @Sendable (String) -> Void, progressed: @escaping @Sendable () -> Void) {
        self.checkStarted = checkStarted
        self.progressed = progressed
    }

    /// In process: the crash note names the check from the signal handler, and nothing can
    /// watch for a plugin that stops answering (it would stop the watcher too).
    public static let crashNote = RunWatcher(checkStarted: { CrashNote.set($0) }, progressed: {})
}
