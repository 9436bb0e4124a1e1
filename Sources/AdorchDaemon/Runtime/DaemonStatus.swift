import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import AdorchVarlink

/// A snapshot for io.adorch.Manager.GetStatus.
struct DaemonStatus: Sendable {
    struct Plugin: Sendable {
        var info: PluginInfo?
        var refusal: PluginRefusal?
        var statsJSON: String?
        /// Where it runs, and for an isolated one its host and crashes.
        var host: Host?
    }

    struct Host: Sendable {
        var isolation: PluginIsolation
        /// The host process now, if it is up.
        var pid: Int32?
        var state: PluginSupervisor.State
        var crashes: Int
        var lastExit: String?
        /// What its host said of its box and each confinement layer when it last started.
        var confinement: String?
    }

    var version: String
    var pid: Int32
    var uptime: Double
    var socket: String
    var configSource: String
    var connections: VarlinkCounts
    var limits: VarlinkLimits
    var showRate: CallRate
    var loadRate: CallRate
    var listRate: CallRate
    var reportRate: CallRate
    var budgets: UIDBudgets
    /// [limits] max_privacy_records_per_uid.
    var maxPrivacyRecords: Int
    /// Calls refused for each per-uid budget since start.
    var refused: [Budget: Int]
    var plugins: [Plugin]
    var slots: [SlotStatus]
    var networks: [NetworkStatus]
    var unattributedCallbacks: Int
    var subscribers: Int
    /// Interactive slots: live sessions and counters.
    var sessions: [String: (live: Int, counters: SessionCounters)]
    /// Loads ended per network, and Shows per slot: for the metrics.
    var networkLoads: [String: NetworkLoads]
    var showStats: [String: ShowStats]
    /// The [metrics] listener asked for, and why it is not listening if it is not.
    var metrics: MetricsEndpoint.State?
    /// The notice outbox, once open (docs/bidding.md, "Notices").
    var notices: Notices?

    struct Notices {
        var due: Int
        var held: Int
        var unwritten: Int
        var overBound: Int
        var sent: NoticeSender.Counters
    }
}

/// Plugin stats arriving from several plugin queues.
final class StatsCollector: Sendable {
    private let values = LockedValue<[String: String]>([:])

    func set(_ name: String, _ json: String?) { values.withLock { $0[name] = json } }

    func get(_ name: String) -> String? { values.withLock { $0[name] } }
}
