import AdorchEngine
import AdorchPrivacy
import Foundation
import XCTest

/// The privacy classes a viewer's signals allow a network (docs/privacy.md, "Classes"): each
/// rule on its own, the state read from decoded strings, and a randomized property test.
final class PrivacyClassTests: XCTestCase {
    private static let vendor = 42
    /// A TCF vendor that serves every class.
    /// The consent rules' network: it does not serve children, so what it allows is personalised
    /// or non-personalised only (the child-directed class has tests of its own, on `forChildren`).
    private let network = NetworkPrivacy(gvlID: PrivacyClassTests.vendor, servesChildren: false, servesNonPersonalized: true)
    private let forChildren = NetworkPrivacy(gvlID: PrivacyClassTests.vendor, servesChildren: true, servesNonPersonalized: true)

    private func vendors(_ ids: Int...) -> IDSet { IDSet(merging: ids.map { $0...$0 }) }

    /// Every purpose the classes read consented, basic ads on legitimate interest too, and
    /// the vendor's consent and legitimate interest.
    private func consented(_ purposes: Set<TCFPurpose> = Set(TCFPurpose.allCases), legitimateInterest: Set<TCFPurpose> = [.basicAds],
                           vendorConsent: Bool = true, vendorLegitimateInterest: Bool = true,
                           restrictions: [TCFChoices.Restriction] = []) -> TCFChoices {
        TCFChoices(purposesConsented: purposes, purposesLegitimateInterest: legitimateInterest,
                   vendorsConsented: vendorConsent ? vendors(Self.vendor) : vendors(),
                   vendorsLegitimateInterest: vendorLegitimateInterest ? vendors(Self.vendor) : vendors(), restrictions: restrictions)
    }

    private func underGDPR(_ choices: TCFChoices?, for network: NetworkPrivacy? = nil) -> Set<PrivacyClass> {
        PrivacyState(gdprApplies: .yes, tcf: choices).allowedClasses(for: network ?? self.network, gdprWhenUnknown: false)
    }

    // MARK: children

    func testAChildGetsOnlyChildDirectedAdsAndOnlyFromANetworkThatServesChildren() {
        let notForChildren = NetworkPrivacy(gvlID: Self.vendor, servesChildren: false)
        for child in [PrivacyState(gdprApplies: .no, childDirected: true), PrivacyState(gdprApplies: .no, underAgeOfConsent: true),
                      PrivacyState(gdprApplies: .yes, tcf: consented(), childDirected: true),
                      PrivacyState(gdprApplies: .unknown, underAgeOfConsent: true)] {
            XCTAssertEqual(child.allowedClasses(for: forChildren, gdprWhenUnknown: true), [.childDirected], "\(child)")
            XCTAssertEqual(child.allowedClasses(for: notForChildren, gdprWhenUnknown: true), [], "\(child)")
        }
    }

    /// A child-directed ad carries no profile: whoever may be shown a non-personalised ad of
    /// the network may be shown it, and nobody else.
    func testAChildDirectedAdGoesToWhoeverMayBeShownANonPersonalisedOne() {
        XCTAssertEqual(PrivacyState(gdprApplies: .no).allowedClasses(for: forChildren, gdprWhenUnknown: false),
                       [.personalized, .nonPersonalized, .childDirected])
        XCTAssertEqual(PrivacyState(gdprApplies: .no, nonPersonalized: true).allowedClasses(for: forChildren, gdprWhenUnknown: false),
                       [.nonPersonalized, .childDirected])
        XCTAssertEqual(PrivacyState(gdprApplies: .no, optedOutInTheUS: true).allowedClasses(for: forChildren, gdprWhenUnknown: false),
                       [.nonPersonalized, .childDirected])
        XCTAssertEqual(underGDPR(nil, for: forChildren), [], "no TC string where the GDPR applies: not even a child-directed ad")
        XCTAssertEqual(underGDPR(consented([.storeAndAccess, .adsProfile, .personalizedAds], legitimateInterest: []), for: forChildren), [.personalized],
                       "no basis for basic ads: no non-personalised ad, so no child-directed one")
        XCTAssertEqual(PrivacyState(gdprApplies: .no).allowedClasses(for: network, gdprWhenUnknown: false),
                       [.personalized, .nonPersonalized], "a network that does not serve children has no child-directed ad")
        // Outside attack on issue 32 (A5): a network that cannot serve non-personalised ads
        // gets nothing from a viewer who allows only those, its child-directed ads included.
        let noNPA = NetworkPrivacy(gvlID: Self.vendor, servesChildren: true, servesNonPersonalized: false)
        XCTAssertEqual(PrivacyState(gdprApplies: .no, nonPersonalized: true).allowedClasses(for: noNPA, gdprWhenUnknown: false), [])
        XCTAssertEqual(PrivacyState(gdprApplies: .no).allowedClasses(for: noNPA, gdprWhenUnknown: false), [.personalized])
        XCTAssertEqual(PrivacySettings().allowedClasses(nil, for: forChildren), [.nonPersonalized, .childDirected],
                       "a viewer who set nothing, allowed non-personalised ads by default, may take child-directed ones too")
    }

