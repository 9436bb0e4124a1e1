import AdorchPrivacy

/// A viewer's privacy signals, decoded, and which privacy classes they allow a network
/// (docs/privacy.md, "Classes").
public struct PrivacyState: Sendable, Equatable {
    public var gdprApplies: GDPRApplies
    /// The viewer's TCF choices; nil when the app passed no TC string.
    public var tcf: TCFChoices?
    /// Opted out of the sale or sharing of their data, or of targeted advertising, under a
    /// US law: from the US Privacy string, GPP's uspv1 or US National section (or a GPP section
    /// that applies and is not decoded, see the initializer from strings).
    public var optedOutInTheUS: Bool
    /// The app is directed to children (COPPA), or says this viewer is a child.
    public var childDirected: Bool
    /// The viewer is under the age of digital consent (GDPR article 8).
    public var underAgeOfConsent: Bool
    /// The app asked for non-personalised ads: limited ad tracking, or its own choice.
    public var nonPersonalized: Bool

    public init(gdprApplies: GDPRApplies = .unknown, tcf: TCFChoices? = nil, optedOutInTheUS: Bool = false, childDirected: Bool = false,
                underAgeOfConsent: Bool = false, nonPersonalized: Bool = false) {
        self.gdprApplies = gdprApplies
        self.tcf = tcf
        self.optedOutInTheUS = optedOutInTheUS
        self.childDirected = childDirected
        self.underAgeOfConsent = underAgeOfConsent
        self.nonPersonalized = nonPersonalized
    }

    /// The state the decoded strings describe. `gppSections` are the GPP string's sections
    /// that apply (`GPPString.applicableSections(gppSid:)`), in any order.
    ///
    /// The TC string passed on its own is the TCF signal; the GPP string's TCF EU section only
    /// when there is none, and such a section applying means the GDPR does, if the app did not
    /// say. A GPP section this library does not decode (TCF Canada, the US state sections)
    /// counts as an opt-out: its choices cannot be read, so none may be assumed.
    public init(gdprApplies: GDPRApplies, tcString: TCString?, gppSections: [GPPSection] = [], usPrivacy: USPrivacy?,
                childDirected: Bool, underAgeOfConsent: Bool = false, nonPersonalized: Bool = false) {
        var gppTCString: TCString?
        var optedOut = usPrivacy?.optedOutOfSale ?? false
        for section in gppSections {
            switch section {
            case .tcfEuV2(let string): gppTCString = string
            case .usPrivacy(let string): optedOut = optedOut || string.optedOutOfSale
            // Global Privacy Control is an opt-out of sale and sharing where US laws honour it.
            case .usNational(let section): optedOut = optedOut || section.optedOutOfSaleSharingOrTargetedAdvertising || section.gpc == true
            case .unsupported: optedOut = true
            }
        }
        self.init(
            gdprApplies: gdprApplies == .unknown && gppTCString != nil ? .yes : gdprApplies,
            tcf: (tcString ?? gppTCString).map(TCFChoices.init),
            optedOutInTheUS: optedOut, childDirected: childDirected, underAgeOfConsent: underAgeOfConsent, nonPersonalized: nonPersonalized
        )
    }

    /// The classes `network` may load under for this viewer. `gdprWhenUnknown` says whether the
    /// GDPR applies to a viewer whose app did not say.
    public func allowedClasses(for network: NetworkPrivacy, gdprWhenUnknown: Bool) -> Set<PrivacyClass> {
        permittedClasses(for: network, gdprWhenUnknown: gdprWhenUnknown).intersection(network.servedClasses).withChildDirected(from: network)
    }

    /// What the viewer's signals permit, before what the network serves.
    private func permittedClasses(for network: NetworkPrivacy, gdprWhenUnknown: Bool) -> Set<PrivacyClass> {
        // A child gets child-directed ads or none, whatever consent was given: a child's cannot be.
        if childDirected || underAgeOfConsent { return [.childDirected] }
        var classes: Set<PrivacyClass> = [.personalized, .nonPersonalized]
        if gdprApplies == .yes || (gdprApplies == .unknown && gdprWhenUnknown) {
            guard let tcf, let vendor = network.gvlID else { return [] }
            classes = tcf.allowedClasses(vendor: vendor)
        }
        if optedOutInTheUS || nonPersonalized { classes.remove(.personalized) }
        return classes
    }
}

extension Set where Element == PrivacyClass {
    /// Rule 6 (docs/privacy.md, "Classes"): a child-directed ad is loaded without a profile
    /// and is safe for a child, so whoever may be shown a non-personalised ad of a network
    /// that serves children may be shown its child-directed ads too.
    func withChildDirected(from network: NetworkPrivacy) -> Set<PrivacyClass> {
        contains(.nonPersonalized) && network.servesChildren ? union([.childDirected]) : self
    }
}
