import XCTest

@testable import AdorchEngine
import AdorchPrivacy

/// Inventory partitioned by privacy class (docs/privacy.md, "Inventory"), rule by rule, on a
/// manual clock.
final class InventoryTests: XCTestCase {
    private let everything = NetworkPrivacy(gvlID: 1, servesChildren: true, servesNonPersonalized: true)

    // MARK: What a load carries

    func testAColdSlotLoadsTheUnsetViewersClassWithOnlyItsFlag() {
        var inventory = Inventory([classedSlot([("a", everything)])])
        XCTAssertEqual(inventory.loads.map(\.privacy), [LoadPrivacy(privacyClass: .nonPersonalized, signals: PrivacySignals(nonPersonalized: true))])
        inventory.answer()
        XCTAssertNotNil(inventory.show(by: nil), "a viewer who set nothing may be shown a non-personalised ad")
    }

    func testWithNothingForTheUnsetViewerAColdSlotLoadsNothing() {
        let inventory = Inventory([classedSlot([("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        XCTAssertEqual(inventory.loads, [], "no class is asked for: none holds an ad")
    }

    func testALoadCarriesTheLastAllowingViewersSignalsWithTheClassFlagForced() throws {
        var inventory = Inventory([classedSlot([("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        let viewer = try ViewerPrivacy(PrivacySignals(gdprApplies: .no, usPrivacy: "1YYN"))  // opted out of sale: not personalised
        XCTAssertNil(inventory.show(by: viewer))
        var expected = viewer.signals
        expected.nonPersonalized = true
        XCTAssertEqual(inventory.loads.map(\.privacy), [LoadPrivacy(privacyClass: .nonPersonalized, signals: expected)])
        XCTAssertEqual(LoadPrivacy(.childDirected, for: viewer.signals).signals.childDirected, true)
        XCTAssertEqual(LoadPrivacy(.personalized, for: viewer.signals).signals, viewer.signals, "personalised adds nothing")
    }

    // MARK: Show

    func testAShowHandsAViewerOnlyAnAdOfAClassTheyAllow() {
        var inventory = Inventory([classedSlot([("a", everything)])])
        inventory.answer()
        let noConsentString = try! ViewerPrivacy(PrivacySignals(gdprApplies: .yes))
        XCTAssertNil(inventory.show(by: noConsentString), "under the GDPR without a TC string nothing may be shown")
        XCTAssertNil(inventory.show(by: outsideGDPR(child: true)), "a child may not be shown a non-personalised ad")
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].ready, 1, "the ad is still there for others")
        XCTAssertNotNil(inventory.show(by: outsideGDPR()))
    }

    func testAChildIsShownOnlyChildDirectedAdsOfANetworkThatServesChildren() {
        let notForChildren = NetworkPrivacy(gvlID: 1, servesChildren: false)
        var inventory = Inventory([classedSlot([("a", notForChildren), ("b", everything)])],
                                  privacy: PrivacySettings(unsetViewer: .childDirected))
        XCTAssertEqual(inventory.loads.map(\.plugin), ["b"], "only b may load child-directed ads")
        inventory.answer()
        let ad = inventory.show(by: outsideGDPR(child: true))
        XCTAssertEqual(ad?.network, "b")
        XCTAssertEqual(ad.map { inventory.order(of: $0).privacy.privacyClass }, .childDirected)
    }

    /// Outside attack on issue 32 (F5): a viewer no entry of the slot may serve is told so,
    /// not that the slot is being refilled; a Load says it in the same words.
    func testAViewerNoEntryMayServeIsToldSoByShowAndLoad() {
        let notForChildren = NetworkPrivacy(gvlID: 1, servesChildren: false, servesNonPersonalized: true)
        let banner = SlotConfig(id: "b", format: .banner, waterfall: [WaterfallEntry(plugin: "a", adUnitID: "a", privacy: notForChildren)])
        var inventory = Inventory([classedSlot([("a", notForChildren)]), banner])
        let child = outsideGDPR(child: true)
        XCTAssertEqual(inventory.engine.show(slot: "s", userID: "u", privacy: child, now: inventory.now).0, .failure(.viewerUnservable(slot: "s")),
                       "nothing is ready, and nothing ever will be for a child here")
        inventory.answer()
        XCTAssertEqual(inventory.engine.show(slot: "s", userID: "u", privacy: child, now: inventory.now).0, .failure(.viewerUnservable(slot: "s")),
                       "the ad ready is not theirs either")
        XCTAssertNotNil(inventory.show(by: outsideGDPR()), "another viewer takes it")
        XCTAssertEqual(inventory.engine.show(slot: "s", userID: "u", privacy: outsideGDPR(), now: inventory.now).0, .failure(.noAdReady(slot: "s")),
                       "a viewer who may be served waits for the refill")

        let (accepted, effects) = inventory.engine.load(slot: "b", LoadParameters(width: 320, height: 50), privacy: child, request: 1,
                                                         now: inventory.now)
        XCTAssertNoThrow(try accepted.get())
        guard case .completeLoad(1, .failure(let failure)) = effects.last else { return XCTFail("\(effects)") }
        XCTAssertEqual(failure, LoadFailure(code: .noFill, message: ShowError.noEntryServesViewer, attempts: []))
    }

    func testAShowTakesItsOwnClassFirst() {
        var inventory = Inventory([classedSlot(buffer: 2, [("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        inventory.show(by: outsideGDPR(), user: "p")
        inventory.show(by: outsideGDPR(nonPersonalized: true), user: "n")
        inventory.answer()
        XCTAssertEqual(Set(inventory.loads.map(\.privacy.privacyClass)), [.personalized, .nonPersonalized])
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].readyByClass, [.personalized: 2, .nonPersonalized: 1],
                       "operators see what each class holds")
        let ad = inventory.show(by: outsideGDPR())
        XCTAssertEqual(ad.map { inventory.order(of: $0).privacy.privacyClass }, .personalized,
                       "the non-personalised ad is left to the viewer who may take only that")
    }

    func testAReloadThatChangesTheVendorIDLeavesNoAdShowableToAViewerWithoutConsent() {
        var inventory = Inventory([classedSlot([("a", NetworkPrivacy(gvlID: 1))])], privacy: PrivacySettings(unsetViewer: nil))
        let viewer = consenting([1])
        XCTAssertNil(inventory.show(by: viewer))
        XCTAssertEqual(inventory.loads.last?.privacy.privacyClass, .personalized)
        inventory.answer()
        inventory.reconfigure([classedSlot([("a", NetworkPrivacy(gvlID: 2))])])
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].ready, 1, "the network still serves the class: the ad stays")
        XCTAssertNil(inventory.show(by: viewer), "the viewer never consented to vendor 2")
        XCTAssertNotNil(inventory.show(by: consenting([2])))
    }

    func testAReloadThatChangesTheUnsetViewersClassAppliesToAdsAlreadyLoaded() {
        var inventory = Inventory([classedSlot([("a", everything)])])
        inventory.answer()
        inventory.reconfigure(inventory.slots, privacy: PrivacySettings(unsetViewer: .childDirected))
        XCTAssertNil(inventory.show(by: nil), "the ad is non-personalised, and the unset viewer now gets child-directed ads only")
    }

    func testAReloadEndsAdsOfAClassTheirNetworkNoLongerServes() {
        var inventory = Inventory([classedSlot(buffer: 2, [("a", everything)])])
        inventory.answer()
        let held = inventory.loads.map(\.adID)
        XCTAssertEqual(held.count, 2)
        var changed = everything
        changed.servesNonPersonalized = false
        inventory.reconfigure([classedSlot(buffer: 2, [("a", changed)])])
        XCTAssertEqual(Set(inventory.destroyed), Set(held), "no viewer may be shown them any more")
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].ready, 0)
        XCTAssertEqual(inventory.pending, [], "and the slot loads no class the network cannot serve")
    }

    // MARK: Demand per class

    func testBufferSharesFollowDemandAndEveryAskedClassKeepsOne() {
        XCTAssertEqual(BufferTarget.shares(of: 4, weights: [3, 1], floor: [true, true]), [3, 1])
        XCTAssertEqual(BufferTarget.shares(of: 1, weights: [0.5, 0.5], floor: [true, true]), [1, 1])
        XCTAssertEqual(BufferTarget.shares(of: 1, weights: [0.9, 0.1], floor: [true, false]), [1, 0])
        XCTAssertEqual(BufferTarget.shares(of: 5, weights: [1, 1, 1], floor: [false, false, false]), [2, 2, 1], "ties to the earlier")
        XCTAssertEqual(BufferTarget.shares(of: 0, weights: [1, 1], floor: [true, true]), [0, 0], "a slot that keeps none keeps none")
    }

    func testAFixedBufferIsSharedByTheClassesAskedFor() {
        var inventory = Inventory([classedSlot(buffer: 4, [("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        // Three Shows of personalised viewers, one of a non-personalised one, every ad loaded
        // at once to expire at the same moment: their replacements are the shares.
        for (user, viewer) in [("p1", outsideGDPR()), ("p2", outsideGDPR()), ("p3", outsideGDPR()), ("n", outsideGDPR(nonPersonalized: true))] {
            inventory.show(by: viewer, user: user)
            inventory.answer(expiresIn: .seconds(60))
        }
        let before = inventory.loads.count
        inventory.advance(.seconds(50))
        let classes = inventory.loads(since: before).map(\.privacy.privacyClass)
        XCTAssertEqual(classes.count { $0 == .personalized }, 3)
        XCTAssertEqual(classes.count { $0 == .nonPersonalized }, 1)
        XCTAssertFalse(classes.contains(.childDirected), "no child asked: no child-directed ad is held")
    }

    func testInADemandAwareSlotEachClassKeepsWhatItsOwnViewersWouldAlone() {
        let both = busySlot([outsideGDPR(), outsideGDPR(nonPersonalized: true)])
        let personalisedOnly = busySlot([outsideGDPR()])
        let nonPersonalisedOnly = busySlot([outsideGDPR(nonPersonalized: true)])
        let held = both.engine.slotStatuses(at: both.now)[0].readyByClass
        XCTAssertEqual(held[.personalized], personalisedOnly.engine.slotStatuses(at: personalisedOnly.now)[0].ready,
                       "the personalised viewers find as many ads as if they were the slot's only viewers")
        XCTAssertEqual(held[.nonPersonalized], nonPersonalisedOnly.engine.slotStatuses(at: nonPersonalisedOnly.now)[0].ready)
        XCTAssertGreaterThan(held.values.reduce(0, +), both.engine.slotStatuses(at: both.now)[0].target.count,
                             "two classes refilled apart hold more than one pool of the same demand would")
    }

    func testASlotTooRarelyAskedForAnAdOfEachClassHoldsOneThatTheMostViewersMayTake() {
        // A Show every 10 minutes, ads living 10: one ad is likely shown before it expires,
        // one of either class alone is not. Five Shows in nine are personalised viewers'.
        var inventory = Inventory([classedSlot(buffer: 0, bufferMax: 10, [("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        for round in 0..<27 {
            let personalised = round % 9 % 2 == 0
            inventory.show(by: personalised ? outsideGDPR() : outsideGDPR(nonPersonalized: true), user: personalised ? "p" : "n")
            for _ in 0..<10 {
                inventory.answer()
                inventory.advance(.seconds(60))
            }
        }
        inventory.answer()
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].readyByClass, [.nonPersonalized: 1],
                       "a non-personalised ad, which both groups may take, not a personalised one only the larger group may")
    }

    /// A child-directed ad goes to whoever may be shown a non-personalised one, but last:
    /// an adult takes their own class first, and one only when nothing else is ready.
    func testAnAdultIsHandedAChildDirectedAdOnlyWhenNoneOfTheirOwnIsReady() {
        var inventory = Inventory([classedSlot(buffer: 1, [("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        inventory.show(by: outsideGDPR(child: true), user: "c")
        inventory.show(by: outsideGDPR(nonPersonalized: true), user: "n")
        inventory.answer()
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].readyByClass, [.childDirected: 1, .nonPersonalized: 1])
        let first = inventory.show(by: outsideGDPR(nonPersonalized: true), user: "n")
        XCTAssertEqual(first.map { inventory.order(of: $0).privacy.privacyClass }, .nonPersonalized, "the child's ad is left to the child")
        let second = inventory.show(by: outsideGDPR(), user: "p")
        XCTAssertEqual(second.map { inventory.order(of: $0).privacy.privacyClass }, .childDirected,
                       "nothing else ready: a consented adult may be shown the child-directed ad")
        let notForChildren = NetworkPrivacy(gvlID: 1, servesChildren: false)
        XCTAssertFalse(PrivacySettings().allowedClasses(outsideGDPR(), for: notForChildren).contains(.childDirected))
    }

    /// Outside attack on issue 32 (A1): a child-directed load carries a child's signals, or
    /// its flag alone, never those of an adult who may take its ads: not their content rating,
    /// strings or GDPR status.
    func testAChildDirectedLoadNeverCarriesAnAdultsSignals() throws {
        var inventory = Inventory([classedSlot(buffer: 2, [("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        let child = try ViewerPrivacy(PrivacySignals(gdprApplies: .yes, childDirected: true, maxContentRating: .g))
        let adult = try ViewerPrivacy(PrivacySignals(gdprApplies: .no, usPrivacy: "1YYN", nonPersonalized: true, maxContentRating: .ma))
        inventory.show(by: child, user: "c")
        for _ in 0..<6 {
            inventory.answer()
            inventory.show(by: adult, user: "a")
        }
        inventory.answer()
        let childLoads = inventory.loads.filter { $0.privacy.privacyClass == .childDirected }
        XCTAssertFalse(childLoads.isEmpty)
        XCTAssertTrue(childLoads.allSatisfy { $0.privacy == LoadPrivacy(.childDirected, for: child.signals) }, "\(childLoads.map(\.privacy))")

        // Children only on another slot: this one's child-directed loads carry the flag alone.
        var elsewhere = Inventory([classedSlot(id: "s", buffer: 0, bufferMax: 10, [("a", everything)]),
                                   classedSlot(id: "o", buffer: 0, bufferMax: 10, [("b", everything)])],
                                  privacy: PrivacySettings(unsetViewer: nil))
        for round in 0..<36 {
            elsewhere.show("s", by: adult, user: "a")
            if round % 6 == 0 { elsewhere.show("o", by: child, user: "c") }
            elsewhere.advance(.seconds(1))
            elsewhere.answer()
            elsewhere.advance(.seconds(4))
        }
        let atS = elsewhere.loads.filter { $0.slotID == "s" && $0.privacy.privacyClass == .childDirected }
        XCTAssertFalse(atS.isEmpty, "s expects the children of the host")
        XCTAssertTrue(atS.allSatisfy { $0.privacy == LoadPrivacy(.childDirected, for: nil) }, "\(atS.map(\.privacy))")
    }

    /// Outside attack on issue 32 (A2): a plugin's error text and event detail that echo the
    /// load's consent strings reach the journal and other uids' events with each string redacted.
    func testAPluginsTextAboutALoadHasItsConsentStringsRedacted() throws {
        var inventory = Inventory([classedSlot([("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        let tc = tcString(purposes: [1, 2, 3, 4], vendors: [1])
        let viewer = try ViewerPrivacy(PrivacySignals(gdprApplies: .yes, tcString: tc, usPrivacy: "1YNN"))
        inventory.show(by: viewer, user: "v")
        let order = try XCTUnwrap(inventory.pending.first)
        XCTAssertEqual(order.privacy.signals.tcString, tc)
        let effects = inventory.engine.pluginReported(.failed(.noFill, networkCode: 42, message: "GET /ad?gdpr_consent=\(tc)&us_privacy=1YNN"),
                                                      for: order.adID, from: order.plugin, now: inventory.now)
        let messages = effects.compactMap { if case .emit(let event) = $0, event.kind == .adFailed { event.message } else { nil } }
        XCTAssertEqual(messages, ["GET /ad?gdpr_consent=\(ConsentRedaction.redact(tc))&us_privacy=1Y…(4 bytes)"])
    }

    /// A busy slot whose children have not asked yet keeps a child-directed ad when children
    /// ask elsewhere on the host, so the first of them there is served; without children on
    /// the host, it keeps none.
    func testABusySlotExpectsAClassAskedOnAnotherSlotBeforeItsOwnViewersAsk() {
        func host(childrenElsewhere: Bool) -> Inventory {
            var inventory = Inventory([classedSlot(id: "s", buffer: 0, bufferMax: 10, [("a", everything)]),
                                       classedSlot(id: "o", buffer: 0, bufferMax: 10, [("b", everything)])],
                                      privacy: PrivacySettings(unsetViewer: nil))
            for round in 0..<36 {
                inventory.show("s", by: outsideGDPR(), user: "p")
                inventory.show("s", by: outsideGDPR(nonPersonalized: true), user: "n")
                if childrenElsewhere, round % 6 == 0 { inventory.show("o", by: outsideGDPR(child: true), user: "c") }
                inventory.advance(.seconds(1))
                inventory.answer()
                inventory.advance(.seconds(4))
            }
            return inventory
        }
        var withChildren = host(childrenElsewhere: true)
        XCTAssertGreaterThan(withChildren.engine.slotStatuses(at: withChildren.now)[0].readyByClass[.childDirected, default: 0], 0)
        let ad = withChildren.show("s", by: outsideGDPR(child: true), user: "c")
        XCTAssertEqual(ad.map { withChildren.order(of: $0).privacy.privacyClass }, .childDirected, "the first child at s is served")
        let without = host(childrenElsewhere: false)
        XCTAssertNil(without.engine.slotStatuses(at: without.now)[0].readyByClass[.childDirected],
                     "a class nobody on the host asked for holds no ads")
        XCTAssertFalse(without.loads.contains { $0.privacy.privacyClass == .childDirected })
    }

    /// A slot asked too rarely to keep an ad for each group, where every viewer may take a
    /// child-directed ad, keeps one child-directed ad that all of them share; one viewer
    /// who may not (a network that serves only personalised ads to them) ends the pool.
    func testASlotTooRarelyAskedForEachClassPoolsItsAdInTheClassEveryViewerMayTake() {
        var inventory = Inventory([classedSlot(buffer: 0, bufferMax: 10, [("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        // Half the Shows are personalised viewers': enough for a personalised ad of their own,
        // which without the pool would take the slot's one ad from the others.
        let viewers = [outsideGDPR(), outsideGDPR(nonPersonalized: true), outsideGDPR(), outsideGDPR(child: true)]
        var shown: [PrivacyClass] = []
        for round in 0..<36 {
            if let ad = inventory.show(by: viewers[round % 4], user: "u\(round % 4)") { shown.append(inventory.order(of: ad).privacy.privacyClass) }
            for _ in 0..<5 {
                inventory.answer()
                inventory.advance(.seconds(60))
            }
        }
        inventory.answer()
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].readyByClass, [.childDirected: 1])
        XCTAssertEqual(Set(shown.suffix(12)), [.childDirected], "every group is served from the one pool")
        // A viewer who consented to a profile but gave no basis for basic ads may be shown
        // personalised ads only: not the pooled one, which stays for the others.
        let profileOnly = try! ViewerPrivacy(PrivacySignals(gdprApplies: .yes, tcString: tcString(purposes: [1, 3, 4], vendors: [1])))
        XCTAssertEqual(PrivacySettings().allowedClasses(profileOnly, for: everything), [.personalized])
        XCTAssertNil(inventory.show(by: profileOnly, user: "t"), "the pooled ad is not theirs")
        XCTAssertEqual(inventory.engine.slotStatuses(at: inventory.now)[0].readyByClass, [.childDirected: 1])
    }

    func testAClassIsForgottenWhenNobodyAskedForItWithinTheMemory() {
        var inventory = Inventory([classedSlot([("a", everything)])])
        inventory.show(by: outsideGDPR(child: true))
        inventory.answer()
        XCTAssertEqual(inventory.loads.last?.privacy.privacyClass, .childDirected)
        inventory.advance(Engine.classMemory + .seconds(1))
        inventory.answer(expiresIn: .seconds(60))
        let before = inventory.loads.count
        inventory.advance(.seconds(700))  // the ad expires; nothing replaces it
        let after = inventory.loads(since: before)
        XCTAssertFalse(after.isEmpty)
        XCTAssertTrue(after.allSatisfy { $0.privacy.privacyClass == .nonPersonalized }, "cold again: the unset viewer's class only")
    }

    // MARK: Consent

    func testAVendorWithoutConsentIsNeverAskedForAPersonalisedLoadForTheViewer() {
        var inventory = Inventory([classedSlot([("a", NetworkPrivacy(gvlID: 1)), ("b", NetworkPrivacy(gvlID: 2))])],
                                  privacy: PrivacySettings(unsetViewer: nil))
        inventory.show(by: consenting([2]))
        XCTAssertEqual(inventory.loads.map(\.plugin), ["b"], "a has no consent: b is asked though it comes second")
        inventory.answer(fill: false)
        inventory.advance(.seconds(30))
        XCTAssertFalse(inventory.loads.contains { $0.plugin == "a" })
    }

    func testAViewerWhoWithdrewConsentIsNoLongerWhomLoadsAreMadeFor() {
        var inventory = Inventory([classedSlot([("a", NetworkPrivacy(gvlID: 1))])], privacy: PrivacySettings(unsetViewer: nil))
        inventory.show(by: consenting([1]), user: "v")
        XCTAssertEqual(inventory.loads.map(\.privacy.privacyClass), [.personalized])
        inventory.answer()
        inventory.show(by: consenting([]), user: "v")  // the same viewer, consent withdrawn
        let before = inventory.loads.count
        inventory.advance(.seconds(700))  // the ad expires while the slot still wants a personalised one
        XCTAssertEqual(inventory.loads(since: before).count, 0, "v's old consent is sent nowhere")
        inventory.show(by: consenting([1]), user: "w")
        XCTAssertEqual(inventory.loads(since: before).map(\.privacy.signals.tcString), [consenting([1]).signals.tcString])
    }

    /// SetPrivacy withdraws a viewer's signals from what loads carry at once, without a Show
    /// of theirs: a user's record, that user's; the app's own record, all of the app's
    /// viewers'; another user's or another app's change, nothing of theirs.
    func testAnAppThatChangesAViewersRecordStopsLoadsCarryingTheirSignals() {
        let signals = consenting([1]).signals.tcString!
        for (uid, userID, stillSent) in [(UInt32(1000), "v", false), (1000, "", false), (1000, "w", true), (1001, "", true), (1001, "v", true)] {
            var inventory = Inventory([classedSlot([("a", NetworkPrivacy(gvlID: 1))])], privacy: PrivacySettings(unsetViewer: nil))
            inventory.show(by: consenting([1]), user: "v", app: 1000)
            inventory.answer()
            inventory.engine.forgetViewers(uid: uid, userID: userID)
            let before = inventory.loads.count
            inventory.advance(.seconds(700))  // the ad expires while the slot still wants a personalised one
            let sent = inventory.loads(since: before).compactMap(\.privacy.signals.tcString)
            XCTAssertEqual(sent.contains(signals), stillSent, "uid 1000's v, after uid \(uid) changed \"\(userID)\": \(sent.count) loads")
            XCTAssertEqual(sent.isEmpty, !stillSent, "no other viewer's signals are sent in theirs' place")
        }
    }

    // MARK: Plugins built for ABI 1.3

    func testOnlyAPersonalisedLoadWithoutAnySignalNeedsNoSignals() {
        XCTAssertFalse(LoadPrivacy(.personalized, for: nil).needsSignals)
        XCTAssertFalse(LoadPrivacy(.personalized, for: PrivacySignals(gdprApplies: .no)).needsSignals)
        XCTAssertTrue(LoadPrivacy(.personalized, for: PrivacySignals(gdprApplies: .yes)).needsSignals)
        XCTAssertTrue(LoadPrivacy(.personalized, for: PrivacySignals(gdprApplies: .no, usPrivacy: "1NNN")).needsSignals)
        XCTAssertTrue(LoadPrivacy(.personalized, for: PrivacySignals(maxContentRating: .pg)).needsSignals)
        XCTAssertTrue(LoadPrivacy(.nonPersonalized, for: nil).needsSignals)
        XCTAssertTrue(LoadPrivacy(.childDirected, for: nil).needsSignals)
    }

    func testAPluginThatCannotReceiveSignalsIsAskedOnlyForLoadsThatNeedNone() {
        let slots = [classedSlot([("a", everything.deaf()), ("b", everything)])]
        var inventory = Inventory(slots)
        XCTAssertEqual(inventory.loads.map(\.plugin), ["b"], "non-personalised needs its flag")
        inventory = Inventory(slots, privacy: PrivacySettings(unsetViewer: .personalized))
        XCTAssertEqual(inventory.loads.map(\.plugin), ["a"])
        inventory.answer()
        inventory.show(by: consenting([1]))
        inventory.advance(.seconds(1))
        XCTAssertEqual(inventory.loads.dropFirst().map(\.plugin), ["b"], "a TC string is a signal a cannot be given")
    }

    // MARK: Load

    func testALoadAsksEachEntryForTheBestClassTheViewerAllowsThere() {
        let banner = SlotConfig(id: "b", format: .banner, waterfall: [
            WaterfallEntry(plugin: "a", adUnitID: "a", privacy: NetworkPrivacy(gvlID: 1)),
            WaterfallEntry(plugin: "b", adUnitID: "b", privacy: NetworkPrivacy(gvlID: 2)),
        ])
        var inventory = Inventory([banner])
        let viewer = try! ViewerPrivacy(PrivacySignals(gdprApplies: .yes, tcString: tcString(purposes: [1, 2], vendors: [1, 2])))
        let (accepted, effects) = inventory.engine.load(slot: "b", LoadParameters(width: 320, height: 50), privacy: viewer, request: 1,
                                                         now: inventory.now)
        XCTAssertNoThrow(try accepted.get())
        inventory.take(effects)
        XCTAssertEqual(inventory.loads.map(\.privacy.privacyClass), [.nonPersonalized], "no profile consent: not personalised")
        inventory.answer(fill: false)
        XCTAssertEqual(inventory.loads.map(\.plugin), ["a", "b"])
        let (_, refused) = inventory.engine.load(slot: "b", LoadParameters(width: 320, height: 50), privacy: consenting([]), request: 2,
                                                 now: inventory.now)
        guard case .completeLoad(2, .failure(let failure)) = refused.last else { return XCTFail("\(refused)") }
        XCTAssertEqual(failure.attempts, [], "no entry may serve a viewer who consented to no vendor")
    }

    // MARK: Interactive sessions

    func testASessionIsFetchedUnderTheBestClassTheViewerAllowsOrRefused() throws {
        let slot = SlotConfig(id: "i", format: .interactive, buffer: 0,
                              waterfall: [WaterfallEntry(plugin: "p", adUnitID: "u", privacy: NetworkPrivacy(gvlID: 1))])
        let request = InteractiveRequest(creativeURL: "https://x.invalid/c.js", adParametersJSON: "{}", slotType: .midroll)
        var sessions = InteractiveSessions()
        func privacy(_ effects: [Effect]) -> LoadPrivacy? { effects.compactMap { if case .load(let o) = $0 { o.privacy } else { nil } }.first }
        let unset = try sessions.initiate(1, slot: slot, plugin: slot.waterfall[0], viewer: nil, request: request, owner: 7, now: .zero).get()
        XCTAssertEqual(privacy(unset), LoadPrivacy(.nonPersonalized, for: nil))
        let consented = try sessions.initiate(2, slot: slot, plugin: slot.waterfall[0], viewer: consenting([1]), request: request, owner: 7, now: .zero).get()
        XCTAssertEqual(privacy(consented), LoadPrivacy(.personalized, for: consenting([1]).signals))
        XCTAssertEqual(sessions.initiate(3, slot: slot, plugin: slot.waterfall[0], viewer: consenting([2]), request: request, owner: 7, now: .zero).failureValue,
                       .unavailable(slot: "i", reason: "p may serve this viewer no ad their privacy signals allow"))
        XCTAssertEqual(sessions.liveCount(in: "i"), 2, "the refusal changed nothing")
    }

    /// A demand-aware slot asked by each of `viewers` every 5 s, its loads answered 1 s after
    /// they were asked: what it holds after 3 minutes.
    private func busySlot(_ viewers: [ViewerPrivacy]) -> Inventory {
        var inventory = Inventory([classedSlot(buffer: 0, bufferMax: 10, [("a", everything)])], privacy: PrivacySettings(unsetViewer: nil))
        for _ in 0..<36 {
            for (index, viewer) in viewers.enumerated() { inventory.show(by: viewer, user: "u\(index)") }
            inventory.advance(.seconds(1))
            inventory.answer()
            inventory.advance(.seconds(4))
        }
        return inventory
    }
}
