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