    // MARK: GDPR

    func testWhereTheGDPRAppliesNoTCStringAllowsNothing() {
        XCTAssertEqual(underGDPR(nil), [])
        let unknown = PrivacyState(gdprApplies: .unknown)
        XCTAssertEqual(unknown.allowedClasses(for: network, gdprWhenUnknown: true), [], "unknown is GDPR when the default says so")
        XCTAssertEqual(unknown.allowedClasses(for: network, gdprWhenUnknown: false), [.personalized, .nonPersonalized])
        XCTAssertEqual(PrivacyState(gdprApplies: .no).allowedClasses(for: network, gdprWhenUnknown: true), [.personalized, .nonPersonalized])
    }

    func testANetworkWithoutAVendorIDGetsNothingUnderTheGDPR() {
        XCTAssertEqual(underGDPR(consented(), for: NetworkPrivacy(servesChildren: true)), [])
        XCTAssertEqual(PrivacyState(gdprApplies: .no).allowedClasses(for: NetworkPrivacy(), gdprWhenUnknown: true),
                       [.personalized, .nonPersonalized], "outside the GDPR no vendor id is needed")
    }

    func testPersonalizedNeedsStorageAndProfileConsentAndTheVendorsConsent() {
        XCTAssertEqual(underGDPR(consented()), [.personalized, .nonPersonalized])
        XCTAssertEqual(underGDPR(consented([.storeAndAccess, .basicAds, .personalizedAds])), [.nonPersonalized], "no purpose 3")
        XCTAssertEqual(underGDPR(consented([.storeAndAccess, .basicAds, .adsProfile])), [.nonPersonalized], "no purpose 4")
        XCTAssertEqual(underGDPR(consented([.basicAds, .adsProfile, .personalizedAds])), [], "no purpose 1: nothing may be stored")
        XCTAssertEqual(underGDPR(consented(vendorConsent: false)), [], "storage rests on the vendor's consent")
        // Legitimate interest for purposes 1, 3 and 4 counts for nothing: the policy allows only consent.
        XCTAssertEqual(underGDPR(consented([.storeAndAccess, .basicAds], legitimateInterest: Set(TCFPurpose.allCases))), [.nonPersonalized])
        XCTAssertEqual(underGDPR(consented([], legitimateInterest: Set(TCFPurpose.allCases))), [])
        let otherVendor = NetworkPrivacy(gvlID: Self.vendor + 1, servesNonPersonalized: true)
        XCTAssertEqual(underGDPR(consented(), for: otherVendor), [], "the consent is the vendor's own")
    }

    func testNonPersonalizedNeedsStorageAndBasicAdsByConsentOrLegitimateInterest() {
        XCTAssertEqual(underGDPR(consented([.storeAndAccess, .basicAds], legitimateInterest: [], vendorLegitimateInterest: false)), [.nonPersonalized])
        XCTAssertEqual(underGDPR(consented([.storeAndAccess], legitimateInterest: [.basicAds])), [.nonPersonalized], "basic ads on legitimate interest")
        XCTAssertEqual(underGDPR(consented([.storeAndAccess], legitimateInterest: [.basicAds], vendorLegitimateInterest: false)), [],
                       "legitimate interest needs the vendor's too")
        XCTAssertEqual(underGDPR(consented([.storeAndAccess], legitimateInterest: [])), [], "no basis for basic ads")
        XCTAssertEqual(underGDPR(consented([.storeAndAccess, .basicAds]), for: NetworkPrivacy(gvlID: Self.vendor, servesNonPersonalized: false)), [],
                       "a network that cannot serve non-personalised ads gets none")
        XCTAssertEqual(underGDPR(consented([.storeAndAccess, .adsProfile, .personalizedAds], legitimateInterest: [])), [.personalized],
                       "personalised ads do not need purpose 2")
    }

