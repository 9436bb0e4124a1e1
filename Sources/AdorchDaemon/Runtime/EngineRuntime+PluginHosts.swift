import AdorchEngine
import AdorchPluginHost
import Dispatch
import Foundation
import Logging

// [engine queue] Isolated plugins' hosts ending and starting again (docs/isolation.md,
// "When a plugin crashes"): the engine fails and ends what the plugin had, the supervisor
// says when it comes back, and the journal says all of it.

extension EngineRuntime {
    /// What an isolated plugin may not open: everything of the daemon's that is secret (the
    /// config and its drop-ins hold every plugin's own config, keys included), and the socket
    /// apps call, which a host could otherwise unlink or replace: its folder where the folder
    /// is the daemon's own, the socket alone in a shared one (/tmp).
    func confinement(of config: DaemonConfig) -> Confinement {
        let credentials = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"]  // systemd's reward-key credential
        let socket = socketPath
        let folder = (socket as NSString).deletingLastPathComponent
        var info = stat()
        let shared = lstat(folder, &info) == 0 && info.st_mode & S_ISVTX != 0
        let hidden = [stateDir, config.rewardKeyFile, options.configPath, options.configPath.map { $0 + ".d" }, credentials,
                      socket.hasPrefix("/") ? (shared ? socket : folder) : nil]
            .compactMap { $0 }.filter { !$0.isEmpty }
        return Confinement(hiddenPaths: hidden.map { $0.hasPrefix("/") ? $0 : FileManager.default.currentDirectoryPath + "/" + $0 },
                           addressSpaceBytes: nil)
    }

    /// How hosts end, from their reader threads: one hop to the engine queue.
    var exitHandler: @Sendable (String, ObjectIdentifier, PluginExit) -> Void {
        { [weak self] name, instance, exit in
            guard let self else { return }
            queue.async { [self] in
                guard plugins.hostEnded(name, instance: instance) else { return }
                pluginDown(name, exit: exit)
            }
        }
    }

    /// The plugin's host is gone: its loads fail, its ads and sessions end, and it is
    /// restarted or, past its crash budget, disabled.
    func pluginDown(_ name: String, exit: PluginExit) {
        let moment = now()
        apply(engine.pluginLost(name, reason: "its plugin host died: \(exit.reason)", now: moment))
        apply(sessions.endAll(where: { _, plugin in plugin == name }, reason: "plugin_fault: plugin \(name)'s host died: \(exit.reason)", now: moment))
        var metadata: Logger.Metadata = ["plugin": "\(name)"]
        if let signal = exit.signal { metadata["signal"] = "\(signalName(signal))" }
        let state = plugins.supervisor.crashed(name, exit: exit.reason, now: moment)
        let crashes = plugins.supervisor.records[name]?.crashes ?? 0
        switch state {
        case .restarting(let at):
            let wait = at - moment
            logger.error("plugin \(name): its host process died: \(exit.reason); its loads failed as plugin_fault and its ads ended (crash \(crashes)); restarting it \(wait == .zero ? "now" : "in \(wait)")",
                         metadata: metadata.merging(MessageID.pluginCrashed.metadata) { $1 })
        case .disabled(let reason):
            logger.error("plugin \(name): its host process died: \(exit.reason); its loads failed as plugin_fault and its ads ended (crash \(crashes))",
                         metadata: metadata.merging(MessageID.pluginCrashed.metadata) { $1 })
            logger.critical("plugin \(name) disabled: \(reason)", metadata: metadata.merging(MessageID.pluginDisabled.metadata) { $1 })
            apply(engine.pluginDisabled(name, now: moment))
        case .running, .starting:
            break
        }
        rearm()
    }

    /// A new host for a plugin whose restart is due, started off the engine queue.
    func restartPlugin(_ name: String) {
        let asked = now()
        guard let restart = plugins.restarter(name) else { return }
        let open = restart.open
        DispatchQueue.global().async { [self] in
            let result: Result<any PluginInstance, PluginLoadError>
            do throws(PluginLoadError) { result = .success(try open()) } catch { result = .failure(error) }
            queue.async { [self] in
                let receivedSignals = plugins.infos[name]?.receivesPrivacySignals
                switch plugins.restarted(name, restart, result) {
                case nil: return
                case .failure(let error)?:
                    return pluginDown(name, exit: PluginExit(signal: nil, reason: "its new host did not start: \(error)"))
                case .success?:
                    guard let instance = plugins[name] else { return }
                    if let process = instance as? PluginProcess, process.hasEnded, plugins.hostEnded(name, instance: ObjectIdentifier(process)) {
                        return pluginDown(name, exit: PluginExit(signal: nil, reason: "its new host ended as it started"))
                    }
                    plugins.supervisor.restarted(name)
                    logger.notice("plugin \(name) restarted \(PluginRegistry.whereItRuns(instance)) in \((now() - asked).roundedMilliseconds) ms",
                                  metadata: ["plugin": "\(name)"].merging(MessageID.pluginLoaded.metadata) { $1 })
                    // Its file replaced by one of another ABI: its entries say what it can receive now.
                    if plugins.infos[name]?.receivesPrivacySignals != receivedSignals {
                        apply(engine.reconfigure(slots: plugins.markingSignals(config.slots), settings: config.scheduler, now: now()))
                    }
                    apply(engine.pluginRestored(name, now: now()))
                }
            }
        }
    }
}
