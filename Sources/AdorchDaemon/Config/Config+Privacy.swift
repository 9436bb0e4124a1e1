import AdorchEngine

extension TableReader {
    /// A waterfall entry's privacy facts (docs/privacy.md, "Classes"): `gvl_id`,
    /// `serves_children`, `serves_non_personalized`; an absent key keeps `NetworkPrivacy`'s default.
    func networkPrivacy() throws(ConfigError) -> NetworkPrivacy {
        var privacy = NetworkPrivacy()
        if let v = try int("gvl_id", in: ConfigBounds.gvlID) { privacy.gvlID = Int(v) }
        if let v = try bool("serves_children") { privacy.servesChildren = v }
        if let v = try bool("serves_non_personalized") { privacy.servesNonPersonalized = v }
        return privacy
    }
}

extension TableReader {
    /// The names `unset_viewer` takes: a class's, or `none`.
    static let unsetViewerNames = PrivacyClass.allCases.map(\.rawValue) + ["none"]

    /// The `[privacy]` table (docs/privacy.md, "Inventory"): `unset_viewer`, what a viewer who
    /// set no signals may be shown; `gdpr_when_unknown`, whether the GDPR applies to a viewer
    /// whose signals do not say. An absent key keeps `PrivacySettings`' default.
    func privacySettings() throws(ConfigError) -> PrivacySettings {
        try only(["unset_viewer", "gdpr_when_unknown"])
        var settings = PrivacySettings()
        if let name = try string("unset_viewer") {
            guard Self.unsetViewerNames.contains(name) else {
                throw error("unset_viewer", "expected one of \(Self.unsetViewerNames.map { "\"\($0)\"" }.joined(separator: ", ")), got \"\(name)\"")
            }
            settings.unsetViewer = PrivacyClass(rawValue: name)
        }
        if let v = try bool("gdpr_when_unknown") { settings.gdprWhenUnknown = v }
        return settings
    }
}
