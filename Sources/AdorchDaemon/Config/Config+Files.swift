import AdorchPluginHost
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

    /// What `--check-config` checks beyond the text: the reward key can be read, every
    /// plugin a waterfall names is one the daemon would load from `pluginDir` (the command
    /// line's) or the config's plugin dir: a [plugins] section whose file exists, or with
    /// no [plugins] section, a plugin file found there; and no two plugins are one file.
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
        try checkPluginFiles(pluginDir: override)
    }

    /// No two plugin names are one file (PluginFileID: by device and inode, so a symlink or a
    /// hard link is the file it leads to), here, at start and at each reload. `loaded`: the
    /// running daemon's plugins by name (a reload), which the configured plugins it adds may
    /// not be either: a rename in one reload would load the new name before the old one's
    /// deinit. Loading one file twice for real would take dlmopen, a namespace each with its
    /// own libc and, for a Swift plugin, its own Swift runtime, out of 16 for the process.
    public func checkPluginFiles(pluginDir override: String?, loaded: [String: PluginFileID] = [:]) throws(ConfigError) {
        let dirs = PluginRegistry.dirs(override ?? pluginDir)
        let discovered = plugins.isEmpty
        var seen: [PluginFileID: (name: String, path: String)] = [:]
        func named(_ name: String, _ path: String) -> String {
            discovered ? "plugin \"\(name)\" (\(path), found in the plugin dir)" : "[plugins.\(name)] (\(path))"
        }
        for plugin in discovered ? PluginRegistry.discover(in: dirs) : plugins {
            guard let path = PluginRegistry.locate(plugin, in: dirs), let file = PluginFileID(path: path) else { continue }
            let location = discovered ? "plugin dir \(dirs.joined(separator: ", "))" : "key plugins.\(plugin.name)"
            if let first = seen[file] {
                throw ConfigError(file: source, location: location, message: "\(named(first.name, first.path)) and \(named(plugin.name, path)) are one file"
                    + " (\(file)): \(PluginFileID.sharedGlobals); name it once, or give each name its own copy of the file")
            }
            seen[file] = (plugin.name, path)
            // A config naming no plugins adds none at a reload: the registry keeps those it has.
            if !discovered, loaded[plugin.name] == nil, let holder = loaded.first(where: { $0.value == file })?.key {
                throw ConfigError(file: source, location: location, message: "[plugins.\(plugin.name)] (\(path)) is the file plugin \(holder) has loaded"
                    + " (\(file)): \(PluginFileID.sharedGlobals); to rename a plugin, remove it in one reload and add it in the next, or restart adorchd")
            }
        }
    }
}
