/// Sends the replies to one call, from any thread.
public final class VarlinkReplier: Sendable {
    let connection: VarlinkConnection?
    let serial: UInt64
    /// The caller asked for several replies.
    public let wantsMore: Bool

    init(connection: VarlinkConnection?, serial: UInt64, wantsMore: Bool) {
        self.connection = connection
        self.serial = serial
        self.wantsMore = wantsMore
    }

    /// A reply; with `continues`, more will follow (only if the caller asked for more).
    public func reply(_ parameters: [String: JSONValue], continues: Bool = false) {
        connection?.send(VarlinkWire.reply(parameters, continues: continues && wantsMore), final: !(continues && wantsMore), serial: serial)
    }

    /// The final reply, made by `build` on the server's queue: the caller hands over values,
    /// and their JSON is built and encoded where it is written, not on the caller's queue.
    /// `verbatim` as VarlinkWire.reply's.
    public func reply(verbatim: Set<String> = [], building build: @escaping @Sendable () -> [String: JSONValue]) {
        connection?.sendBuilt(serial: serial) { VarlinkWire.reply(build(), continues: false, verbatim: verbatim) }
    }

    /// The final, error reply.
    public func fail(_ error: VarlinkError) {
        connection?.send(VarlinkWire.error(error), final: true, serial: serial)
    }

    /// The final reply, already encoded, from the server's queue: it goes out without a hop
    /// to the queue, with the other replies of the same read.
    func replyOnQueue(_ message: [UInt8]) {
        connection?.deliver(message, final: true, serial: serial)
    }

    /// Runs `body` once when the connection closes (at once if it already has).
    public func onClose(_ body: @escaping @Sendable () -> Void) {
        if let connection { connection.onClose(body) } else { body() }
    }
}
