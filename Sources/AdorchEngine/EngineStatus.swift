// What the engine reports about itself: to apps (ShownAd) and to operators.


/// An ad handed to an app.
public struct ShownAd: Sendable, Equatable {
    public var id: AdID
    public var slot: String
    public var network: String
    public var format: AdFormat
    public var payloadJSON: String
    public var expiresAt: Moment
    public var price: Double
}

/// One slot's state as reported to operators and apps.
public struct SlotStatus: Sendable, Equatable {
    public var config: SlotConfig
    /// Valid ads: loaded, unshown, unexpired.
    public var ready: Int
    /// Their ids, oldest first.
    public var readyAds: [AdID]
    /// How many of them each privacy class holds (docs/privacy.md, "Inventory").
    public var readyByClass: [PrivacyClass: Int]
    public var loading: Int
    /// Shown ads still open for viewer reports.
    public var shownOpen: Int
    public var counters: SlotCounters
    /// Per waterfall entry, in order.
    public var entries: [EntryStatus]
    /// How many valid ads the scheduler keeps ready now, and why.
    public var target: BufferTarget
    /// Set when the slot cannot fill: the plugins its waterfall names, none of them available.
    public var missingPlugins: [String]?
    /// Set when a frequency rule holds a Show for the user the statuses were asked for.
    public var capHold: CapHold?
}

/// One waterfall entry as operators see it: what it was asked, what it gave, how long it rests.
public struct EntryStatus: Sendable, Equatable {
    public var loads: Int
    public var fills: Int
    public var failuresInRow: Int
    public var lastError: AdErrorCode?
    public var backoff: Duration
    /// What its loads have shown: time per load, fill rate, ad lifetime.
    public var estimate: EntryEstimate
    /// The average of the prices its ads reported, its eCPM when the config gives none.
    public var learnedECPM: Double?
}

/// A network (plugin) as the scheduler sees it.
public struct NetworkStatus: Sendable, Equatable {
    public var name: String
    public var loadsInFlight: Int
    /// How long it is still paused after a rate_limited answer.
    public var paused: Duration
    /// Loads per `NetworkPace.window` it is kept under, learned from its rate_limited answers.
    public var learnedLimit: Int?
}

/// What happened in a slot since the daemon started.
public struct SlotCounters: Sendable, Equatable {
    public var loads = 0
    public var fills = 0
    public var noFills = 0
    public var errors = 0
    public var timeouts = 0
    public var shows = 0
    public var expired = 0
    public var replaced = 0
    public var ranDry = 0
    public var ignoredCallbacks = 0
    public var contractViolations = 0
    public var impressions = 0
    public var clicks = 0
    /// Viewer reports that repeat one made for the ad: a second click (accepted, not
    /// billed) or a second once-only event (refused).
    public var duplicateReports = 0
    /// Shows whose plugin could not present the ad (another was handed out instead).
    public var displayFailures = 0
    public var rewards = 0
    /// Second grants for one ad, refused.
    public var duplicateRewards = 0
    /// Ads an auction gave to higher prices, and loads refused under the slot's floor.
    public var outbid = 0
    public var belowFloor = 0
    public init() {}
}
