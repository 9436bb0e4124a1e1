import AdorchEngine

/// What the audience's apps say of their viewers' privacy on the privacy day
/// (docs/privacy.md, "Inventory"), and what the day's networks declare. Defined here only:
/// the simulator counts by these groups, adorch's engine is handed these signals.
public struct AudiencePrivacy: Sendable {
    /// One kind of viewer: what their app says of them, and their share of the audience.
    public struct Group: Sendable {
        public var name: String
        public var share: Double
        public var signals: PrivacySignals

        public init(name: String, share: Double, signals: PrivacySignals) {
            (self.name, self.share, self.signals) = (name, share, signals)
        }
    }

    public var groups: [Group]

    public init(groups: [Group]) { self.groups = groups }

    /// 60 % consented (personalised), 30 % not (non-personalised), 10 % child-directed. No
    /// TC string: outside the GDPR, so consent is the absence of an opt-out, and the
    /// non-personalised viewer is one whose app asked for it (limited ad tracking).
    public static let standard = AudiencePrivacy(groups: [
        Group(name: "consented", share: 0.6, signals: PrivacySignals(gdprApplies: .no)),
        Group(name: "not consented", share: 0.3, signals: PrivacySignals(gdprApplies: .no, nonPersonalized: true)),
        Group(name: "child-directed", share: 0.1, signals: PrivacySignals(gdprApplies: .no, childDirected: true)),
    ])

    /// Each of the Audience's users' group: the groups' shares of the users, rounded by
    /// largest remainder (24, 12 and 4 of 40 for `standard`), dealt to users in an order
    /// shuffled by a stream of its own: the day's seed mixed with a constant ("privacy"),
    /// apart from the users' and the networks' streams, so the day's requests, users and
    /// outcomes are those of a day without the mix.
    public func groupOfUser(seed: UInt64) -> [Int] {
        let exact = groups.map { $0.share / groups.map(\.share).reduce(0, +) * Double(Audience.size) }
        var counts = exact.map { Int($0.rounded(.down)) }
        let short = Audience.size - counts.reduce(0, +)
        for g in groups.indices.sorted(by: { (exact[$0] - Double(counts[$0]), -$0) > (exact[$1] - Double(counts[$1]), -$1) }).prefix(short) {
            counts[g] += 1
        }
        var dealt = counts.enumerated().flatMap { g, n in Array(repeating: g, count: n) }
        var random = SplitMix64(seed: seed ^ 0x7072_6976_6163_7900)
        dealt.shuffle(using: &random)
        return dealt
    }

    /// What network `index` of a day's waterfall declares, by one rule for every day: every
    /// network serves non-personalised ads (the config's default), and every other one, from
    /// the first, serves children; none is a TCF vendor, which no viewer here needs. So every
    /// day has a network for each group, and on days of two networks or more, a network the
    /// child-directed viewers cannot be served from.
    public static func network(_ index: Int) -> NetworkPrivacy {
        NetworkPrivacy(servesChildren: index % 2 == 0, servesNonPersonalized: true)
    }
}

/// The mix dealt to one day: each user's group and decoded privacy, each network's declaration.
public struct DayPrivacy: Sendable {
    public let mix: AudiencePrivacy
    /// Per Audience user: the group's index in `mix.groups`, and what the engine is handed.
    public let group: [Int]
    public let viewer: [ViewerPrivacy]
    /// Per network of the day's waterfall.
    public let networks: [NetworkPrivacy]
    /// What the engine assumes of what a viewer leaves unsaid: the defaults, as adorch runs.
    public let settings = PrivacySettings()

    public init(_ mix: AudiencePrivacy, for workload: Workload) {
        self.mix = mix
        group = mix.groupOfUser(seed: workload.seed)
        // Signals without a string always decode: a failure would be a broken decoder.
        viewer = group.map { try! ViewerPrivacy(mix.groups[$0].signals) }
        networks = workload.networks.indices.map(AudiencePrivacy.network)
    }

    /// Whether an ad of `privacyClass` from network `network` may go to `user`: the simulator
    /// checks the engine's hand-outs by the rules themselves.
    func allows(_ privacyClass: PrivacyClass, from network: Int, to user: Int) -> Bool {
        settings.allowedClasses(viewer[user], for: networks[network]).contains(privacyClass)
    }
}
