import AdorchEngine
import AdorchRewards
import Dispatch
import Foundation
import Logging

/// What the engine queue owns: created before the queue runs, then reached only through
/// `EngineRuntime`'s accessors (its `QueueBound`). Not Sendable: no closure may carry it to
/// another queue.
/// A reward's ledger row waiting to be written, and for whom its event is.
struct UnrecordedReward {
    let row: RewardRecord
    let adID: AdID
    let holder: UInt32?
}

final class RuntimeState {
    var config: DaemonConfig
    var engine: Engine
    var sessions = InteractiveSessions()
    var rewards: RewardDesk?
    var capHistory: CapHistoryFile?
    var privacy: PrivacyBook?
    /// The notice outbox and its sender, once a plugin gave notices or a past run left some.
    var notices: NoticeSender?
    /// Notice steps the outbox could not take yet (a full disk), oldest first: written again
    /// every second, in order.
    var unwrittenNotices: [(id: AdID, plugin: String, step: NoticeStep)] = []
    /// Ads whose notices were refused, their plugin's past NoticeOutbox.maxBytesPerPlugin; when
    /// that was last said in the journal (once a minute at most).
    var noticesOverBound = 0
    var overBoundLoggedAt: Date?
    /// The state directory's lock, held for the daemon's life: two daemons on one ledger and
    /// one history would each undo the other's (closed on exec, so no plugin host holds it).
    var stateLock: Int32 = -1
    var pendingShows: [RequestID: @Sendable (Result<ShownAd, ShowError>) -> Void] = [:]
    var pendingLoads: [RequestID: @Sendable (Result<[ShownAd], LoadFailure>) -> Void] = [:]
    var showStats: [String: ShowStats] = [:]
    var metricsEndpoint: MetricsEndpoint?
    var nextRequest: RequestID = 1
    var estimatesFile: EstimatesFile
    var timer: DispatchSourceTimer?
    var armedFor: Moment?
    var tickers: [DispatchSourceTimer] = []
    var lastStatus = ""
    /// Rewards granted whose ledger row could not be written yet (a full disk), oldest first:
    /// written again until they are, and only then announced.
    var unrecordedRewards: [UnrecordedReward] = []
    var rewardRetryArmed = false
    /// The socket apps call, hidden from the plugins' hosts with its folder (set by start).
    var socketPath = ""
    let feed: EventFeed
    let plugins: PluginRegistry

    init(config: DaemonConfig, options: DaemonOptions, stateDir: String, ids: ExternalIDs, logger: Logger) {
        self.config = config
        engine = Engine(slots: [], plugins: [], settings: config.scheduler)
        sessions.budgets = config.scheduler.budgets
        sessions.privacy = config.scheduler.privacy
        estimatesFile = EstimatesFile(stateDir: stateDir)
        feed = EventFeed(logger: logger, ids: ids)
        plugins = PluginRegistry(logger: logger, options: options)
    }
}
