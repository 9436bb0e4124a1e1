import AdorchLocking
import AdorchPaths
import AdorchSystemd
import AdorchVarlink
import Foundation
import Logging

/// What the command line says; each field overrides the config's.
public struct DaemonOptions: Sendable {
    public var configPath: String?
    public var socketPath: String?
    public var stateDir: String?
    public var pluginDir: String?
    /// Serve io.adorch.Debug (tests only: it can freeze the engine queue).
    public var debugInterface: Bool
    /// Load plugins without PluginFileTrust's ownership and permission checks (development).
    public var insecurePlugins: Bool

    public init(configPath: String? = nil, socketPath: String? = nil, stateDir: String? = nil, pluginDir: String? = nil,
                debugInterface: Bool = false, insecurePlugins: Bool = false) {
        self.configPath = configPath
        self.socketPath = socketPath
        self.stateDir = stateDir
        self.pluginDir = pluginDir
        self.debugInterface = debugInterface
        self.insecurePlugins = insecurePlugins
    }
}

/// The daemon, put together: the engine runtime (engine queue), the Varlink server (its own
/// queue and epoll thread), and between them the call gate and the method table. Start and
/// stop order them; each part's queue rules live with the part.
public final class Daemon: Sendable {
    private let runtime: EngineRuntime
    private let serving = LockedServer()
    private let options: DaemonOptions
    private let logger: Logger
    /// The connection [limits] the server is made with: the starting config's (a reload says they wait for the next start).
    private let limits: VarlinkLimits

    public init(config: DaemonConfig, options: DaemonOptions, logger: Logger) {
        self.options = options
        self.logger = logger
        let stateDir = options.stateDir ?? config.stateDir ?? DefaultPaths.stateDir
        runtime = EngineRuntime(config: config, options: options, stateDir: stateDir, gate: CallGate(config, logger: logger), logger: logger)
        limits = config.limits
        serving.socketPath = options.socketPath ?? config.socketPath ?? DefaultPaths.socket
    }

    /// The socket served (or to be served), for messages.
    public var socketPath: String { serving.socketPath }
    public var stateDir: String { runtime.stateDir }

    /// Loads the plugins, fills the slots and starts serving on the socket systemd passed
    /// (socket activation) or on one of its own; then tells systemd it is ready. Throws only
    /// if the socket cannot be served: a refused plugin is logged and the daemon runs on.
    public func start() throws {
        // The socket's folder is made and checked before anything starts, and hidden from the
        // plugins' hosts: a folder another user could write is refused (UnixSocket.checkFolder).
        let activated = SocketActivation.listeningSockets().first
        if let fd = activated {
            serving.socketPath = VarlinkServer.boundPath(of: fd) ?? "fd \(fd)"
        } else {
            try VarlinkServer.prepareFolder(forSocket: serving.socketPath)
        }
        try runtime.start(socketPath: serving.socketPath)
        let interfaces = MethodTable.interfaces.filter { options.debugInterface || $0.name != DebugMethod.interface }
        let methods = MethodTable(runtime: runtime, serving: serving)
        let server = try VarlinkServer(
            info: VarlinkServiceInfo(vendor: "adorch", product: "adorchd", version: AdorchVersion.current, url: "https://adorch.invalid/"),
            interfaces: interfaces, limits: limits, logger: logger,
            handler: { call, replier in methods.handle(call, replier) }
        )
        // Bound before the socket is served, so a scraper finds it once apps can; a listener
        // that cannot listen is logged and shown, and the daemon serves ads without it.
        let runtime = runtime, serving = serving
        runtime.attach(MetricsEndpoint(logger: logger) { format, completion in
            runtime.metrics(format, server: serving.server, socket: serving.socketPath, completion: completion)
        })
        // Everything a call may read is set before accepting: with socket activation a client
        // is already waiting and is served at once.
        serving.server = server
        if let fd = activated {
            server.listen(fileDescriptor: fd)
        } else {
            try server.listen(path: serving.socketPath)
        }
        runtime.serving(server, at: serving.socketPath)
    }

    /// The graceful stop: STOPPING=1, no new connections, calls already taken answered,
    /// subscriptions ended with a final reply, every ad destroyed through its plugin, the
    /// plugins' deinit, then the connections closed.
    public func stop() {
        ServiceNotifier.stopping()
        logger.notice("adorchd stopping", metadata: MessageID.daemonStopping.metadata)
        serving.server?.stopAccepting()
        runtime.detachMetrics()
        runtime.stop()
        serving.server?.stop()
        if !ServiceNotifier.flush(timeout: .seconds(2)) {
            logger.warning("the service manager did not read STOPPING=1 within 2 s")
        }
        logger.notice("adorchd stopped")
    }

    /// Reads the config again (SIGHUP, Manager.Reload); see `EngineRuntime.reload`.
    public func reload() { runtime.reload { _ in } }
}

/// The server and the socket path, set once at start and read by status calls on any thread.
final class LockedServer: Sendable {
    private let state = LockedValue<(server: VarlinkServer?, socketPath: String)>((nil, ""))

    var server: VarlinkServer? {
        get { state.withLock { $0.server } }
        set { state.withLock { $0.server = newValue } }
    }

    var socketPath: String {
        get { state.withLock { $0.socketPath } }
        set { state.withLock { $0.socketPath = newValue } }
    }
}
