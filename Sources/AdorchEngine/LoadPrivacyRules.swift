import AdorchPrivacy

/// What a load's privacy carries to its plugin (docs/privacy.md, "Inventory").
extension LoadPrivacy {
    /// A load under `privacyClass` for a viewer who said `signals` (none: a viewer who set
    /// nothing): their signals, with the class's own flag set, so that the network is told
    /// what the class means even when the viewer's strings alone would allow more.
    public init(_ privacyClass: PrivacyClass, for signals: PrivacySignals?) {
        var sent = signals ?? PrivacySignals()
        switch privacyClass {
        case .personalized: break
        case .nonPersonalized: sent.nonPersonalized = true
        case .childDirected: sent.childDirected = true
        }
        self.init(privacyClass: privacyClass, signals: sent)
    }

    /// Whether the plugin must receive the signals for the load to be what its class says:
    /// everything but a personalised load that carries no string, no flag and no rating, and
    /// no claim that the GDPR applies. A plugin that cannot receive signals (built for ABI 1.3)
    /// loads as if told nothing, which is that load and no other.
    public var needsSignals: Bool {
        privacyClass != .personalized || signals.gdprApplies == .yes || signals.tcString != nil || signals.gpp != nil
            || !signals.gppSid.isEmpty || signals.usPrivacy != nil || signals.childDirected || signals.underAgeOfConsent
            || signals.nonPersonalized || signals.maxContentRating != nil
    }
}

extension PrivacySignals {
    /// `text` from a plugin about a load that carried these signals, with each of its consent
    /// strings shown only as `ConsentRedaction` shows it: a network's error often echoes the
    /// request, and the text reaches the journal and the events of whoever may read the slot's.
    public func redacting(_ text: String) -> String {
        [tcString, gpp, usPrivacy].compactMap { $0 }.filter { !$0.isEmpty }.sorted { $0.count > $1.count }
            .reduce(text) { $0.replacing($1, with: ConsentRedaction.redact($1)) }
    }
}