    func testPublisherRestrictionsNarrowTheBases() {
        func restricted(_ purpose: TCFPurpose, _ type: PublisherRestriction.RestrictionType, vendor: Int = PrivacyClassTests.vendor) -> TCFChoices.Restriction {
            TCFChoices.Restriction(purpose: purpose, type: type, vendors: vendors(vendor))
        }
        XCTAssertEqual(underGDPR(consented(restrictions: [restricted(.storeAndAccess, .notAllowed)])), [])
        XCTAssertEqual(underGDPR(consented(restrictions: [restricted(.adsProfile, .notAllowed)])), [.nonPersonalized])
        XCTAssertEqual(underGDPR(consented(restrictions: [restricted(.basicAds, .notAllowed)])), [.personalized])
        XCTAssertEqual(underGDPR(consented(restrictions: [restricted(.storeAndAccess, .notAllowed, vendor: Self.vendor + 1)])),
                       [.personalized, .nonPersonalized], "another vendor's restriction")
        // Type 1, require consent: basic ads on legitimate interest no longer count.
        let onLegitimateInterest = consented([.storeAndAccess, .adsProfile, .personalizedAds], legitimateInterest: [.basicAds])
        XCTAssertEqual(underGDPR(onLegitimateInterest), [.personalized, .nonPersonalized])
        XCTAssertEqual(underGDPR(onLegitimateInterest.restricted(restricted(.basicAds, .requireConsent))), [.personalized])
        XCTAssertEqual(underGDPR(consented(legitimateInterest: []).restricted(restricted(.basicAds, .requireConsent))), [.personalized, .nonPersonalized])
        // Type 2, require legitimate interest: consent no longer counts, and purposes that allow
        // only consent cannot be met at all.
        XCTAssertEqual(underGDPR(consented(legitimateInterest: []).restricted(restricted(.basicAds, .requireLegitimateInterest))), [.personalized])
        XCTAssertEqual(underGDPR(consented().restricted(restricted(.basicAds, .requireLegitimateInterest))), [.personalized, .nonPersonalized])
        XCTAssertEqual(underGDPR(consented().restricted(restricted(.personalizedAds, .requireLegitimateInterest))), [.nonPersonalized])
        XCTAssertEqual(underGDPR(consented().restricted(restricted(.storeAndAccess, .requireLegitimateInterest))), [])
        // Type 3 has no meaning: the strictest reading.
        XCTAssertEqual(underGDPR(consented().restricted(restricted(.basicAds, .undefined))), [.personalized])
        // Two restrictions on one purpose both hold.
        XCTAssertEqual(underGDPR(consented().restricted(restricted(.basicAds, .requireConsent)).restricted(restricted(.basicAds, .requireLegitimateInterest))),
                       [.personalized])
    }

    // MARK: the US, and non-personalised on request

    func testAUSOptOutLeavesNonPersonalizedOnly() {
        let optedOut = PrivacyState(gdprApplies: .no, optedOutInTheUS: true)
        XCTAssertEqual(optedOut.allowedClasses(for: network, gdprWhenUnknown: false), [.nonPersonalized])
        XCTAssertEqual(optedOut.allowedClasses(for: NetworkPrivacy(servesNonPersonalized: false), gdprWhenUnknown: false), [])
        XCTAssertEqual(PrivacyState(gdprApplies: .yes, tcf: consented(), optedOutInTheUS: true).allowedClasses(for: network, gdprWhenUnknown: false),
                       [.nonPersonalized], "both laws hold at once")
    }

