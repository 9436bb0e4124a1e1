/// io.adorch: the errors the server itself sends on a connection it then closes, whatever
/// interface was called (docs/rules.md, "Connections"). Served beside org.varlink.service, so a
/// client reads them with GetInterfaceDescription like every other error.
public enum ConnectionError: String, VarlinkErrorName {
    case tooManyConnections = "TooManyConnections"
    case incompleteMessage = "IncompleteMessage"
    case tooManyPendingBytes = "TooManyPendingBytes"
    case readerTooSlow = "ReaderTooSlow"

    public static let interface = "io.adorch"

    public var declaration: VarlinkDeclaration {
        switch self {
        case .tooManyConnections: VarlinkDeclaration("""
            # Sent before any call, then the connection closes: it would go over [limits]
            # max_connections (the last root_reserved_connections are root's) or max_connections_per_uid.
            """, "(message: string)")
        case .incompleteMessage: VarlinkDeclaration("""
            # A message began and did not end (NUL) within [limits] partial_message_timeout_ms; the
            # connection closes.
            """, "(message: string)")
        case .tooManyPendingBytes: VarlinkDeclaration("""
            # The caller's uid has more than [limits] max_pending_bytes_per_uid of calls received and not
            # yet handled over its connections; this one closes.
            """, "(message: string)")
        case .readerTooSlow: VarlinkDeclaration("""
            # Replies were left unread past [limits] max_unsent_bytes (this connection) or
            # max_unsent_bytes_per_uid (all of the uid's); the unsent replies are dropped and it closes.
            """, "(message: string)")
        }
    }
}

extension VarlinkInterface {
    /// io.adorch's IDL: the connection errors only.
    public static let connection = VarlinkInterface("# What the server says on a connection it closes.", errors: ConnectionError.self,
                                                    members: ConnectionError.allCases.map { .error($0) })
}
