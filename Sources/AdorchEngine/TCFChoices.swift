import AdorchPrivacy

/// The TCF v2 purposes the privacy classes rest on, by their numbers in the policy.
public enum TCFPurpose: Int, CaseIterable, Sendable {
    /// Store and/or access information on a device.
    case storeAndAccess = 1
    /// Use limited data to select advertising (basic ads).
    case basicAds = 2
    /// Create profiles for personalised advertising.
    case adsProfile = 3
    /// Use profiles to select personalised advertising.
    case personalizedAds = 4

    /// The policy lets a vendor rely on its legitimate interest for basic ads only: storage and
    /// the personalised-ads purposes need consent.
    var allowsLegitimateInterest: Bool { self == .basicAds }
}

/// What a decoded TC string says about the purposes of `TCFPurpose`: the viewer's choices,
/// the vendors', and the publisher's restrictions. Nothing else of the string decides a class.
public struct TCFChoices: Sendable, Equatable {
    /// One publisher restriction on a purpose of `TCFPurpose`.
    public struct Restriction: Sendable, Equatable {
        public var purpose: TCFPurpose
        public var type: PublisherRestriction.RestrictionType
        public var vendors: IDSet

        public init(purpose: TCFPurpose, type: PublisherRestriction.RestrictionType, vendors: IDSet) {
            (self.purpose, self.type, self.vendors) = (purpose, type, vendors)
        }
    }

    public var purposesConsented: Set<TCFPurpose>
    public var purposesLegitimateInterest: Set<TCFPurpose>
    public var vendorsConsented: IDSet
    public var vendorsLegitimateInterest: IDSet
    public var restrictions: [Restriction]

    public init(purposesConsented: Set<TCFPurpose>, purposesLegitimateInterest: Set<TCFPurpose>, vendorsConsented: IDSet,
                vendorsLegitimateInterest: IDSet, restrictions: [Restriction] = []) {
        self.purposesConsented = purposesConsented
        self.purposesLegitimateInterest = purposesLegitimateInterest
        self.vendorsConsented = vendorsConsented
        self.vendorsLegitimateInterest = vendorsLegitimateInterest
        self.restrictions = restrictions
    }

    public init(_ string: TCString) {
        self.init(
            purposesConsented: Set(TCFPurpose.allCases.filter { string.purposeConsented($0.rawValue) }),
            purposesLegitimateInterest: Set(TCFPurpose.allCases.filter { string.purposeLegitimateInterest($0.rawValue) }),
            // The decoder refuses a vendor above its section's MaxVendorId: the sets alone answer as the sections would.
            vendorsConsented: string.vendorConsents.vendors,
            vendorsLegitimateInterest: string.vendorLegitimateInterests.vendors,
            restrictions: string.publisherRestrictions.compactMap { restriction in
                TCFPurpose(rawValue: restriction.purposeId).map { Restriction(purpose: $0, type: restriction.restrictionType, vendors: restriction.vendors) }
            }
        )
    }

    /// The classes these choices allow `vendor`, before the other signals: personalised when it
    /// may store (1), build a profile (3) and select by it (4); non-personalised when it may
    /// store and select basic ads (2).
    func allowedClasses(vendor: Int) -> Set<PrivacyClass> {
        guard allows(.storeAndAccess, vendor: vendor) else { return [] }
        var classes: Set<PrivacyClass> = []
        if allows(.adsProfile, vendor: vendor), allows(.personalizedAds, vendor: vendor) { classes.insert(.personalized) }
        if allows(.basicAds, vendor: vendor) { classes.insert(.nonPersonalized) }
        return classes
    }

    private enum LegalBasis {
        case consent
        case legitimateInterest
    }

    /// Whether `vendor` may process for `purpose`: on consent (the viewer's for the purpose and
    /// for the vendor) or, where the policy allows it, on legitimate interest (not objected to,
    /// for the purpose and for the vendor), on a basis the publisher's restrictions leave.
    private func allows(_ purpose: TCFPurpose, vendor: Int) -> Bool {
        var bases: Set<LegalBasis> = purpose.allowsLegitimateInterest ? [.consent, .legitimateInterest] : [.consent]
        // Several restrictions for one purpose and vendor (the specification allows one) each narrow it.
        for restriction in restrictions where restriction.purpose == purpose && restriction.vendors.contains(vendor) {
            switch restriction.type {
            // Type 3 has no meaning in the specification: what the publisher meant by it
            // cannot be known, so it is read as the strictest.
            case .notAllowed, .undefined: bases = []
            case .requireConsent: bases.remove(.legitimateInterest)
            case .requireLegitimateInterest: bases.remove(.consent)
            }
        }
        return bases.contains { basis in
            switch basis {
            case .consent: purposesConsented.contains(purpose) && vendorsConsented.contains(vendor)
            case .legitimateInterest: purposesLegitimateInterest.contains(purpose) && vendorsLegitimateInterest.contains(vendor)
            }
        }
    }
}
