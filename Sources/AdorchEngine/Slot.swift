import CAdorchPlugin

/// Ad formats. The raw values are the names apps, config and logs use; `abi` is the value
/// in adorch/plugin.h.
public enum AdFormat: String, Sendable, CaseIterable, Codable {
    case rewarded, fullscreen, interstitial, banner, splash, native
    /// An interactive session (docs/rules.md, "Interactive sessions"): io.adorch.Ads.InitInteractive.
    case interactive

    /// The format of a value of plugin.h: a switch over the header's enum, so a format added
    /// there does not build until it has its case here.
    public init(abi: adorch_format) {
        switch abi {
        case .ADORCH_FORMAT_REWARDED: self = .rewarded
        case .ADORCH_FORMAT_FULLSCREEN: self = .fullscreen
        case .ADORCH_FORMAT_INTERSTITIAL: self = .interstitial
        case .ADORCH_FORMAT_BANNER: self = .banner
        case .ADORCH_FORMAT_SPLASH: self = .splash
        case .ADORCH_FORMAT_NATIVE: self = .native
        case .ADORCH_FORMAT_INTERACTIVE: self = .interactive
        }
    }

    public var abi: adorch_format {
        switch self {
        case .rewarded: .ADORCH_FORMAT_REWARDED
        case .fullscreen: .ADORCH_FORMAT_FULLSCREEN
        case .interstitial: .ADORCH_FORMAT_INTERSTITIAL
        case .banner: .ADORCH_FORMAT_BANNER
        case .splash: .ADORCH_FORMAT_SPLASH
        case .native: .ADORCH_FORMAT_NATIVE
        case .interactive: .ADORCH_FORMAT_INTERACTIVE
        }
    }

    /// Full-screen formats are kept ready (docs/rules.md, "Preloading"); banner, splash and native are
    /// loaded when an app asks, with io.adorch.Ads.Load.
    public var isPreloaded: Bool { self == .rewarded || self == .fullscreen || self == .interstitial }

    /// Loaded on demand with io.adorch.Ads.Load.
    public var isOnDemand: Bool { self == .banner || self == .splash || self == .native }

    /// "a banner slot", "an interstitial slot": for errors that name a slot's format.
    public var slotInWords: String { "\("aeiou".contains(rawValue.first!) ? "an" : "a") \(rawValue) slot" }

    /// How apps use a slot of this format, for errors that send them to the right call.
    public var howToUse: String {
        if isPreloaded { return "its ads are preloaded, take one with Show" }
        if isOnDemand { return "its ads are loaded on demand with Load" }
        return "it runs interactive sessions, start one with InitInteractive"
    }

    /// How long a Load may take in all when the app does not say: a splash screen cannot
    /// wait (2 s; docs/rules.md, "Deadlines"); the others get 5 s.
    public var defaultLoadTimeout: Duration { self == .splash ? .seconds(2) : .seconds(5) }
}

extension adorch_format {
    /// The format with this number, or nil for one the header does not have (a newer minor's, or
    /// garbage). Every number from the other side goes through here: Swift's init(rawValue:)
    /// does not check a C enum's value (adorch_format(rawValue: 20) is not nil), and a switch
    /// over a value outside the enum traps. A value added to the header and not listed here
    /// is a compiler warning (the other switches over the enum make it an error).
    public init?(abiValue: UInt32) {
        guard let value = adorch_format(rawValue: abiValue) else { return nil }
        switch value {
        case .ADORCH_FORMAT_REWARDED, .ADORCH_FORMAT_FULLSCREEN, .ADORCH_FORMAT_INTERSTITIAL, .ADORCH_FORMAT_BANNER,
             .ADORCH_FORMAT_SPLASH, .ADORCH_FORMAT_NATIVE, .ADORCH_FORMAT_INTERACTIVE:
            self = value
        @unknown default:
            return nil
        }
    }
}

