import AdorchEngine
import AdorchPluginHost
import AdorchSystemd
import Dispatch
import Foundation
import Logging

// [engine queue] A reload: the config read again, the plugins it changes (re)started off the
// engine queue, then applied on it by `applyConfig`.

extension EngineRuntime {
    /// Reads the config again and applies it; on any error the running config stays and
    /// the reply and the journal say why. systemd hears RELOADING=1 and READY=1 around it.
    /// The hosts of the isolated plugins it (re)starts are started first, off the engine
    /// queue: Shows do not wait for a plugin's init, only the reload's caller does.
    func reload(completion: @escaping @Sendable (Result<String, ConfigError>) -> Void) {
        queue.async { [self] in
            ServiceNotifier.reloading()
            let next: DaemonConfig
            do throws(ConfigError) {
                next = try options.configPath.map { path throws(ConfigError) in try DaemonConfig.load(path: path) } ?? .embeddedDefault()
                try next.checkPluginFiles(pluginDir: options.pluginDir, loaded: plugins.files)
            } catch {
                return reloaded(.failure(error), completion)
            }
            let hidden = confinement(of: next)
            let changed = changedPlugins(next, hidden: hidden)
            let starters = next.plugins.filter { plugins[$0.name] == nil || changed.contains($0.name) }.compactMap { plugin in
                plugins.starter(for: plugin, dirs: next.pluginDir, confinement: hidden).map { (plugin.name, $0) }
            }
            guard !starters.isEmpty else { return reloaded(applyConfig(next, hidden: hidden, changed: changed), completion) }
            DispatchQueue.global().async { [self] in
                let started = PluginRegistry.Prestarted(uniqueKeysWithValues: starters.map { ($0.0, $0.1()) })
                queue.async { [self] in
                    reloaded(applyConfig(next, hidden: hidden, changed: changed, prestarted: started), completion)
                }
            }
        }
    }

    private func reloaded(_ result: Result<String, ConfigError>, _ completion: @Sendable (Result<String, ConfigError>) -> Void) {
        ServiceNotifier.ready(status: summary())
        switch result {
        case .success(let summary): logger.notice("reload done: \(summary)", metadata: MessageID.reloadDone.metadata)
        case .failure(let error): logger.error("reload failed, keeping the running config: \(error)", metadata: MessageID.reloadFailed.metadata)
        }
        completion(result)
    }

    /// The loaded plugins a reload to `next` stops and starts again: those whose section
    /// changed (isolation, limits, its config), and every isolated one when what its host
    /// must not open changed (a new reward key, state dir or config file).
    private func changedPlugins(_ next: DaemonConfig, hidden: Confinement) -> [String] {
        let rehide = hidden != plugins.confinement
        return next.plugins.filter { plugin in
            plugins.configs[plugin.name].map { $0 != plugin || (rehide && $0.isolation == .process) } ?? false
        }.map(\.name).sorted()
    }
}
