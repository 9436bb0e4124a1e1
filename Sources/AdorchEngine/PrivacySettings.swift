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
        guard let viewer else { return unsetViewer.map { Set([$0]).intersection(network.servedClasses).withChildDirected(from: network) } ?? [] }
        return viewer.state.allowedClasses(for: network, gdprWhenUnknown: gdprWhenUnknown)
    }

    /// A load made for `viewer` alone (a Load, an interactive session): the best class they
    /// allow from `network` that its plugin can be asked for, with their signals; nil when
    /// there is none.
    public func loadPrivacy(for viewer: ViewerPrivacy?, from network: NetworkPrivacy) -> LoadPrivacy? {
        let allowed = allowedClasses(viewer, for: network)
        return PrivacyClass.preference.lazy.filter(allowed.contains).map { LoadPrivacy($0, for: viewer?.signals) }
            .first { network.receivesSignals || !$0.needsSignals }
    }
}

extension PrivacyClass {
    /// Best first: a viewer's Show counts as demand for the first class they allow (ads
    /// personalised pay most), and takes an ad of that class before any other.
    public static let preference: [PrivacyClass] = [.personalized, .nonPersonalized, .childDirected]

    /// Its place in `preference`: 0 for the best.
    var rank: Int { Self.preference.firstIndex(of: self)! }
}