/// One network in a slot's waterfall: which plugin, and the opaque strings it needs.
public struct WaterfallEntry: Sendable, Equatable {
    public var plugin: String
    /// The network's ad unit id, opaque to the host (docs/rules.md, "Opaque network parameters").
    public var adUnitID: String
    /// Network-specific parameters, opaque to the host (docs/rules.md, "Opaque network parameters").
    public var serverParameter: String
    /// How long one load from this entry may take before the host gives up on it.
    public var timeout: Duration
    /// Frequency rules for this network instance in this slot (docs/caps.md): a Show skips
    /// its ads for a user they hold, and a `per = "slot"` rule keeps the waterfall from it.
    public var caps: [FrequencyRule]
    /// What the network declares it may do: its vendor id and the classes it serves
    /// (docs/privacy.md, "Classes").
    public var privacy: NetworkPrivacy
    /// A bidder (docs/bidding.md, "The auction"): asked with every other bidder at once, its
    /// price coming back with each ad; not walked as a waterfall entry.
    public var bidder: Bool
    /// What the entry's ads are worth per 1,000 impressions when the publisher knows it: the
    /// price the walk compares with the best bid, and its ads' price when the network reports
    /// none. Nil: learned from the prices its ads reported.
    public var ecpm: Double?

    public init(plugin: String, adUnitID: String = "", serverParameter: String = "", timeout: Duration = .seconds(5),
                caps: [FrequencyRule] = [], privacy: NetworkPrivacy = NetworkPrivacy(), bidder: Bool = false, ecpm: Double? = nil) {
        self.bidder = bidder
        self.ecpm = ecpm
        self.plugin = plugin
        self.adUnitID = adUnitID
        self.serverParameter = serverParameter
        self.timeout = timeout
        self.caps = caps
        self.privacy = privacy
    }

    /// The network instance its rules count for.
    public var capNetwork: CapNetwork { CapNetwork(plugin: plugin, adUnitID: adUnitID) }

    /// The same network request, whatever its rules: a reload that changes only the rules
    /// keeps the entry's backoff and estimates.
    func loadsLike(_ other: WaterfallEntry) -> Bool {
        (plugin, adUnitID, serverParameter, timeout, bidder) == (other.plugin, other.adUnitID, other.serverParameter, other.timeout, other.bidder)
    }
}

/// The reward a rewarded slot grants, less the user id (docs/rules.md, "Rewards").
public struct RewardModel: Sendable, Equatable {
    public var name: String
    public var amount: Int64
    public var extra: String

    public init(name: String = "", amount: Int64 = 0, extra: String = "") {
        self.name = name
        self.amount = amount
        self.extra = extra
    }
}

/// A place in an app where ads are shown, and how the daemon keeps it stocked.
public struct SlotConfig: Sendable, Equatable {
    public var id: String
    public var format: AdFormat
    /// The fewest valid ads the scheduler keeps ready, whatever the demand.
    public var bufferMin: Int
    /// The most it keeps ready, however high the demand. `bufferMin == bufferMax` is a fixed
    /// buffer (the config's `buffer = N`); otherwise the scheduler picks a target between
    /// the two from the slot's demand (docs/scheduler.md).
    public var bufferMax: Int
    /// The longest an ad of this slot stays valid after it loaded, whatever the network says.
    public var ttl: Duration
    public var waterfall: [WaterfallEntry]
    public var reward: RewardModel
    public var testMode: Bool
    /// Targeting for every request of this slot, as a JSON object.
    public var targetingJSON: String
    /// Banner size in points (banner and native banner), 0 when it does not apply.
    public var width: Int
    public var height: Int
    /// How many native ads one Load asks for when the app does not say (docs/rules.md, "Native ads").
    public var count: Int
    /// The overall deadline of a Load when the app does not say.
    public var loadTimeout: Duration
    /// Native variant: "feed", "banner" or "interstitial", passed to the plugin.
    public var variant: String
    /// Image options for native ads, as a JSON object, passed to the plugin.
    public var imageOptionsJSON: String
    /// Parallel mode: a refill asks the first N usable entries at once; every ad that comes
    /// back stays valid (Show takes the highest price first). 1 is the plain waterfall.
    public var parallel: Int
    /// Interactive: a session without fetch_complete this long after InitInteractive ends in error.
    public var fetchTimeout: Duration
    /// Interactive: a session without started this long after Start ends in error.
    public var startTimeout: Duration
    /// The slot's frequency rules (docs/caps.md): its own, or the daemon's default.
    public var caps: [FrequencyRule] = []
    /// When an ad's impression counts against the rules.
    public var capCounting = CapCounting.impression
    /// The lowest price per 1,000 impressions the slot takes (docs/bidding.md, "Floors"):
    /// sent to bidders as `imp.bidfloor`, an ad reported below it refused, an entry whose
    /// eCPM is below it not asked. 0: no floor.
    public var floor = 0.0

