import XCTest

@testable import AdorchEngine

/// The inventory's promises (docs/privacy.md, "Inventory") over random mixes of viewers and
/// networks, with reloads changing vendor ids, what networks serve and the defaults between
/// them: no ad goes to a viewer whose signals forbid its class; a child never gets an ad of a
/// network that may not serve children; a load carries the signals only of a viewer who
/// allows its class from its network, so a vendor without consent is never asked for a
/// personalised load for them; a plugin that cannot receive signals never gets a load that
/// needs them; and no class is loaded that no viewer of the slot asked for, but the unset
/// viewer's while the slot is cold. Seeded: a failure names its seed.
final class InventoryPropertyTests: XCTestCase {
    private static let seeds: ClosedRange<UInt64> = 1...300
    private static let steps = 125
    static let plugins = ["n0", "n1", "n2", "n3"]

    func testNoAdOrLoadEverBreaksAViewersSignals() {
        var shows = 0, served = 0, loads = 0
        for seed in Self.seeds {
            var world = World(seed: seed)
            world.run(steps: Self.steps)
            shows += world.shows
            served += world.served
            loads += world.checkedLoads
        }
        // The properties held over enough of everything to mean something.
        XCTAssertGreaterThan(shows, 10_000)
        XCTAssertGreaterThan(served, 1_000)
        XCTAssertGreaterThan(loads, 5_000)
    }
}