    func testTheNonPersonalizedFlagLeavesNonPersonalizedOnly() {
        let flagged = PrivacyState(gdprApplies: .no, nonPersonalized: true)
        XCTAssertEqual(flagged.allowedClasses(for: network, gdprWhenUnknown: false), [.nonPersonalized])
        XCTAssertEqual(flagged.allowedClasses(for: NetworkPrivacy(servesNonPersonalized: false), gdprWhenUnknown: false), [])
        XCTAssertEqual(PrivacyState(gdprApplies: .yes, tcf: consented(), nonPersonalized: true).allowedClasses(for: network, gdprWhenUnknown: false),
                       [.nonPersonalized])
    }

    func testOtherwisePersonalizedAndNonPersonalizedWhereTheNetworkServesIt() {
        let anyone = PrivacyState(gdprApplies: .no)
        XCTAssertEqual(anyone.allowedClasses(for: network, gdprWhenUnknown: false), [.personalized, .nonPersonalized])
        XCTAssertEqual(anyone.allowedClasses(for: NetworkPrivacy(servesNonPersonalized: false), gdprWhenUnknown: false), [.personalized])
    }

    // MARK: the state from decoded strings

    /// Purposes 1 to 4 consented, 2 on legitimate interest too, vendor 42's consent and
    /// legitimate interest; written for this test by a throwaway encoder, checked here as decoded.
    private let consentedTCString = "CO5rKAAO5rKAAAHABAENAwEgAPAAAEAAAAYgAVAAAAAAAQAqAAAAAAAgAA"
    /// As above, vendor 43's consent too, and two restrictions for vendor 42: purpose 3 not
    /// allowed (type 0), purpose 2 requires consent (type 1).
    private let restrictedTCString = "CO5rKAAO5rKAAAHABAENAwEgAPAAAEAAAAYgAVgAAAAAAYAVAAAAAAAQAgwAEAFQSACACoA"

    func testTheTCFChoicesAreWhatTheStringSays() throws {
        XCTAssertEqual(TCFChoices(try TCString.decode(consentedTCString)), consented())
        let restricted = TCFChoices(try TCString.decode(restrictedTCString))
        XCTAssertEqual(restricted.vendorsConsented, vendors(42, 43))
        XCTAssertEqual(restricted.restrictions, [
            TCFChoices.Restriction(purpose: .adsProfile, type: .notAllowed, vendors: vendors(42)),
            TCFChoices.Restriction(purpose: .basicAds, type: .requireConsent, vendors: vendors(42)),
        ])
        XCTAssertEqual(underGDPR(restricted), [.nonPersonalized])
        XCTAssertEqual(underGDPR(restricted, for: NetworkPrivacy(gvlID: 43)), [.personalized, .nonPersonalized])
    }

