import Foundation

/// The files a valid config still needs at start: the reward key and the plugins. The
/// daemon reads them as it starts; `--check-config` reads them the same way beforehand, so
/// a config it passes does not fail at start for a file it could have seen.
extension DaemonConfig {
    /// [rewards] key_file, else the systemd credential reward-key if one was passed.
    public func rewardKeyPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let rewardKeyFile { return rewardKeyFile }
        guard let credentials = environment["CREDENTIALS_DIRECTORY"] else { return nil }
        let credential = credentials + "/reward-key"
        return FileManager.default.fileExists(atPath: credential) ? credential : nil
    }

    /// The app security key of the reward callback, nil if none is configured.
    public func rewardKey() throws(ConfigError) -> String? {
        guard let path = rewardKeyPath() else { return nil }
        let location = rewardKeyFile != nil ? "key rewards.key_file" : "credential reward-key"
        let key = try ConfigFile.text(path, location: location).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !key.isEmpty else { throw ConfigError(file: path, location: location, message: "the reward key file is empty") }
        return key
    }

    /// What `--check-config` checks beyond the text: the reward key can be read, and every
    /// plugin a waterfall names is one the daemon would load from `pluginDir` (the command
    /// line's) or the config's plugin dir: a [plugins] section whose file exists, or with
    /// no [plugins] section, a plugin file found there.
    public func checkFiles(pluginDir override: String?) throws(ConfigError) {
        _ = try rewardKey()
        let dirs = PluginRegistry.dirs(override ?? pluginDir)
        let named = plugins.isEmpty ? PluginRegistry.discover(in: dirs) : plugins
        for (i, slot) in slots.enumerated() {
            for (j, entry) in slot.waterfall.enumerated() {
                let key = "key slots[\(i)].waterfall[\(j)].plugin"
                guard let plugin = named.first(where: { $0.name == entry.plugin }) else {
                    throw ConfigError(file: source, location: key, message: "no plugin \"\(entry.plugin)\" is found in \(dirs.joined(separator: ", "))"
                        + " (no libadorch-plugin-\(entry.plugin).so or \(entry.plugin).so there)")
                }
                if PluginRegistry.locate(plugin, in: dirs) == nil {
                    throw ConfigError(file: source, location: key, message: "plugin \"\(entry.plugin)\": \(PluginRegistry.notFound(plugin, in: dirs))")
                }
            }
        }
    }
}
