import AdorchEngine
import AdorchPrivacy

/// The range of every number a config may set outside [limits] (those are checked where
/// they are read, but for the fair share's window), named once: the parser checks each key against its range, the tests
/// drive the engine at the top of each. The upper bounds are generous for an operator and
/// keep all arithmetic on the values (nanoseconds in Int64, a backoff doubled thirty
/// times, JSON integers read as doubles) far from overflow.
enum ConfigBounds {
    // [daemon]
    static let maxMessageBytes: ClosedRange<Int64> = 1024...(64 << 20)

    // [scheduler]; a day is the longest any wait of the scheduler's need be.
    static let refreshAheadSeconds: ClosedRange<Int64> = 0...86_400
    static let backoffBaseMilliseconds: ClosedRange<Int64> = 1...3_600_000
    static let backoffMaxSeconds: ClosedRange<Int64> = 1...86_400
    static let backoffJitter: ClosedRange<Double> = 0...1
    static let shownLifetimeSeconds: ClosedRange<Int64> = 1...86_400
    /// A network's reward after the app's close: at least a second, at most an hour (the ad
    /// is kept for it, and its network's object with it).
    static let networkRewardGraceSeconds: ClosedRange<Int64> = 1...3_600
    static let rateLimitPauseSeconds: ClosedRange<Int64> = 0...86_400
    static let maxLoadsInFlightPerNetwork: ClosedRange<Int64> = 1...1000

    // [plugins.NAME] of an isolated plugin (docs/isolation.md). A host maps about 100 MiB of
    // address space before its plugin allocates anything (its Swift runtime, its threads'
    // stacks): under 256 MiB one may not even start.
    static let memoryLimitMegabytes: ClosedRange<Int64> = 256...(1 << 20)
    static let hangTimeoutMilliseconds: ClosedRange<Int64> = 500...600_000
    static let crashBudget: ClosedRange<Int64> = 1...1000
    static let crashWindowSeconds: ClosedRange<Int64> = 1...86_400

    // [[slots]]
    /// No network keeps an ad valid for longer than a week.
    static let ttlSeconds: ClosedRange<Int64> = 1...604_800
    /// Up to 2^53 - 1: an app reading the reward from JSON as a double still gets it exactly.
    static let rewardAmount: ClosedRange<Int64> = 0...(1 << 53) - 1
    static let parallel: ClosedRange<Int64> = 1...10
    /// A price per 1,000 impressions (an entry's `ecpm`, a slot's `floor`).
    static let cpm = CPM.range
    /// fetch_timeout_ms and start_timeout_ms of an interactive slot.
    static let sessionTimeoutMilliseconds: ClosedRange<Int64> = 1...120_000

    // [[slots.waterfall]]
    static let entryTimeoutMilliseconds: ClosedRange<Int64> = 1...300_000
    /// gvl_id: the network's id in the IAB Global Vendor List, as a TC string can name it.
    static let gvlID = VendorSection.vendorIDs

    // [limits]
    /// fair_share_window_s: an app that asked a slot over an hour ago is not waiting for its
    /// ad, and a longer window would only keep ads loaded for it.
    static let fairShareWindowSeconds: ClosedRange<Int64> = 1...3600
    /// max_unacknowledged_rewards_per_uid: at least one, or no rewarded Show could ever be
    /// made; at most about a million rows per uid.
    static let unacknowledgedRewardsPerUID: ClosedRange<Int64> = 1...(1 << 20)
    /// max_privacy_records_per_uid: at least one, or an app could not even set its own; at
    /// most about a million rows per uid, each up to three strings of ConsentStringBound.maxBytes.
    static let privacyRecordsPerUID: ClosedRange<Int64> = 1...(1 << 20)
}
