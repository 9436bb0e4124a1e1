/// What the engine assumes of a viewer who said little or nothing (docs/privacy.md,
/// "Inventory"): the `[privacy]` table of the config, defined here once.
public struct PrivacySettings: Sendable, Equatable {
    /// The class a viewer who set no privacy signals may be shown (where the network serves
    /// it); nil: nothing. Non-personalised by default: nothing personalises without a signal.
    public var unsetViewer: PrivacyClass? = .nonPersonalized
    /// Whether the GDPR applies to a viewer whose signals do not say (`GDPRApplies.unknown`).
    public var gdprWhenUnknown = true

    public init(unsetViewer: PrivacyClass? = .nonPersonalized, gdprWhenUnknown: Bool = true) {
        self.unsetViewer = unsetViewer
        self.gdprWhenUnknown = gdprWhenUnknown
    }

    /// The classes `viewer` may be shown from `network`, and so the classes a load for them
    /// may be made under there; nil is a viewer who set nothing.
    public func allowedClasses(_ viewer: ViewerPrivacy?, for network: NetworkPrivacy) -> Set<PrivacyClass> {
        guard let viewer else { return unsetViewer.map { Set([$0]).intersection(network.servedClasses) } ?? [] }
        return viewer.state.allowedClasses(for: network, gdprWhenUnknown: gdprWhenUnknown)
    }
}

extension PrivacyClass {
    /// Best first: a viewer's Show counts as demand for the first class they allow (ads
    /// personalised pay most), and takes an ad of that class before any other.
    public static let preference: [PrivacyClass] = [.personalized, .nonPersonalized, .childDirected]
}