    /// A fixed buffer of `buffer` ads; with `bufferMax`, a demand-aware one from `buffer` to `bufferMax`.
    public init(
        id: String, format: AdFormat, buffer: Int = 1, bufferMax: Int? = nil, ttl: Duration = .seconds(3600),
        waterfall: [WaterfallEntry], reward: RewardModel = RewardModel(), testMode: Bool = false,
        targetingJSON: String = "{}", width: Int = 0, height: Int = 0, count: Int = 1,
        loadTimeout: Duration? = nil, variant: String = "", imageOptionsJSON: String = "{}", parallel: Int = 1,
        fetchTimeout: Duration = .seconds(5), startTimeout: Duration = .seconds(10)
    ) {
        self.parallel = parallel
        self.fetchTimeout = fetchTimeout
        self.startTimeout = startTimeout
        self.width = width
        self.height = height
        self.count = count
        self.loadTimeout = loadTimeout ?? format.defaultLoadTimeout
        self.variant = variant
        self.imageOptionsJSON = imageOptionsJSON
        self.id = id
        self.format = format
        self.bufferMin = buffer
        self.bufferMax = max(buffer, bufferMax ?? buffer)
        self.ttl = ttl
        self.waterfall = waterfall
        self.reward = reward
        self.testMode = testMode
        self.targetingJSON = targetingJSON
    }
}

extension SlotConfig {
    /// buffer_max when a demand-aware slot does not name one.
    public static let defaultBufferMax = 10

    /// Whether a refill runs an auction (docs/bidding.md, "The auction"): some entry is a
    /// bidder or has a price. A slot priced so is filled by price, not by the demand-aware
    /// choice of the entry whose ads last (docs/scheduler.md), which knows no price.
    public var isHybrid: Bool { waterfall.contains { $0.bidder || $0.ecpm != nil } }

    /// Whether the scheduler chooses the buffer from demand, between `bufferMin` and `bufferMax`.
    public var isDemandAware: Bool { bufferMax > bufferMin }

    /// Whether any rule, the slot's or an entry's, counts this slot's impressions.
    public var hasCaps: Bool { !caps.isEmpty || waterfall.contains { !$0.caps.isEmpty } }

    /// Every rule of the slot and its entries: history is kept for the longest window.
    public var allCaps: [FrequencyRule] { caps + waterfall.flatMap(\.caps) }

    /// The names of every rule of the slot and its entries, as Capped gives them.
    public var capRuleNames: [String] {
        caps.map(\.name) + waterfall.flatMap { entry in entry.caps.map { entry.capNetwork.name(of: $0) } }
    }
}

