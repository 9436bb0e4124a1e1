/// One network's request budget as the scheduler has learned it (docs/scheduler.md,
/// "Networks").
///
/// A `rate_limited` answer pauses the network for every slot; it also teaches the scheduler
/// the network's limit: four fifths of the loads it was sent in the window before the
/// answer. After the pause, loads go to it only while fewer than that many were started in
/// the window, so it is not asked past its limit again. A second `rate_limited` answer to a
/// load started after a pause lowers the limit once more, unless that load was one of only
/// a few (under half the limit): then the network is still punishing the first excess, and
/// its pause, not its limit, was too short: the pause doubles (to an hour at most). Every six hours without one raise
/// it by one load, so a limit that was lifted is found again. It is kept across restarts.
public struct NetworkPace: Sendable, Equatable {
    /// The window the limit counts loads in.
    public static let window: Duration = .seconds(60)
    /// The share of the loads that drew the answer that the limit allows afterwards.
    static let backOff = 0.8
    /// The learned limit grows by one load per this long without a `rate_limited` answer.
    static let recovery: Duration = .seconds(6 * 3600)

    /// The limit as learned at `learnedAt`; `limit(at:)` adds what quiet time gave back.
    private var learned: Int?
    private var learnedAt: Moment = .zero
    /// Load starts within the window, oldest first.
    private var starts: [Moment] = []
    public private(set) var pausedUntil: Moment = .zero
    /// When the last pause began: answers to loads started before it taught us already.
    private var pausedAt: Moment?
    /// The pause this network needs, once one proved too short.
    private var learnedPause: Duration?
    static let longestPause: Duration = .seconds(3600)
    /// The highest limit a restored file may name: more loads a minute than any network takes.
    public static let highestLimit = 1_000_000

    /// A pace restored from the state directory: its limit counts as learned at `now`.
    public init(limit: Int? = nil, at now: Moment = .zero) {
        learned = limit
        learnedAt = now
    }

    /// At most this many loads per window, once learned.
    public func limit(at now: Moment) -> Int? {
        learned.map { $0 + Int(((now - learnedAt) / Self.recovery).rounded(.down)) }
    }

    mutating func noteStart(at now: Moment) {
        trim(at: now)
        starts.append(now)
    }

    /// Whether a load may start now: not paused and under the learned limit.
    func admits(at now: Moment) -> Bool {
        guard pausedUntil <= now else { return false }
        guard let limit = limit(at: now) else { return true }
        return starts.lazy.filter { $0 > now - Self.window }.count < limit
    }

    /// When a network that does not admit now will: the pause's end, or the moment the
    /// oldest start in the window leaves it.
    func nextAdmission(at now: Moment) -> Moment? {
        if pausedUntil > now { return pausedUntil }
        guard let limit = limit(at: now) else { return nil }
        let inWindow = starts.filter { $0 > now - Self.window }
        guard inWindow.count >= limit else { return nil }
        return inWindow[inWindow.count - limit] + Self.window
    }

    /// A `rate_limited` answer to a load started at `startedAt`. Returns whether it began a
    /// new pause (answers to loads sent before the current pause began change nothing).
    mutating func rateLimited(loadStartedAt startedAt: Moment, at now: Moment, pause: Duration) -> Bool {
        if let pausedAt, startedAt < pausedAt { return false }
        trim(at: now)
        let sent = starts.filter { $0 > startedAt - Self.window && $0 <= startedAt }.count
        if let limit = limit(at: now), sent * 2 < limit {
            learnedPause = min(max(learnedPause ?? pause, pause) * 2, Self.longestPause)
        } else {
            let fresh = max(1, Int((Double(sent) * Self.backOff).rounded(.down)))
            learned = min(limit(at: now) ?? fresh, fresh)
            learnedAt = now
        }
        pausedAt = now
        pausedUntil = now + max(learnedPause ?? pause, pause)
        return true
    }

    private mutating func trim(at now: Moment) {
        // Two windows: a rate_limited answer counts the window before its load's start.
        let cut = now - Self.window - Self.window
        if let first = starts.first, first <= cut { starts.removeAll { $0 <= cut } }
    }
}
