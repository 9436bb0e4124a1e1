import Dispatch

/// Limits that keep one client from hurting the others. The defaults here are the defaults
/// of their `[limits]` keys.
public struct VarlinkLimits: Sendable, Equatable {
    /// The largest message accepted; a larger one closes the connection.
    public var maxMessageSize: Int
    /// Calls a connection may have read ahead, waiting behind the one in progress: with this
    /// many waiting, or `maxMessageSize` bytes of them, its socket is not read until they drop
    /// below it (nothing is dropped).
    public var maxQueuedCalls: Int
    /// Open connections in all; the next one is answered TooManyConnections and closed.
    public var maxConnections: Int
    /// Of `maxConnections`, how many only root (uid 0, the operator) may use: however many
    /// connections the apps open, the operator can still get in.
    public var rootReservedConnections: Int
    /// Open connections of one uid; root, the operator, is held only to `maxConnections`.
    public var maxConnectionsPerUID: Int
    /// How long a connection may sit on part of a message before it is closed, counted from
    /// the message's first byte.
    public var partialMessageTimeout: Duration
    /// How long a connection may stay with no call in progress and no part of a message
    /// before it is closed.
    public var idleConnectionTimeout: Duration
    /// Replies and events written but not yet read by the client; past this a reader that
    /// does not keep up (a slow subscriber) is sent a final error and disconnected.
    public var maxUnsentBytes: Int
    /// The same, summed over one uid's connections (root is held only to `maxUnsentBytes`):
    /// the connection whose replies push its uid past it is disconnected the same way.
    public var maxUnsentBytesPerUID: Int
    /// Bytes received from one uid's connections and not yet handled (calls waiting behind
    /// the one in progress, and parts of messages); root is exempt. The connection whose read
    /// pushes its uid past it is answered TooManyPendingBytes and closed.
    public var maxPendingBytesPerUID: Int

    public init(maxMessageSize: Int = 1 << 20, maxQueuedCalls: Int = 1024, maxConnections: Int = 4096, rootReservedConnections: Int = 32,
                maxConnectionsPerUID: Int = 512, partialMessageTimeout: Duration = .seconds(10), idleConnectionTimeout: Duration = .seconds(120),
                maxUnsentBytes: Int = 8 << 20, maxUnsentBytesPerUID: Int = 32 << 20, maxPendingBytesPerUID: Int = 32 << 20) {
        self.maxMessageSize = maxMessageSize
        self.maxQueuedCalls = maxQueuedCalls
        self.maxConnections = maxConnections
        self.rootReservedConnections = rootReservedConnections
        self.maxConnectionsPerUID = maxConnectionsPerUID
        self.partialMessageTimeout = partialMessageTimeout
        self.idleConnectionTimeout = idleConnectionTimeout
        self.maxUnsentBytes = maxUnsentBytes
        self.maxUnsentBytesPerUID = maxUnsentBytesPerUID
        self.maxPendingBytesPerUID = maxPendingBytesPerUID
    }
}

extension Duration {
    var dispatchInterval: DispatchTimeInterval { .nanoseconds(Int(self / .nanoseconds(1))) }
}
