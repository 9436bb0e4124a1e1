import Dispatch

/// Limits that keep one client from hurting the others.
public struct VarlinkLimits: Sendable, Equatable {
    /// The largest message accepted; a larger one closes the connection.
    public var maxMessageSize: Int
    /// Calls a client may queue behind the one in progress before it is disconnected.
    public var maxQueuedCalls: Int
    /// Open connections in all; the next one is answered TooManyConnections and closed.
    public var maxConnections: Int
    /// Open connections of one uid; root, the operator, is held only to `maxConnections`.
    public var maxConnectionsPerUID: Int
    /// How long a connection may sit on part of a message before it is closed.
    public var partialMessageTimeout: Duration
    /// Replies and events written but not yet read by the client; past this a reader that
    /// does not keep up (a slow subscriber) is sent a final error and disconnected.
    public var maxUnsentBytes: Int

    public init(maxMessageSize: Int = 1 << 20, maxQueuedCalls: Int = 1024, maxConnections: Int = 4096, maxConnectionsPerUID: Int = 512,
                partialMessageTimeout: Duration = .seconds(10), maxUnsentBytes: Int = 8 << 20) {
        self.maxMessageSize = maxMessageSize
        self.maxQueuedCalls = maxQueuedCalls
        self.maxConnections = maxConnections
        self.maxConnectionsPerUID = maxConnectionsPerUID
        self.partialMessageTimeout = partialMessageTimeout
        self.maxUnsentBytes = maxUnsentBytes
    }
}

extension Duration {
    var dispatchInterval: DispatchTimeInterval { .nanoseconds(Int(self / .nanoseconds(1))) }
}
