import AdorchEngine

/// Frequency rules as the config writes them (docs/caps.md): `caps`, `pacing` and `count_on`
/// of a slot, of a waterfall entry, and of the daemon-wide default, `[frequency]`.
struct FrequencySettings: Equatable {
    /// nil: not set here (a slot then takes the default's).
    var caps: [FrequencyRule]?
    /// nil: not set here; `.some(nil)`: `pacing = "off"`.
    var pacing: FrequencyRule??
    var counting: CapCounting?

    static let keys = ["caps", "pacing", "count_on"]

    /// The slot's rules: its own `caps` and `pacing`, each taken from the default if the slot does not set it.
    func rules(over fallback: FrequencySettings) -> [FrequencyRule] {
        let pacing = (self.pacing ?? fallback.pacing).flatMap { $0 }
        return (caps ?? fallback.caps ?? []) + (pacing.map { [$0] } ?? [])
    }
}

extension TableReader {
    /// The table's frequency keys, checked: every key named in its error.
    func frequency() throws(ConfigError) -> FrequencySettings {
        var settings = FrequencySettings()
        if table.contains(key: "caps") {
            settings.caps = try tables("caps").map { rule throws(ConfigError) in try rule.capRule() }
        }
        if table.contains(key: "pacing") { settings.pacing = try pacingRule() }
        if let countOn = try string("count_on") {
            guard let counting = CapCounting(rawValue: countOn) else {
                throw error("count_on", "expected one of \(CapCounting.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")), got \"\(countOn)\"")
            }
            settings.counting = counting
        }
        let rules = (settings.caps ?? []) + ((settings.pacing ?? nil).map { [$0] } ?? [])
        for (index, rule) in (settings.caps ?? []).enumerated() {
            if let first = settings.caps?.firstIndex(where: { $0.name == rule.name }), first < index {
                throw error("caps[\(index)]", "is \(rule.name), as caps[\(first)] is: a rule twice would be counted twice")
            }
        }
        try checkReachable(rules)
        return settings
    }

    /// `{ impressions = 3, per = "1h", scope = "user" }`.
    private func capRule() throws(ConfigError) -> FrequencyRule {
        try only(["impressions", "per", "scope"])
        guard let impressions = try int("impressions", min: .min, max: .max) else { throw error("impressions", "is required: how many ads per window") }
        guard (1...FrequencyRule.impressionsAtMost).contains(Int(impressions)) else {
            throw error("impressions", "must be from 1 to \(FrequencyRule.impressionsAtMost), got \(impressions)")
        }
        guard let per = try string("per") else { throw error("per", "is required: the window, e.g. \"1h\"") }
        return .cap(Int(impressions), per: try window(per, "per"), scope: try scope())
    }

    /// `pacing = "30s"`, `pacing = { interval = "30s", scope = "slot" }`, or `pacing = "off"`.
    private func pacingRule() throws(ConfigError) -> FrequencyRule? {
        if let text = table["pacing"]?.string {
            return text == "off" ? nil : .pacing(try window(text, "pacing"))
        }
        guard table["pacing"]?.table != nil, let pacing = try table("pacing") else {
            throw error("pacing", "expected a window such as \"30s\", \"off\" or { interval = \"30s\", scope = \"slot\" }")
        }
        try pacing.only(["interval", "scope"])
        guard let interval = try pacing.string("interval") else { throw pacing.error("interval", "is required: the least time between two ads, e.g. \"30s\"") }
        return .pacing(try pacing.window(interval, "interval"), scope: try pacing.scope())
    }

    private func scope() throws(ConfigError) -> FrequencyRule.Scope {
        guard let text = try string("scope") else { return .user }
        guard let scope = FrequencyRule.Scope(rawValue: text) else {
            throw error("scope", "expected \"user\" (each Show's user_id) or \"slot\" (every user together), got \"\(text)\"")
        }
        return scope
    }

    private func window(_ text: String, _ name: String) throws(ConfigError) -> Duration {
        guard let window = FrequencyRule.window(text) else {
            throw error(name, "expected a whole number and a unit (ms, s, m, h, d), e.g. \"30s\" or \"1d\", got \"\(text)\"")
        }
        guard window > .zero else { throw error(name, "must be longer than 0, got \"\(text)\"") }
        guard window <= FrequencyRule.windows.upperBound else {
            throw error(name, "must be at most \(FrequencyRule.text(FrequencyRule.windows.upperBound)), got \"\(text)\"")
        }
        return window
    }

    /// Entries of one network instance (plugin and ad unit) count the same impressions: rules
    /// that differ between them would each hold only its own entry's ads, the other's not.
    func checkOneRuleSetPerNetwork(_ waterfall: [WaterfallEntry]) throws(ConfigError) {
        for (index, entry) in waterfall.enumerated() {
            if let first = waterfall.firstIndex(where: { $0.capNetwork == entry.capNetwork }), first < index, waterfall[first].caps != entry.caps {
                throw error("waterfall[\(index)].caps", "\(entry.capNetwork.name) is waterfall[\(first)]'s network instance too, with other "
                            + "frequency rules: they count the same ads, so give both the same caps and pacing")
            }
        }
    }

    /// A cap that pacing never lets its count reach would never hold: a mistake, said.
    func checkReachable(_ rules: [FrequencyRule]) throws(ConfigError) {
        for pacing in rules where pacing.isPacing {
            for (index, cap) in rules.enumerated() where !cap.isPacing && (pacing.scope == .slot || cap.scope == .user) {
                let interval = pacing.window.nanosecondsClamped, window = cap.window.nanosecondsClamped
                let most = window / interval + (window % interval == 0 ? 0 : 1)
                guard cap.impressions <= most else {
                    throw error("caps[\(index)].impressions", "\(cap.name) can never be reached: \(pacing.name) lets at most \(most) ads into \(FrequencyRule.text(cap.window))")
                }
            }
        }
    }
}
