import Foundation

/// Splits a Varlink byte stream into messages: each one is a JSON object followed by NUL.
///
/// Messages stay where they arrived, in storage reused from read to read, until they are
/// taken: a connection decodes each one in place, with no copy per message or per read.
public struct VarlinkFramer: Sendable {
    public enum Failure: Error, Equatable, Sendable {
        /// More than `maxMessageSize` bytes arrived without a NUL.
        case messageTooLarge(limit: Int)
    }

    public let maxMessageSize: Int
    private var storage: [UInt8] = []
    /// Where the first message not yet taken starts.
    private var taken = 0
    /// Where the bytes after the last whole message start.
    private var partial = 0
    /// How far the bytes after `partial` were searched for a NUL: a message that arrives a
    /// byte at a time is searched once in all, not once per byte.
    private var scanned = 0
    /// Whole messages not yet taken.
    private(set) var messageCount = 0
    /// Storage larger than this is released once every message is taken, so one large
    /// message does not stay resident on an idle connection.
    private static let keptCapacity = 1 << 16

    public init(maxMessageSize: Int) { self.maxMessageSize = maxMessageSize }

    /// Bytes received but not yet part of a whole message.
    public var pendingBytes: Int { storage.count - partial }
    /// Bytes of the whole messages not yet taken.
    var queuedBytes: Int { partial - taken }
    /// Bytes received and not yet taken: the whole messages waiting and the partial one.
    var heldBytes: Int { storage.count - taken }
    /// Bytes held, taken or not.
    var storedBytes: Int { storage.count }
    /// What the framer costs in memory.
    var reservedBytes: Int { storage.capacity }

    /// Adds received bytes and returns the whole messages they complete, without their NUL.
    public mutating func append(_ bytes: some DataProtocol) throws(Failure) -> [Data] {
        makeRoom()
        for region in bytes.regions { region.withUnsafeBytes { storage.append(contentsOf: $0) } }
        try frame()
        var messages: [Data] = []
        while let message = takeMessage({ Data($0) }) { messages.append(message) }
        return messages
    }

    /// Adds received bytes; the messages they complete wait for `takeMessage`.
    mutating func append(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
        makeRoom()
        storage.append(contentsOf: bytes)
        try frame()
    }

    /// Moves what is left to the front once what was taken is the larger half, so that a
    /// stream that always ends a read inside a message does not grow the storage for ever.
    private mutating func makeRoom() {
        if taken == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= Self.keptCapacity)
        } else if taken > 0, taken >= storage.count / 2 {
            storage.removeSubrange(0..<taken)
        } else {
            return
        }
        partial -= taken
        scanned -= taken
        taken = 0
    }

    /// Finds the messages the new bytes complete, searching only the new bytes.
    private mutating func frame() throws(Failure) {
        var start = partial
        var found = 0
        defer {
            partial = start
            scanned = storage.count
            messageCount += found
        }
        var from = max(start, scanned)
        while let nul = Self.nul(in: storage, from: from) {
            if nul - start > maxMessageSize { throw .messageTooLarge(limit: maxMessageSize) }
            found += 1
            start = nul + 1
            from = start
        }
        if storage.count - start > maxMessageSize { throw .messageTooLarge(limit: maxMessageSize) }
    }

    private static func nul(in storage: [UInt8], from start: Int) -> Int? {
        storage.withUnsafeBytes { raw in
            guard start < raw.count, let found = memchr(raw.baseAddress! + start, 0, raw.count - start) else { return nil }
            return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }

    /// Calls `body` with the next whole message, in place and without its NUL, and drops it;
    /// nil if there is none.
    mutating func takeMessage<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard messageCount > 0, let nul = Self.nul(in: storage, from: taken) else { return nil }
        let start = taken
        taken = nul + 1
        messageCount -= 1
        let result = storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<nul])) }
        // Drained: a large message's storage goes now, not at the next read, which an idle
        // connection may never make.
        if taken == storage.count { makeRoom() }
        return result
    }

    /// Gives the storage back to the allocator: the connection reads no further.
    mutating func release() {
        storage = []
        taken = 0
        partial = 0
        scanned = 0
        messageCount = 0
    }
}