/// One random mix, run step by step, checking every Show and load as it happens.
private struct World {
    let seed: UInt64
    var random: SplitMix64
    var inventory: Inventory
    var viewers: [(user: String, privacy: ViewerPrivacy?)] = []
    /// Per slot and class, the last Show that counted as demand for it.
    var asked: [String: [PrivacyClass: Moment]] = [:]
    var checked = 0
    var shows = 0, served = 0, checkedLoads = 0

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
        var random = self.random
        let slots = (0..<(1 + Int(random.next() % 2))).map { index in World.randomSlot("s\(index)", &random) }
        inventory = Inventory(slots, plugins: Set(InventoryPropertyTests.plugins), privacy: World.randomSettings(&random), seed: seed)
        for index in 0..<8 { viewers.append(("v\(index)", World.randomViewer(&random))) }
        self.random = random
        checkLoads()
    }

    // MARK: Drawing

    static func chance(_ p: Double, _ random: inout SplitMix64) -> Bool { random.nextUnit() < p }

    static func randomNetwork(_ random: inout SplitMix64) -> NetworkPrivacy {
        var network = NetworkPrivacy(gvlID: chance(0.8, &random) ? 1 + Int(random.next() % 6) : nil,
                                     servesChildren: chance(0.4, &random), servesNonPersonalized: chance(0.7, &random))
        network.receivesSignals = chance(0.7, &random)
        return network
    }

    static func randomSlot(_ id: String, _ random: inout SplitMix64) -> SlotConfig {
        let entries = (0..<(1 + Int(random.next() % 3))).map { _ in
            (InventoryPropertyTests.plugins[Int(random.next() % UInt64(InventoryPropertyTests.plugins.count))], randomNetwork(&random))
        }
        let buffer = 1 + Int(random.next() % 3)
        return classedSlot(id: id, buffer: buffer, bufferMax: chance(0.5, &random) ? buffer + Int(random.next() % 5) : nil, entries)
    }

    static func randomSettings(_ random: inout SplitMix64) -> PrivacySettings {
        PrivacySettings(unsetViewer: ([nil] + PrivacyClass.allCases)[Int(random.next() % 4)], gdprWhenUnknown: chance(0.5, &random))
    }

    static func randomViewer(_ random: inout SplitMix64) -> ViewerPrivacy? {
        guard chance(0.8, &random) else { return nil }
        func subset(_ range: ClosedRange<Int>, _ density: Double) -> Set<Int> { Set(range.filter { _ in chance(density, &random) }) }
        var signals = PrivacySignals(gdprApplies: [GDPRApplies.yes, .no, .unknown][Int(random.next() % 3)])
        if chance(0.7, &random) {
            signals.tcString = tcString(purposes: subset(1...4, 0.8), vendors: subset(1...6, 0.6), interests: subset(1...4, 0.5),
                                        vendorInterests: subset(1...6, 0.5))
        }
        if chance(0.3, &random) { signals.usPrivacy = chance(0.5, &random) ? "1YYN" : "1YNN" }
        signals.childDirected = chance(0.1, &random)
        signals.underAgeOfConsent = chance(0.05, &random)
        signals.nonPersonalized = chance(0.2, &random)
        return try! ViewerPrivacy(signals)
    }

    // MARK: Running

    mutating func run(steps: Int) {
        for _ in 0..<steps {
            switch random.next() % 10 {
            case 0..<5: show()
            case 5..<8: answerLoads()
            // Now and then past the class memory, so that slots go cold again.
            case 8: inventory.advance(World.chance(0.05, &random) ? Engine.classMemory : .seconds(Int64(random.next() % 120)))
            default:
                if World.chance(0.3, &random) { reconfigure() } else { inventory.advance(.milliseconds(Int64(random.next() % 3000))) }
            }
            checkLoads()
        }
    }

    mutating func show() {
        let viewer = viewers[Int(random.next() % UInt64(viewers.count))]
        let slot = inventory.slots[Int(random.next() % UInt64(inventory.slots.count))]
        let allowed = slot.waterfall.map { inventory.settings.privacy.allowedClasses(viewer.privacy, for: $0.privacy) }
        if let wanted = PrivacyClass.preference.first(where: { c in allowed.contains { $0.contains(c) } }) {
            asked[slot.id, default: [:]][wanted] = inventory.now
        }
        shows += 1
        guard let ad = inventory.show(slot.id, by: viewer.privacy, user: viewer.user) else { return }
        served += 1
        let order = inventory.order(of: ad)
        // The entry as the config says now: reloads may have changed it since the load.
        let entry = slot.waterfall.first { $0.plugin == order.plugin && $0.adUnitID == order.entry.adUnitID }
        XCTAssertNotNil(entry, "seed \(seed): an ad of an entry no longer in the slot was shown")
        guard let entry else { return }
        XCTAssertTrue(inventory.settings.privacy.allowedClasses(viewer.privacy, for: entry.privacy).contains(order.privacy.privacyClass),
                      "seed \(seed): \(viewer.user) was shown a \(order.privacy.privacyClass) ad of \(entry.privacy) they do not allow")
        if viewer.privacy?.signals.childDirected == true || viewer.privacy?.signals.underAgeOfConsent == true {
            XCTAssertTrue(entry.privacy.servesChildren, "seed \(seed): a child was shown an ad of a network that may not serve children")
            XCTAssertEqual(order.privacy.privacyClass, .childDirected, "seed \(seed)")
        }
    }

    mutating func answerLoads() {
        let fills = World.chance(0.8, &random)
        inventory.answer(fill: fills, expiresIn: .seconds(60 + Int64(random.next() % 900)))
    }

    mutating func reconfigure() {
        var slots = inventory.slots
        let slot = Int(random.next() % UInt64(slots.count))
        let entry = Int(random.next() % UInt64(slots[slot].waterfall.count))
        slots[slot].waterfall[entry].privacy = World.randomNetwork(&random)
        inventory.reconfigure(slots, privacy: World.chance(0.5, &random) ? World.randomSettings(&random) : nil)
    }

    /// Every load asked since the last check, against the config and settings it was asked under.
    mutating func checkLoads() {
        for order in inventory.loads[checked...] {
            checkedLoads += 1
            let network = order.entry.privacy
            let privacy = order.privacy
            XCTAssertTrue(network.servedClasses.contains(privacy.privacyClass), "seed \(seed): \(privacy.privacyClass) asked of \(network)")
            XCTAssertTrue(network.receivesSignals || !privacy.needsSignals, "seed \(seed): a 1.3 plugin was asked for \(privacy)")
            // Whose signals they are: a viewer who allows the class there, or the unset viewer.
            let settings = inventory.settings.privacy
            let fromViewer = viewers.contains { viewer in
                LoadPrivacy(privacy.privacyClass, for: viewer.privacy?.signals) == privacy
                    && settings.allowedClasses(viewer.privacy, for: network).contains(privacy.privacyClass)
            }
            let cold = asked[order.slotID, default: [:]].values.allSatisfy { $0 + Engine.classMemory <= inventory.now }
            let forUnset = cold && privacy == LoadPrivacy(privacy.privacyClass, for: nil) && privacy.privacyClass == settings.unsetViewer
            // A child-directed load carries a child's signals, or the class's flag alone: never an adult's.
            let flagOnly = privacy == LoadPrivacy(privacy.privacyClass, for: nil)
            if privacy.privacyClass == .childDirected, !flagOnly {
                XCTAssertTrue(viewers.contains { viewer in
                    (viewer.privacy?.signals.childDirected == true || viewer.privacy?.signals.underAgeOfConsent == true)
                        && LoadPrivacy(.childDirected, for: viewer.privacy?.signals) == privacy
                }, "seed \(seed): a child-directed load to \(order.plugin) carried no child's signals: \(privacy)")
            }
            XCTAssertTrue(fromViewer || forUnset || (privacy.privacyClass == .childDirected && flagOnly),
                          "seed \(seed): \(privacy) sent to \(order.plugin) for no viewer who allows it")
            if privacy.privacyClass == .personalized, let tc = privacy.signals.tcString, network.gvlID != nil {
                XCTAssertTrue(viewers.contains { $0.privacy?.signals.tcString == tc
                    && settings.allowedClasses($0.privacy, for: network).contains(.personalized) },
                              "seed \(seed): vendor \(network.gvlID!) asked for a personalised load without consent")
            }
            // A class nobody on the host asked for holds no ads (a slot expects those asked on the others).
            let recently = asked.values.contains { $0[privacy.privacyClass].map { $0 + Engine.classMemory > inventory.now } ?? false }
            XCTAssertTrue(recently || forUnset, "seed \(seed): \(privacy.privacyClass) loaded in \(order.slotID), which no viewer asked for")
        }
        checked = inventory.loads.count
    }
}
