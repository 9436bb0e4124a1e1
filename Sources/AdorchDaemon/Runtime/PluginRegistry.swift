import AdorchEngine
import AdorchPaths
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
/// checked (who owns the file, who may write it), loaded into the daemon or into a host
/// process of their own (docs/isolation.md), and the ones refused with why. An isolated
/// plugin whose host died is down until the supervisor's restart brings it back.
///
/// Part of the engine queue's state (RuntimeState): reached only through EngineRuntime, and
/// not Sendable, so nothing of it leaves that queue except the openers it builds from values.
final class PluginRegistry {
    private let logger: Logger
    private let options: DaemonOptions
    /// The plugins running now, in the daemon or in their hosts.
    private(set) var loaded: [String: any PluginInstance] = [:]
    private(set) var refusals: [String: PluginRefusal] = [:]
    /// The file each loaded plugin was opened from, as it was then: a reload checks the
    /// plugins it adds against these (DaemonConfig.checkPluginFiles).
    private(set) var files: [String: PluginFileID] = [:]
    /// Each plugin as configured and as it last started, for restarts and for status while down.
    private(set) var configs: [String: PluginConfig] = [:]
    private(set) var infos: [String: PluginInfo] = [:]
    /// Bumped whenever a reload loads, refuses or stops a plugin: a restart begun before (its
    /// host started from the config and confinement of then) is not taken after it.
    private var generations: [String: Int] = [:]
    var supervisor = PluginSupervisor()
    /// What every isolated plugin's host must not open; set by the runtime before loading.
    var confinement = Confinement(hiddenPaths: [], addressSpaceBytes: nil)
    /// What plugins report, and how their hosts end, from their own threads.
    private var onReport: PluginReportHandler = { _, _, _ in }
    private var onExit: @Sendable (String, ObjectIdentifier, PluginExit) -> Void = { _, _, _ in }

    init(logger: Logger, options: DaemonOptions) {
        self.logger = logger
        self.options = options
    }

    subscript(name: String) -> (any PluginInstance)? { loaded[name] }

    /// Where reports and host exits go; set once, before the first load.
    func route(reports: @escaping PluginReportHandler, exits: @escaping @Sendable (String, ObjectIdentifier, PluginExit) -> Void) {
        onReport = reports
        onExit = exits
    }

    /// Loads `wanted`, or every plugin found in the directories when the config names none
    /// and none is loaded yet.
    func load(_ wanted: [PluginConfig], dirs configured: String?, prestarted: Prestarted = [:]) {
        var prestarted = prestarted
        // One started for a plugin this load no longer takes (a newer reload) is not kept.
        defer { for case .success(let unused) in prestarted.values { Self.stopAside(unused) } }
        if options.insecurePlugins {
            logger.warning("--insecure-plugins: plugin files are loaded without checking who owns them or who may write them; never run a production daemon this way")
        }
        let dirs = Self.dirs(options.pluginDir ?? configured)
        let list = wanted.isEmpty && loaded.isEmpty ? Self.discover(in: dirs) : wanted
        for plugin in list {
            generations[plugin.name, default: 0] += 1
            guard let path = Self.locate(plugin, in: dirs) else {
                refuse(plugin.name, path: Self.candidates(plugin, in: dirs).first ?? Self.file(of: plugin),
                       reason: "plugin \(plugin.name) refused: \(Self.notFound(plugin, in: dirs))")
                continue
            }
            do {
                // Root and the service's own user: the only ones who may have put code here.
                if !options.insecurePlugins { try PluginFileTrust.check(path, owner: geteuid()) }
                let file = PluginFileID(path: path)
                let opened: any PluginInstance
                if let started = prestarted.removeValue(forKey: plugin.name) { opened = try started.get() } else { opened = try opener(for: plugin, path: path, confinement: confinement)() }
                loaded[plugin.name] = opened
                files[plugin.name] = file
                configs[plugin.name] = plugin
                infos[plugin.name] = opened.info
                refusals[plugin.name] = nil
                supervisor.supervise(plugin.name, policy: plugin.crashPolicy)
                let info = opened.info
                let newer = info.abiMinor > PluginABI.minor
                    ? " (newer than this daemon's ABI \(PluginABI.major).\(PluginABI.minor): what \(info.abiMajor).\(info.abiMinor) added is not used)" : ""
                logger.notice(
                    "plugin \(info.name) loaded: \(info.declaredName) \(info.version), ABI \(info.abiMajor).\(info.abiMinor)\(newer), \(info.formats.map(\.rawValue).joined(separator: "/")), from \(path), \(Self.whereItRuns(opened))",
                    metadata: ["plugin": "\(info.name)"].merging(MessageID.pluginLoaded.metadata) { $1 }
                )
            } catch {
                refuse(plugin.name, path: path, reason: error.description)
            }
        }
    }