    func testTheStateFromStrings() throws {
        let tcString = try TCString.decode(consentedTCString)
        func state(gdpr: GDPRApplies = .no, tc: TCString? = nil, gpp: [GPPSection] = [], us: String = "") throws -> PrivacyState {
            PrivacyState(gdprApplies: gdpr, tcString: tc, gppSections: gpp, usPrivacy: try USPrivacy.decode(us), childDirected: false)
        }
        XCTAssertEqual(try state(gdpr: .yes, tc: tcString), PrivacyState(gdprApplies: .yes, tcf: consented()))
        XCTAssertEqual(try state(), PrivacyState(gdprApplies: .no))
        XCTAssertEqual(PrivacyState(gdprApplies: .no, tcString: nil, usPrivacy: nil, childDirected: true, underAgeOfConsent: true, nonPersonalized: true),
                       PrivacyState(gdprApplies: .no, childDirected: true, underAgeOfConsent: true, nonPersonalized: true))

        // US Privacy: only `Y` in the third place is an opt-out; GPP's uspv1 reads the same.
        XCTAssertTrue(try state(us: "1NYN").optedOutInTheUS)
        XCTAssertFalse(try state(us: "1YNN").optedOutInTheUS)
        XCTAssertFalse(try state(us: "1---").optedOutInTheUS)
        XCTAssertTrue(try state(gpp: [.usPrivacy(XCTUnwrap(USPrivacy.decode("1YYY")))]).optedOutInTheUS)
        XCTAssertFalse(try state(gpp: [.usPrivacy(XCTUnwrap(USPrivacy.decode("1YNY")))]).optedOutInTheUS)

        // US National (version 2, every notice given): sale, sharing, targeted advertising;
        // 1 is opted out, 2 not. The last two have a GPC subsection, set and not.
        let usNational: [(string: String, optedOut: Bool)] = [
            ("CVVqAAAAAACA", false), ("CVVaAAAAAACA", true), ("CVVmAAAAAACA", true), ("CVVpAAAAAACA", true),
            ("CVVqAAAAAACA.YA", true), ("CVVqAAAAAACA.QA", false),
        ]
        for (string, optedOut) in usNational {
            let section = try USNational.decode(string)
            XCTAssertEqual(section.optedOutOfSaleSharingOrTargetedAdvertising, [section.saleOptOut, section.sharingOptOut, section.targetedAdvertisingOptOut] != [2, 2, 2])
            XCTAssertEqual(try state(gpp: [.usNational(section)]).optedOutInTheUS, optedOut, string)
        }

        // Through a whole GPP string and its applicable sections: US National opted out of targeted advertising.
        let gpp = try GPPString.decode("DBABLA~CVVpAAAAAACA")
        XCTAssertTrue(try state(gpp: try gpp.applicableSections(gppSid: [7])).optedOutInTheUS)
        XCTAssertFalse(try state(gpp: try gpp.applicableSections(gppSid: [])).optedOutInTheUS, "a section that does not apply says nothing")

        // A section not decoded counts as an opt-out.
        XCTAssertTrue(try state(gpp: [.unsupported(id: 8, encoded: "BAAAAABA.QA")]).optedOutInTheUS)

        // GPP's TCF EU section: the TC string when none was passed on its own, and the GDPR applies.
        let gppTC = try GPPString.decode("DBABMA~" + consentedTCString)
        let fromGPP = try state(gdpr: .unknown, gpp: try gppTC.applicableSections(gppSid: [2]))
        XCTAssertEqual(fromGPP, PrivacyState(gdprApplies: .yes, tcf: consented()))
        XCTAssertEqual(try state(gdpr: .no, gpp: try gppTC.applicableSections(gppSid: [2])).gdprApplies, .no, "the app's own word stands")
        let own = try TCString.decode(restrictedTCString)
        XCTAssertEqual(try state(gdpr: .yes, tc: own, gpp: try gppTC.applicableSections(gppSid: [2])).tcf, TCFChoices(own),
                       "the TC string passed on its own wins")
    }

    /// The vectors of shared/data/consent that carry publisher restrictions (T2-10: purpose 1
    /// not allowed for vendor 32; purpose 2 not allowed for 5, 11 and 32) read as the page says.
    func testTheVectorsRestrictionsReadAsThePageSays() throws {
        let choices = TCFChoices(try TCString.decode(try vector("T2-10", in: "tcf-vectors.md")))
        // The string consents to nothing: give every vendor everything, so only the restrictions decide.
        let everyone = IDSet(merging: [1...1000])
        let open = TCFChoices(purposesConsented: Set(TCFPurpose.allCases), purposesLegitimateInterest: [.basicAds], vendorsConsented: everyone,
                              vendorsLegitimateInterest: everyone, restrictions: choices.restrictions)
        XCTAssertEqual(underGDPR(open, for: NetworkPrivacy(gvlID: 32)), [])
        XCTAssertEqual(underGDPR(open, for: NetworkPrivacy(gvlID: 5)), [.personalized])
        XCTAssertEqual(underGDPR(open, for: NetworkPrivacy(gvlID: 11)), [.personalized])
        XCTAssertEqual(underGDPR(open, for: NetworkPrivacy(gvlID: 44)), [.personalized, .nonPersonalized])
        XCTAssertEqual(underGDPR(open, for: NetworkPrivacy(gvlID: 500)), [.personalized, .nonPersonalized])
        XCTAssertEqual(underGDPR(choices, for: NetworkPrivacy(gvlID: 44)), [], "as the string has it, nothing is consented")
    }

    // MARK: property