/// Scheduler settings shared by all slots.
public struct SchedulerSettings: Sendable, Equatable {
    /// A replacement load starts this long before an ad expires (at most a fifth of its life).
    public var refreshAhead: Duration
    /// The first backoff after a failure of a waterfall entry; it doubles per failure in a row.
    public var backoffBase: Duration
    /// The longest backoff.
    public var backoffMax: Duration
    /// Backoffs are spread by up to this share either way, so slots don't retry in step.
    public var backoffJitter: Double
    /// A shown ad whose app never reports `close` ends after this long.
    public var shownLifetime: Duration
    /// How long an ended ad is remembered, to attribute late callbacks and explain reports.
    public var retiredMemory: Duration
    /// At most this many ended ads are remembered, the oldest forgotten first.
    public var retiredMemoryLimit: Int
    /// A network that answers rate_limited (docs/rules.md, "Error taxonomy") gets no load at all for this long.
    public var rateLimitPause: Duration
    /// At most this many loads in flight to one network, over all slots.
    public var maxLoadsInFlightPerNetwork: Int
    /// How long after the app's close a network that grants rewards itself may still report
    /// one ([scheduler] network_reward_grace_s): real networks' server-side rewards often
    /// come after the viewer closed the ad.
    public var networkRewardGrace = Duration.seconds(60)
    /// What one uid may hold ([limits]; docs/rules.md, "Budgets per uid").
    public var budgets = UIDBudgets()
    /// What a viewer who said little or nothing allows ([privacy]; docs/privacy.md, "Inventory").
    public var privacy = PrivacySettings()

    public init(
        refreshAhead: Duration = .seconds(60), backoffBase: Duration = .seconds(1),
        backoffMax: Duration = .seconds(300), backoffJitter: Double = 0.2,
        shownLifetime: Duration = .seconds(3600), retiredMemory: Duration = .seconds(600), retiredMemoryLimit: Int = 10_000,
        rateLimitPause: Duration = .seconds(300), maxLoadsInFlightPerNetwork: Int = 8
    ) {
        self.refreshAhead = refreshAhead
        self.backoffBase = backoffBase
        self.backoffMax = backoffMax
        self.backoffJitter = backoffJitter
        self.shownLifetime = shownLifetime
        self.retiredMemory = retiredMemory
        self.retiredMemoryLimit = retiredMemoryLimit
        self.rateLimitPause = rateLimitPause
        self.maxLoadsInFlightPerNetwork = maxLoadsInFlightPerNetwork
    }
}

/// What one app's uid may hold of the engine at once ([limits]; docs/rules.md, "Budgets per
/// uid"), so one app cannot take what every other app needs. Root, the operator, is exempt.
public struct UIDBudgets: Sendable, Equatable {
    /// Ads handed to one uid (Show, Load) that have not ended (closed, expired, destroyed).
    public var maxOpenAds = 256
    /// Live interactive sessions one uid made (InitInteractive).
    public var maxSessions = 16
    /// Rewards of ads handed to one uid that wait in the ledger for its AckReward: at this
    /// many, its rewarded Shows are refused (docs/rules.md, "A bound on unacknowledged
    /// rewards"), so an app that never acknowledges cannot grow the ledger without end.
    public var maxUnacknowledgedRewards = 10_000
    /// A session made by InitInteractive and never started ends after this long.
    public var unstartedSessionTimeout: Duration = .seconds(60)
    /// How long a uid that asked a slot is owed a share of its ready ads, and over how long
    /// the ads each uid took are compared (docs/rules.md, "Fair share").
    public var fairShareWindow: Duration = .seconds(60)

    public init() {}

    /// Whether the budgets bind `uid`: not root, and not a caller without credentials (never
    /// the case on a Unix socket), which no one could be told apart from.
    public static func bind(_ uid: UInt32?) -> Bool { uid.map { $0 != 0 } ?? false }
}

extension SchedulerSettings {
    /// The rest a waterfall entry takes after a failure: backoffBase doubled `doublings`
    /// times (at most 30), no more than backoffMax, spread by backoffJitter times `spread`
    /// (a draw from -1 to 1). Whole nanoseconds, saturating: no settings can make it trap.
    public func backoff(doublings: Int, spread: Double) -> Duration {
        let longest = backoffMax.nanosecondsClamped
        let (doubled, overflow) = backoffBase.nanosecondsClamped.multipliedReportingOverflow(by: 1 << min(doublings, 30))
        let raw = overflow ? longest : min(longest, doubled)
        return .saturating(nanoseconds: Double(raw) * (1 + backoffJitter * spread))
    }
}