    /// Hosts started ahead of the load that takes them, by plugin name (`starter`).
    typealias Prestarted = [String: Result<any PluginInstance, PluginLoadError>]

    /// What opens a plugin, built on the engine queue from the values it needs (the host's
    /// settings, the logger, where reports and exits go) so that it may run on any queue: a
    /// start off the engine queue never reads the registry, which a reload may be changing.
    typealias Opener = @Sendable () throws(PluginLoadError) -> any PluginInstance

    /// What starts `plugin`'s host off the engine queue, for a reload to call before it hops
    /// there: the engine does not wait for a host's start (up to HostSettings.startTimeout),
    /// only the reload's caller does. Nil for an in-process plugin, or one whose file is not
    /// found or not trusted (the load then refuses it, saying why).
    func starter(for plugin: PluginConfig, dirs configured: String?, confinement: Confinement) -> (@Sendable () -> Result<any PluginInstance, PluginLoadError>)? {
        guard plugin.isolation == .process, DefaultPaths.pluginHost != nil,
              let path = Self.locate(plugin, in: Self.dirs(options.pluginDir ?? configured)) else { return nil }
        if !options.insecurePlugins, (try? PluginFileTrust.check(path, owner: geteuid())) == nil { return nil }
        let open = opener(for: plugin, path: path, confinement: confinement)
        return {
            do throws(PluginLoadError) { return .success(try open()) } catch { return .failure(error) }
        }
    }

    /// The plugin dlopened here, or in a host of its own, hidden from what `confinement` names.
    private func opener(for plugin: PluginConfig, path: String, confinement: Confinement) -> Opener {
        let (logger, onReport, onExit, name, configJSON) = (logger, onReport, onExit, plugin.name, plugin.configJSON)
        switch plugin.isolation {
        case .inProcess:
            return { () throws(PluginLoadError) in
                try LoadedPlugin(name: name, path: path, configJSON: configJSON, logger: logger, onReport: onReport)
            }
        case .process:
            guard let executable = DefaultPaths.pluginHost else {
                return { () throws(PluginLoadError) in
                    throw .refusedByHost(path: path, name: name, reason: "adorch-plugin-host (isolation = \"process\") is in none of \(DefaultPaths.pluginHostDirs.joined(separator: ", "))")
                }
            }
            let settings = hostSettings(for: plugin, confinement: confinement, executable)
            return { () throws(PluginLoadError) in
                try PluginProcess(name: name, path: path, configJSON: configJSON, settings: settings,
                                  logger: logger, onReport: onReport) { instance, exit in onExit(name, instance, exit) }
            }
        }
    }

    /// Shuts an isolated plugin's host down on another queue; it is killed if it does not stop in time.
    private static func stopAside(_ plugin: any PluginInstance) {
        DispatchQueue.global().async { plugin.shutdown() }
    }

    /// How `plugin`'s host is run: the binary, what it may not open, its limits.
    private func hostSettings(for plugin: PluginConfig, confinement: Confinement, _ executable: String) -> HostSettings {
        var confinement = confinement
        confinement.addressSpaceBytes = Sanitizer.isActive ? nil : plugin.memoryLimitBytes
        return HostSettings(executable: executable, confinement: confinement, hangTimeout: plugin.hangTimeout,
                            insecurePlugins: options.insecurePlugins)
    }

    static func whereItRuns(_ plugin: any PluginInstance) -> String {
        guard let process = plugin as? PluginProcess else { return "in process" }
        return "isolated in process \(process.pid) (\(process.confinement))"
    }

    /// An isolated plugin's host ended: it is down. Returns false for a host already replaced
    /// or removed (its exit is old news).
    func hostEnded(_ name: String, instance: ObjectIdentifier) -> Bool {
        guard let current = loaded[name], ObjectIdentifier(current) == instance else { return false }
        loaded[name] = nil
        return true
    }

    /// A restart begun: its host's opener, and the plugin's generation it belongs to.
    struct Restart {
        let open: Opener
        let generation: Int
    }

