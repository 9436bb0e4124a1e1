/// Where the server's deadlines (partial_message_timeout_ms, idle_connection_timeout_s, a
/// refused connection's last reply) read the time: the system's continuous clock, swept by the
/// server's own timer; or a test's, swept only when the test says (`VarlinkServer.sweepNow`),
/// so that a timeout test waits on nothing.
public struct VarlinkClock: Sendable {
    public let now: @Sendable () -> ContinuousClock.Instant
    /// The server runs its sweep timer; without it, only `sweepNow` checks the deadlines.
    let sweepsItself: Bool

    public static let system = VarlinkClock(now: { .now }, sweepsItself: true)

    /// A clock the test moves (`now` reads it), swept only by `VarlinkServer.sweepNow`.
    public static func manual(_ now: @escaping @Sendable () -> ContinuousClock.Instant) -> VarlinkClock {
        VarlinkClock(now: now, sweepsItself: false)
    }
}
