/// Under which privacy class an ad is loaded and may be shown (docs/privacy.md, "Classes"):
/// a viewer's consent signals allow some classes for each network, and an ad loaded under a
/// class may go only to viewers that class is allowed for.
public enum PrivacyClass: String, CaseIterable, Sendable {
    /// Targeted on the viewer's profile.
    case personalized
    /// Chosen without a profile: from the context and the little a request must carry.
    case nonPersonalized = "non_personalized"
    /// For a child, or a viewer under the age of consent: COPPA-safe ads only.
    case childDirected = "child_directed"
}

/// What a network declares about itself, per waterfall entry in the config.
public struct NetworkPrivacy: Sendable, Equatable {
    /// Its id in the IAB Global Vendor List; nil for a network that is not a TCF vendor, which
    /// gets nothing where the GDPR applies (no consent string can name it).
    public var gvlID: Int?
    /// Whether it serves child-directed (COPPA-safe) ads.
    public var servesChildren: Bool
    /// Whether it serves non-personalised ads.
    public var servesNonPersonalized: Bool
    /// Whether its plugin can receive a load's privacy signals (ABI 1.4 and later). One that
    /// cannot is asked only for loads that need no signal (docs/privacy.md).
    public var receivesSignals: Bool = true

    /// The defaults are the config's: a network serves non-personalised ads unless it says it
    /// cannot, and never children unless it says it may.
    public init(gvlID: Int? = nil, servesChildren: Bool = false, servesNonPersonalized: Bool = true) {
        self.gvlID = gvlID
        self.servesChildren = servesChildren
        self.servesNonPersonalized = servesNonPersonalized
    }

    /// The classes it can load under, whoever watches: every network serves personalised ads.
    public var servedClasses: Set<PrivacyClass> {
        var classes: Set<PrivacyClass> = [.personalized]
        if servesNonPersonalized { classes.insert(.nonPersonalized) }
        if servesChildren { classes.insert(.childDirected) }
        return classes
    }
}

/// Whether the GDPR applies to a viewer, as the app said (OpenRTB's `regs.gdpr`, or none).
public enum GDPRApplies: Sendable {
    case yes
    case no
    /// The app did not say: the caller's default decides (`gdprWhenUnknown`).
    case unknown
}