    /// What starts a down plugin's host again, to run off the engine queue (a host takes tens
    /// of ms to start, and Shows of every other plugin must not wait); nil if it is no longer
    /// configured. Its result goes to `restarted`, back on the engine queue.
    func restarter(_ name: String) -> Restart? {
        guard let plugin = configs[name], let path = infos[name]?.path else { return nil }
        return Restart(open: opener(for: plugin, path: path, confinement: confinement), generation: generations[name, default: 0])
    }

    /// A restart's result: the new host in place, or the error. One a reload loaded, refused,
    /// changed, removed or disabled meanwhile is stopped, and nil returned as if nothing
    /// happened: the reload's answer stands (a host started before it could see what the
    /// reload hid from hosts since, or run a config it replaced).
    func restarted(_ name: String, _ restart: Restart, _ result: Result<any PluginInstance, PluginLoadError>) -> Result<Void, PluginLoadError>? {
        guard generations[name, default: 0] == restart.generation else {
            if case .success(let instance) = result {
                Self.stopAside(instance)
                logger.notice("plugin \(name): a reload took it over while its host restarted; the host started for that restart was stopped",
                              metadata: ["plugin": "\(name)"])
            }
            return nil
        }
        switch result {
        case .success(let instance):
            guard configs[name] != nil, case .starting? = supervisor.state(of: name) else {
                Self.stopAside(instance)
                return nil
            }
            loaded[name] = instance
            infos[name] = instance.info
            return .success(())
        case .failure(let error): return .failure(error)
        }
    }

    /// `slots` with each waterfall entry marked by whether its plugin can be given a load's
    /// privacy signals (NetworkPrivacy.receivesSignals: built for ABI 1.4 or later), as its
    /// plugin was when it last started; the engine asks one that cannot only for loads that
    /// need no signal. A plugin that never started (refused, not found) is known to receive
    /// none: it is asked for nothing until a reload loads it, which marks it again.
    func markingSignals(_ slots: [SlotConfig]) -> [SlotConfig] {
        slots.map { slot in
            var slot = slot
            for i in slot.waterfall.indices {
                slot.waterfall[i].privacy.receivesSignals = infos[slot.waterfall[i].plugin]?.receivesPrivacySignals ?? false
            }
            return slot
        }
    }

    /// Forgets the refusals of plugins a reload no longer names.
    func forgetRefusals(except wanted: Set<String>) {
        for name in refusals.keys where !wanted.contains(name) { refusals[name] = nil }
    }

    /// Stops a plugin a reload changed, to load it again as it now says: its crashes still
    /// count (status and adorch_plugin_crashes_total never go back).
    func stopForRestart(_ name: String, because why: String) {
        stop(name)
        logger.notice("plugin \(name) stopped: \(why)", metadata: ["plugin": "\(name)"])
    }

    /// Stops a plugin after the destroys already queued to it ran: one in the daemon here, an
    /// isolated one's host off the engine queue (its stuck plugin must not hold up every
    /// other plugin's Shows for the shutdown's timeout).
    private func stop(_ name: String) {
        generations[name, default: 0] += 1
        if let plugin = loaded.removeValue(forKey: name) {
            if plugin is PluginProcess { Self.stopAside(plugin) } else { plugin.shutdown() }
        }
        files[name] = nil
    }

    /// Stops a plugin a reload removed, and forgets it.
    func remove(_ name: String) {
        stop(name)
        refusals[name] = nil
        configs[name] = nil
        infos[name] = nil
        supervisor.forget(name)
        logger.notice("plugin \(name) removed", metadata: ["plugin": "\(name)"])
    }

    /// Every plugin's deinit, in name order (an isolated one's host then exits); one stuck in
    /// a call is left behind, said in the log.
    func shutdownAll() {
        for plugin in loaded.values.sorted(by: { $0.info.name < $1.info.name }) where !plugin.shutdown() {
            logger.error("plugin \(plugin.info.name) did not return from a call within 5 s: stopping without its deinit",
                         metadata: ["plugin": "\(plugin.info.name)"])
        }
    }

    /// Out until a reload loads it: listed as refused only (not also as the plugin it last was),
    /// and never restarted by the supervisor meanwhile.
    private func refuse(_ name: String, path: String, reason: String) {
        logger.error("\(reason)", metadata: ["plugin": "\(name)"].merging(MessageID.pluginRefused.metadata) { $1 })
        refusals[name] = PluginRefusal(name: name, path: path, reason: reason)
        infos[name] = nil
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