    /// Random viewers and networks: a child gets child-directed ads at most; an opt-out never
    /// personalised ones; the GDPR without a TC string nothing; and a network only what it serves.
    func testRandomViewersAndNetworksKeepTheInvariants() {
        let seed = ProcessInfo.processInfo.environment["ADORCH_PRIVACY_SEED"].flatMap { UInt64($0) } ?? 0x5EED_C1A5
        var random = SplitMix64(seed: seed)
        func chance(_ generator: inout SplitMix64) -> Bool { generator.next() & 1 == 1 }
        func someOf(_ ids: ClosedRange<Int>, _ generator: inout SplitMix64) -> IDSet {
            IDSet(merging: ids.filter { _ in chance(&generator) }.map { $0...$0 })
        }
        let purposes = TCFPurpose.allCases
        let types: [PublisherRestriction.RestrictionType] = [.notAllowed, .requireConsent, .requireLegitimateInterest, .undefined]
        for index in 0..<5000 {
            let tcf: TCFChoices? = chance(&random) ? nil : TCFChoices(
                purposesConsented: Set(purposes.filter { _ in chance(&random) }),
                purposesLegitimateInterest: Set(purposes.filter { _ in chance(&random) }),
                vendorsConsented: someOf(1...8, &random), vendorsLegitimateInterest: someOf(1...8, &random),
                restrictions: (0..<Int(random.next() % 3)).map { _ in
                    TCFChoices.Restriction(purpose: purposes.randomElement(using: &random)!, type: types.randomElement(using: &random)!,
                                           vendors: someOf(1...8, &random))
                }
            )
            let viewer = PrivacyState(
                gdprApplies: [GDPRApplies.yes, .no, .unknown].randomElement(using: &random)!, tcf: tcf,
                optedOutInTheUS: random.next() % 4 == 0, childDirected: random.next() % 8 == 0,
                underAgeOfConsent: random.next() % 8 == 0, nonPersonalized: random.next() % 4 == 0
            )
            let network = NetworkPrivacy(gvlID: random.next() % 5 == 0 ? nil : Int(1 + random.next() % 8),
                                         servesChildren: chance(&random), servesNonPersonalized: chance(&random))
            let gdprWhenUnknown = chance(&random)
            let allowed = viewer.allowedClasses(for: network, gdprWhenUnknown: gdprWhenUnknown)
            let context = "case \(index) of seed \(seed) (ADORCH_PRIVACY_SEED=\(seed) replays it): \(viewer), \(network), gdprWhenUnknown \(gdprWhenUnknown)"
            XCTAssertTrue(allowed.isSubset(of: network.servedClasses), context)
            if viewer.childDirected || viewer.underAgeOfConsent {
                XCTAssertTrue(allowed.isSubset(of: [.childDirected]), context)
            } else {
                if network.servesNonPersonalized, network.servesChildren {
                    XCTAssertEqual(allowed.contains(.childDirected), allowed.contains(.nonPersonalized), context)
                }
                if viewer.optedOutInTheUS || viewer.nonPersonalized { XCTAssertFalse(allowed.contains(.personalized), context) }
                let gdpr = viewer.gdprApplies == .yes || (viewer.gdprApplies == .unknown && gdprWhenUnknown)
                if gdpr, viewer.tcf == nil || network.gvlID == nil { XCTAssertEqual(allowed, [], context) }
                if gdpr, let tcf = viewer.tcf, let vendor = network.gvlID, allowed.contains(.personalized) {
                    XCTAssertTrue(tcf.vendorsConsented.contains(vendor), "personalised only with the vendor's consent: \(context)")
                }
            }
            // The first failing case says it all; thousands more would bury it.
            if (testRun?.failureCount ?? 0) > 0 { break }
        }
    }

    /// The string of entry `id` of a page of shared/data/consent, beside the package; an
    /// XCTSkip when the folder is absent (a clone outside the project's tree).
    private func vector(_ id: String, in page: String) throws -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/data/consent/\(page)").standardizedFileURL
        guard let text = try? String(contentsOf: url, encoding: .utf8) else {
            throw XCTSkip("the consent vectors are in the shared folder beside the package, and \(url.path) is absent")
        }
        let lines = text.components(separatedBy: "\n")
        let heading = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("### \(id) ") }, "\(page) has no entry \(id)")
        let fence = try XCTUnwrap(lines[heading...].firstIndex { $0.hasPrefix("```") }, "\(id) has no code block")
        return lines[fence + 1]
    }
}

private extension TCFChoices {
    func restricted(_ restriction: Restriction) -> TCFChoices {
        var choices = self
        choices.restrictions.append(restriction)
        return choices
    }
}
