import XCTest

@testable import AdorchEngine

// Viewers for the inventory tests: signals as an app passes them, TC strings written by the
// privacy tests' own encoder (TCStringEncoder.swift is that file, linked: one encoder).

/// A TC string in which the viewer consented to `purposes` and to `vendors`, with legitimate
/// interest established for `interests` and `vendorInterests`.
func tcString(purposes: Set<Int>, vendors: Set<Int>, interests: Set<Int> = [], vendorInterests: Set<Int> = []) -> String {
    func bitField(_ ids: Set<Int>) -> TCModel.Vendors {
        TCModel.Vendors(maxVendorId: ids.max() ?? 0, useRanges: false, entries: ids.sorted().map { $0...$0 })
    }
    return TCModel(
        created: 16_000_000_000, lastUpdated: 16_000_000_000, cmpId: 7, cmpVersion: 1, consentScreen: 1, language: (4, 13),
        vendorListVersion: 100, policyVersion: 4, serviceSpecific: true, nonStandardTexts: false, specialFeatures: [],
        purposesConsent: purposes, purposesLI: interests, purposeOneTreatment: false, country: (3, 4),
        vendorConsents: bitField(vendors), vendorLI: bitField(vendorInterests), restrictions: [],
        disclosed: nil, allowed: nil, publisherTC: nil, reservedSegmentTypes: [], segmentOrder: []
    ).encoded()
}

/// A viewer under the GDPR who consented to every purpose the classes read, for `vendors` only.
func consenting(_ vendors: Set<Int>) -> ViewerPrivacy {
    try! ViewerPrivacy(PrivacySignals(gdprApplies: .yes, tcString: tcString(purposes: [1, 2, 3, 4], vendors: vendors)))
}

/// A viewer outside the GDPR, with the flags given.
func outsideGDPR(child: Bool = false, nonPersonalized: Bool = false, usPrivacy: String? = nil) -> ViewerPrivacy {
    try! ViewerPrivacy(PrivacySignals(gdprApplies: .no, usPrivacy: usPrivacy, childDirected: child, nonPersonalized: nonPersonalized))
}

/// An engine on a manual clock whose networks answer only when a test says, with every load
/// order and event kept.
struct Inventory {
    var engine: Engine
    var now = Moment(nanoseconds: 1_000_000_000)
    var settings: SchedulerSettings
    var slots: [SlotConfig]
    /// Every load asked, in order, and those not answered yet.
    var loads: [LoadOrder] = []
    var pending: [LoadOrder] = []
    var destroyed: [AdID] = []

    init(_ slots: [SlotConfig], plugins: Set<String> = ["a", "b", "c"], privacy: PrivacySettings = PrivacySettings(), seed: UInt64 = 5) {
        var settings = SchedulerSettings(backoffJitter: 0)
        settings.privacy = privacy
        self.settings = settings
        self.slots = slots
        engine = Engine(slots: slots, plugins: plugins, settings: settings, seed: seed)
        take(engine.advance(to: now))
    }

    mutating func take(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .load(let order):
                loads.append(order)
                pending.append(order)
            case .destroy(let id, _): destroyed.append(id)
            default: break
            }
        }
    }

    /// Every pending load filled (or, with `fill` false, not).
    mutating func answer(fill: Bool = true, expiresIn: Duration? = nil) {
        while !pending.isEmpty {
            let order = pending.removeFirst()
            let report: PluginReport = fill ? .loaded(payloadJSON: "{}", expiresIn: expiresIn, price: nil)
                : .failed(.noFill, networkCode: 0, message: "none")
            take(engine.pluginReported(report, for: order.adID, from: order.plugin, now: now))
        }
    }

    mutating func advance(_ d: Duration) {
        now = now + d
        take(engine.advance(to: now))
    }

    /// A Show by `viewer`, its ad closed at once; the ad, if any.
    @discardableResult
    mutating func show(_ slot: String = "s", by viewer: ViewerPrivacy?, user: String = "u", app: UInt32? = nil) -> ShownAd? {
        let (result, effects) = engine.show(slot: slot, userID: user, privacy: viewer, holder: app, now: now)
        take(effects)
        guard case .success(let ad) = result else { return nil }
        take(engine.report(.close, for: ad.id, now: now).1)
        return ad
    }

    mutating func reconfigure(_ slots: [SlotConfig], privacy: PrivacySettings? = nil) {
        if let privacy { settings.privacy = privacy }
        self.slots = slots
        take(engine.reconfigure(slots: slots, settings: settings, now: now))
    }

    /// The load order an ad came from.
    func order(of ad: ShownAd) -> LoadOrder { loads.first { $0.adID == ad.id }! }

    /// Loads asked since `count` loads had been.
    func loads(since count: Int) -> ArraySlice<LoadOrder> { loads[count...] }
}

/// A slot of `entries` (plugin, privacy), each its own ad unit.
func classedSlot(id: String = "s", buffer: Int = 1, bufferMax: Int? = nil, _ entries: [(String, NetworkPrivacy)]) -> SlotConfig {
    SlotConfig(id: id, format: .interstitial, buffer: buffer, bufferMax: bufferMax, ttl: .seconds(600),
               waterfall: entries.enumerated().map { index, entry in
                   WaterfallEntry(plugin: entry.0, adUnitID: "unit-\(index)", timeout: .seconds(2), privacy: entry.1)
               })
}

extension NetworkPrivacy {
    /// A network that says it cannot receive privacy signals (a plugin built for ABI 1.3).
    func deaf() -> NetworkPrivacy {
        var network = self
        network.receivesSignals = false
        return network
    }
}
