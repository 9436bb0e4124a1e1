// The engine's own records: slots, waterfall entries, ads, Load requests.


struct SlotState: Sendable {
    var config: SlotConfig
    var entries: [EntryState]
    var counters = SlotCounters()
    var dry = false
    var demand = DemandEstimate()
    /// The users who asked this slot for an ad lately, with when they last did: the users
    /// the scheduler expects (docs/caps.md, "The scheduler"). At most `Engine.expectedUsersAtMost`.
    var askers: [CapUser: Int64] = [:]
    /// How often a user it did not expect asks: while they are likely to, the slot is held
    /// for them even when every user it expects is capped.
    var newcomers = DemandEstimate()
    /// Which uids asked lately and what each took: what a uid must leave for the others
    /// (docs/rules.md, "Fair share").
    var fairShare = FairShare()
    /// Per privacy class, the Shows that counted as demand for it (docs/privacy.md, "Inventory"):
    /// what the class keeps of the slot's ads. A restart forgets them: the slot is cold again.
    var classDemand: [PrivacyClass: DemandEstimate] = [:]
    /// Per privacy class, the Shows whose viewer allowed it from some entry: how many may take
    /// its ads, for a slot too rarely asked to hold an ad of every class.
    var classReach: [PrivacyClass: DemandEstimate] = [:]
    /// Per privacy class, the last Show whose viewer allowed some class but not this one:
    /// the slot's ads may be pooled in a class only while every Show could take it.
    var classRefused: [PrivacyClass: Moment] = [:]
    /// A hybrid slot's auction under way, per privacy class (docs/bidding.md, "The auction").
    var auctions: [PrivacyClass: AuctionRound] = [:]
}

struct EntryState: Sendable {
    var failuresInRow = 0
    var backoffUntil = Moment.zero
    var loads = 0
    var fills = 0
    var lastError: AdErrorCode?
    var estimate: EntryEstimate
    /// Per class, the last viewer who allowed it from this entry: the signals its loads carry.
    var viewers: [PrivacyClass: ClassViewer] = [:]
    /// The prices its ads reported, averaged: its eCPM when the config gives none.
    var paid = PaidAverage()

    init(_ entry: WaterfallEntry, of config: SlotConfig) {
        estimate = EntryEstimate(timeout: entry.timeout, ttl: config.ttl)
    }

    static func fresh(for config: SlotConfig) -> [EntryState] { config.waterfall.map { EntryState($0, of: config) } }

    mutating func succeeded() {
        failuresInRow = 0
        backoffUntil = .zero
        fills += 1
    }
}

struct AdRecord: Sendable {
    enum State: Sendable {
        case loading(deadline: Moment)
        case ready(expiresAt: Moment)
        case shown(endsAt: Moment)
    }

    var id: AdID
    var slot: String
    var format: AdFormat
    var plugin: String
    var entryIndex: Int
    var ttl: Duration
    var state: State
    /// The class it was loaded under and the signals its plugin was given: it goes only to
    /// viewers who allow that class from its network.
    var privacy: LoadPrivacy
    var payloadJSON = ""
    var price = 0.0
    var refreshAt = Moment.zero
    var loadedAt: Moment?
    var tracksItself = false
    /// Its plugin said its media is cached: said once, it says nothing more. An outside
    /// attack repeated it 20,000 times a second on its ready ads, each an event for every
    /// subscriber.
    var mediaCached = false
    /// The network decides the reward itself (its reward event), not the app's complete.
    var rewardByNetwork = false
    var rewarded = false
    /// Its reward is promised across a restart: the shell keeps it on disk (Engine+PromisedRewards).
    var promised = false
    /// When the app closed it, for an ad kept open for its network's reward
    /// (`SchedulerSettings.networkRewardGrace`): the app may report nothing more on it.
    var closedAt: Moment?
    var rewardOverride: RewardModel?
    var userID: String?
    var startedAt = Moment.zero
    /// The Load request this load serves, if any.
    var requestID: RequestID?
    /// For one of a Load's ads: the plugin object it came from.
    var objectID: AdID?
    /// The uid a Show or Load handed this ad to: only it may report on it, and it counts
    /// against that uid's open ads until it ends.
    var holder: UInt32?
    /// What the app reported: a second report of a `once` event is refused.
    var reported: Set<ViewerEvent> = []
    /// The impression and click counted in the slot's counters, from the app or the plugin.
    var counted: Set<ViewerEvent> = []
    /// Whether this ad's impression was counted against the frequency rules: once, ever.
    var capCounted = false
    /// When a Show took it: the moment the frequency rules count it at, whenever it is seen.
    var takenAt: Moment?
    /// Where its notices stand in the outbox; nil for an ad without any.
    var notices: NoticePhase?

    var expiresAt: Moment? {
        if case .ready(let expiresAt) = state { expiresAt } else { nil }
    }

    /// docs/rules.md, "adValid": loaded with data, not yet shown, not expired.
    func isValid(at now: Moment) -> Bool {
        if case .ready(let expiresAt) = state { expiresAt > now } else { false }
    }
}

struct LoadRequest: Sendable {
    var slot: String
    var count: Int
    var width: Int
    var height: Int
    var deadline: Moment
    var targetingJSON: String?
    /// Who asked: its ads go to this uid, and count against its open ads while they load.
    var holder: UInt32?
    /// The viewer's signals (nil: they set none): which class each entry is asked for.
    var privacy: ViewerPrivacy?
    var nextEntry = 0
    var attempts: [LoadFailure.Attempt] = []
}

/// A loaded object whose ads an app holds; destroyed when the last of them ends.
struct HandedOutObject: Sendable {
    var slot: String
    var plugin: String
    /// The uid its Load was for: the object's events are that uid's.
    var holder: UInt32?
    var children: Set<AdID>
}
