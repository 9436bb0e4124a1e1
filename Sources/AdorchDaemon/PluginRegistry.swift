import AdorchEngine
import AdorchPluginHost
import Foundation
import Logging

/// A plugin the daemon tried to load and could not.
public struct PluginRefusal: Sendable {
    public var name: String
    public var path: String
    public var reason: String
}

/// [engine queue] The plugins: found in the plugin directories or named by the config,
/// checked (who owns the file, who may write it), loaded, and the ones refused with why.
///
/// @unchecked Sendable: confined to the engine queue (asserted), created before it runs.
final class PluginRegistry: @unchecked Sendable {
    private let queue: DispatchQueue
    private let logger: Logger
    private let options: DaemonOptions
    private(set) var loaded: [String: LoadedPlugin] = [:]
    private(set) var refusals: [String: PluginRefusal] = [:]
    /// The file each loaded plugin was opened from, as it was then: a reload checks the
    /// plugins it adds against these (DaemonConfig.checkPluginFiles).
    private(set) var files: [String: PluginFileID] = [:]

    init(queue: DispatchQueue, logger: Logger, options: DaemonOptions) {
        self.queue = queue
        self.logger = logger
        self.options = options
    }

    subscript(name: String) -> LoadedPlugin? { loaded[name] }

    /// Loads `wanted`, or every plugin found in the directories when the config names none
    /// and none is loaded yet. What a plugin reports goes to `onReport`, from its own threads.
    func load(_ wanted: [PluginConfig], dirs configured: String?, onReport: @escaping PluginReportHandler) {
        dispatchPrecondition(condition: .onQueue(queue))
        if options.insecurePlugins {
            logger.warning("--insecure-plugins: plugin files are loaded without checking who owns them or who may write them; never run a production daemon this way")
        }
        let dirs = Self.dirs(options.pluginDir ?? configured)
        let list = wanted.isEmpty && loaded.isEmpty ? Self.discover(in: dirs) : wanted
        for plugin in list {
            guard let path = Self.locate(plugin, in: dirs) else {
                refuse(plugin.name, path: Self.candidates(plugin, in: dirs).first ?? Self.file(of: plugin),
                       reason: "plugin \(plugin.name) refused: \(Self.notFound(plugin, in: dirs))")
                continue
            }
            do {
                // Root and the service's own user: the only ones who may have put code here.
                if !options.insecurePlugins { try PluginFileTrust.check(path, owners: [0, geteuid()]) }
                let file = PluginFileID(path: path)
                let opened = try LoadedPlugin(name: plugin.name, path: path, configJSON: plugin.configJSON, logger: logger, onReport: onReport)
                loaded[plugin.name] = opened
                files[plugin.name] = file
                refusals[plugin.name] = nil
                let info = opened.info
                let newer = info.abiMinor > PluginABI.minor
                    ? " (newer than this daemon's ABI \(PluginABI.major).\(PluginABI.minor): what \(info.abiMajor).\(info.abiMinor) added is not used)" : ""
                logger.notice(
                    "plugin \(info.name) loaded: \(info.declaredName) \(info.version), ABI \(info.abiMajor).\(info.abiMinor)\(newer), \(info.formats.map(\.rawValue).joined(separator: "/")), from \(path)",
                    metadata: ["plugin": "\(info.name)"].merging(MessageID.pluginLoaded.metadata) { $1 }
                )
            } catch {
                refuse(plugin.name, path: path, reason: error.description)
            }
        }
    }

    /// Forgets the refusals of plugins a reload no longer names.
    func forgetRefusals(except wanted: Set<String>) {
        dispatchPrecondition(condition: .onQueue(queue))
        for name in refusals.keys where !wanted.contains(name) { refusals[name] = nil }
    }

    /// Stops a plugin a reload removed, after the destroys already queued to it ran.
    func remove(_ name: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        loaded.removeValue(forKey: name)?.shutdown()
        files[name] = nil
        refusals[name] = nil
        logger.notice("plugin \(name) removed", metadata: ["plugin": "\(name)"])
    }

    /// Every plugin's deinit, in name order; one stuck in a call is left behind, said in the log.
    func shutdownAll() {
        dispatchPrecondition(condition: .onQueue(queue))
        for plugin in loaded.values.sorted(by: { $0.info.name < $1.info.name }) where !plugin.shutdown() {
            logger.error("plugin \(plugin.info.name) did not return from a call within 5 s: stopping without its deinit",
                         metadata: ["plugin": "\(plugin.info.name)"])
        }
    }

    private func refuse(_ name: String, path: String, reason: String) {
        logger.error("\(reason)", metadata: ["plugin": "\(name)"].merging(MessageID.pluginRefused.metadata) { $1 })
        refusals[name] = PluginRefusal(name: name, path: path, reason: reason)
    }

    /// The folders searched: the command line's or the config's, else the defaults.
    static func dirs(_ configured: String?) -> [String] { configured.map { [$0] } ?? DefaultPaths.pluginDirs }

    /// The .so a plugin is loaded from: its `path`, else by its name.
    static func file(of plugin: PluginConfig) -> String { plugin.path ?? "libadorch-plugin-\(plugin.name).so" }

    /// Where the plugin's file may be: an absolute path as it is, a relative one in each of `dirs`.
    static func candidates(_ plugin: PluginConfig, in dirs: [String]) -> [String] {
        let file = file(of: plugin)
        return file.hasPrefix("/") ? [file] : dirs.map { "\($0)/\(file)" }
    }

    /// The first candidate that exists.
    static func locate(_ plugin: PluginConfig, in dirs: [String]) -> String? {
        candidates(plugin, in: dirs).first { FileManager.default.fileExists(atPath: $0) }
    }

    static func notFound(_ plugin: PluginConfig, in dirs: [String]) -> String {
        let file = file(of: plugin)
        return file.hasPrefix("/") ? "\(file) does not exist" : "\(file) not found in \(dirs.joined(separator: ", "))"
    }

    /// Every plugin in `dirs` (by file name, the first dir's winning), as a config naming none loads them:
    /// any `.so` in a plugin folder, only `libadorch-plugin-*.so` beside the binary (`/usr/bin` has an `ld.so`).
    static func discover(in dirs: [String]) -> [PluginConfig] {
        var found: [String: PluginConfig] = [:]
        let binaryDirs = DefaultPaths.executableDirs
        for dir in dirs {
            for file in ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() where file.hasSuffix(".so") {
                var name = String(file.dropLast(3))
                if name.hasPrefix("libadorch-plugin-") { name = String(name.dropFirst("libadorch-plugin-".count)) }
                else if binaryDirs.contains(dir) { continue }
                if found[name] == nil { found[name] = PluginConfig(name: name, path: "\(dir)/\(file)", configJSON: "{}") }
            }
        }
        return found.values.sorted { $0.name < $1.name }
    }
}
