import Foundation

/// Splits a Varlink byte stream into messages: each one is a JSON object followed by NUL.
public struct VarlinkFramer: Sendable {
    public enum Failure: Error, Equatable, Sendable {
        /// More than `maxMessageSize` bytes arrived without a NUL.
        case messageTooLarge(limit: Int)
    }

    public let maxMessageSize: Int
    private var buffer = Data()

    public init(maxMessageSize: Int) { self.maxMessageSize = maxMessageSize }

    /// Bytes received but not yet part of a whole message.
    public var pendingBytes: Int { buffer.count }

    /// Adds received bytes and returns the whole messages they complete, without their NUL.
    public mutating func append(_ bytes: some DataProtocol) throws(Failure) -> [Data] {
        buffer.append(contentsOf: bytes)
        var messages: [Data] = []
        var start = buffer.startIndex
        while let nul = buffer[start...].firstIndex(of: 0) {
            if nul - start > maxMessageSize { throw .messageTooLarge(limit: maxMessageSize) }
            messages.append(Data(buffer[start..<nul]))
            start = nul + 1
        }
        buffer = Data(buffer[start...])
        if buffer.count > maxMessageSize { throw .messageTooLarge(limit: maxMessageSize) }
        return messages
    }
}
