/// What a server has done since start, for the daemon's status.
public struct VarlinkCounts: Sendable, Equatable {
    /// Connections open now.
    public var open = 0
    /// Connections accepted, refused ones included.
    public var accepted = 0
    /// Connections answered TooManyConnections and closed at once (max_connections,
    /// root_reserved_connections, max_connections_per_uid).
    public var refused = 0
    /// Connections closed after idle_connection_timeout_s without a call.
    public var closedIdle = 0
    /// Connections dropped as slow readers (ReaderTooSlow: max_unsent_bytes or max_unsent_bytes_per_uid).
    public var droppedSlowReaders = 0
    /// Connections cut off with part of a message (IncompleteMessage: partial_message_timeout_ms).
    public var incompleteMessages = 0
    /// Connections refused for calls received and not handled (TooManyPendingBytes:
    /// max_pending_bytes_per_uid).
    public var droppedPendingBytes = 0

    public init() {}
}
