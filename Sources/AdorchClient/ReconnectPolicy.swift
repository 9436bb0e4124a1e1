/// How long and how often the client tries to reach the daemon again once its connection
/// broke (a restart): a delay that doubles from `firstDelay` up to `maxDelay`, for at most
/// `maxWait` in all, one log line per retry.
public struct ReconnectPolicy: Sendable, Equatable {
    public var maxWait: Duration
    public var firstDelay: Duration
    public var maxDelay: Duration

    public init(maxWait: Duration = .seconds(30), firstDelay: Duration = .milliseconds(50), maxDelay: Duration = .seconds(2)) {
        self.maxWait = maxWait
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
    }

    /// No retries: a broken connection fails the call at once.
    public static let never = ReconnectPolicy(maxWait: .zero)
}
