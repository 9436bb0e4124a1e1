import Synchronization

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

/// The counts as the server's queue keeps them: written there, read from any thread without
/// waiting for that queue (the engine answers GetStatus and metrics scrapes with them, and
/// must never wait on the Varlink queue). Each count is exact; a snapshot taken while a
/// connection opens may show it in `accepted` and not yet in `open`.
final class VarlinkTally: Sendable {
    enum Count { case open, accepted, refused, closedIdle, droppedSlowReaders, incompleteMessages, droppedPendingBytes }

    private let open = Atomic<Int>(0)
    private let accepted = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)
    private let closedIdle = Atomic<Int>(0)
    private let droppedSlowReaders = Atomic<Int>(0)
    private let incompleteMessages = Atomic<Int>(0)
    private let droppedPendingBytes = Atomic<Int>(0)

    func add(_ count: Count, _ delta: Int = 1) {
        switch count {
        case .open: open.wrappingAdd(delta, ordering: .relaxed)
        case .accepted: accepted.wrappingAdd(delta, ordering: .relaxed)
        case .refused: refused.wrappingAdd(delta, ordering: .relaxed)
        case .closedIdle: closedIdle.wrappingAdd(delta, ordering: .relaxed)
        case .droppedSlowReaders: droppedSlowReaders.wrappingAdd(delta, ordering: .relaxed)
        case .incompleteMessages: incompleteMessages.wrappingAdd(delta, ordering: .relaxed)
        case .droppedPendingBytes: droppedPendingBytes.wrappingAdd(delta, ordering: .relaxed)
        }
    }

    var snapshot: VarlinkCounts {
        var counts = VarlinkCounts()
        counts.open = open.load(ordering: .relaxed)
        counts.accepted = accepted.load(ordering: .relaxed)
        counts.refused = refused.load(ordering: .relaxed)
        counts.closedIdle = closedIdle.load(ordering: .relaxed)
        counts.droppedSlowReaders = droppedSlowReaders.load(ordering: .relaxed)
        counts.incompleteMessages = incompleteMessages.load(ordering: .relaxed)
        counts.droppedPendingBytes = droppedPendingBytes.load(ordering: .relaxed)
        return counts
    }
}
