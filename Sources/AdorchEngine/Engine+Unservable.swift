extension Engine {
    /// The plugins `slotID`'s waterfall names when none of them is available (not loaded,
    /// refused, removed): the slot cannot fill until one is, and says so rather than that it
    /// is being refilled. nil while one of them is there, or for an unknown slot.
    public func missingPlugins(of slotID: String) -> [String]? {
        guard let waterfall = slots[slotID]?.config.waterfall,
              !waterfall.contains(where: { availablePlugins.contains($0.plugin) }) else { return nil }
        var names: [String] = []
        for entry in waterfall where !names.contains(entry.plugin) { names.append(entry.plugin) }
        return names
    }
}
