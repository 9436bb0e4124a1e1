import Foundation

/// Bytes waiting for a socket, written front to back.
///
/// It keeps an offset instead of removing what was written: `Data.removeFirst` keeps the
/// storage in front of the data, so a long-lived connection (a subscriber) grew by every
/// byte it was ever sent. Storage here is reused once everything is written, and compacted
/// when the written part is the larger half.
struct SendBuffer {
    private var bytes: [UInt8] = []
    private var sent = 0
    /// Storage larger than this is released once it drains, so one burst does not stay resident.
    private static let keptCapacity = 1 << 16

    var isEmpty: Bool { sent == bytes.count }
    /// Bytes not written yet.
    var unsent: Int { bytes.count - sent }
    /// Bytes held, written or not.
    var storedBytes: Int { bytes.count }
    /// What the buffer costs in memory.
    var reservedBytes: Int { bytes.capacity }

    /// Drops every unwritten message but the one partly written (a message cut in half would
    /// corrupt the stream); what is appended next follows it. The storage the dropped ones
    /// took goes back to the allocator.
    mutating func dropUnsentMessages() {
        var keep = sent
        if sent > 0, bytes[sent - 1] != 0, let end = bytes[sent...].firstIndex(of: 0) { keep = end + 1 }
        bytes = Array(bytes[sent..<keep])
        sent = 0
    }

    /// Gives the storage back to the allocator: the connection is closed.
    mutating func release() {
        bytes = []
        sent = 0
    }

    mutating func append(_ data: some Collection<UInt8>) {
        if sent > 0, sent >= bytes.count / 2 {
            bytes.removeSubrange(0..<sent)
            sent = 0
        }
        bytes.append(contentsOf: data)
    }

    /// Calls `write` with the unwritten bytes; it returns how many it wrote, or a negative
    /// number for an error, which is handed back unchanged.
    mutating func write(_ write: (UnsafeRawBufferPointer) -> Int) -> Int {
        let n = bytes.withUnsafeBytes { write(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
        guard n > 0 else { return n }
        sent += n
        if sent == bytes.count {
            bytes.removeAll(keepingCapacity: bytes.capacity <= Self.keptCapacity)
            sent = 0
        }
        return n
    }
}
