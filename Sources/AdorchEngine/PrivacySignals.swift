import AdorchPrivacy

/// What an app said about a viewer's privacy, as it said it (docs/privacy.md): the strings a
/// network must receive unchanged, and the flags. `ViewerPrivacy` decodes it.
public struct PrivacySignals: Sendable, Equatable {
    public var gdprApplies: GDPRApplies
    /// A TCF v2 TC string.
    public var tcString: String?
    /// A GPP string, and the ids of its sections that apply to this viewer (OpenRTB's `gpp_sid`).
    public var gpp: String?
    public var gppSid: [Int]
    /// A US Privacy string (`1YNN`).
    public var usPrivacy: String?
    /// The app is directed to children (COPPA), or says this viewer is a child.
    public var childDirected: Bool
    /// The viewer is under the age of digital consent (GDPR article 8).
    public var underAgeOfConsent: Bool
    /// Limited ad tracking, or the app's own choice of non-personalised ads.
    public var nonPersonalized: Bool
    /// The highest content rating the app accepts; nil: no limit.
    public var maxContentRating: ContentRating?

    public init(gdprApplies: GDPRApplies = .unknown, tcString: String? = nil, gpp: String? = nil, gppSid: [Int] = [],
                usPrivacy: String? = nil, childDirected: Bool = false, underAgeOfConsent: Bool = false,
                nonPersonalized: Bool = false, maxContentRating: ContentRating? = nil) {
        self.gdprApplies = gdprApplies
        self.tcString = tcString
        self.gpp = gpp
        self.gppSid = gppSid
        self.usPrivacy = usPrivacy
        self.childDirected = childDirected
        self.underAgeOfConsent = underAgeOfConsent
        self.nonPersonalized = nonPersonalized
        self.maxContentRating = maxContentRating
    }
}

/// Google's content ratings for ads, lowest first (`maxAdContentRating`).
public enum ContentRating: String, CaseIterable, Comparable, Sendable {
    case g = "G"
    case pg = "PG"
    case t = "T"
    case ma = "MA"

    public static func < (lhs: ContentRating, rhs: ContentRating) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A viewer's signals and what they decode to. Made only by decoding, so the two agree.
public struct ViewerPrivacy: Sendable, Equatable {
    public let signals: PrivacySignals
    public let state: PrivacyState

    /// Decodes every string `signals` carries. A string that does not decode is refused with
    /// the field it came in and why; nothing is assumed from it.
    public init(_ signals: PrivacySignals) throws(ConsentStringError) {
        let tcString = try signals.tcString.map { text throws(ConsentStringError) in try TCString.decode(text) }
        var sections: [GPPSection] = []
        if let gpp = signals.gpp { sections = try GPPString.decode(gpp).applicableSections(gppSid: signals.gppSid) }
        var usPrivacy: USPrivacy?
        if let text = signals.usPrivacy {
            do { usPrivacy = try USPrivacy.decode(text) } catch { throw .usPrivacy(error) }
        }
        self.signals = signals
        self.state = PrivacyState(gdprApplies: signals.gdprApplies, tcString: tcString, gppSections: sections, usPrivacy: usPrivacy,
                                  childDirected: signals.childDirected, underAgeOfConsent: signals.underAgeOfConsent,
                                  nonPersonalized: signals.nonPersonalized)
    }
}

/// The privacy class a load is made under, and the signals its plugin receives with it
/// (docs/privacy.md, "Classes"): an ad loaded under a class goes only to viewers who allow it.
public struct LoadPrivacy: Sendable, Equatable {
    public var privacyClass: PrivacyClass
    public var signals: PrivacySignals

    public init(privacyClass: PrivacyClass, signals: PrivacySignals) {
        self.privacyClass = privacyClass
        self.signals = signals
    }
}
