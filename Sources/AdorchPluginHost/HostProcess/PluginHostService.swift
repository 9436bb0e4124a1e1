import AdorchEngine
import AdorchLocking
import CAdorchSandbox
import Dispatch
import Foundation
import Logging

/// [host process] adorch-plugin-host's whole job: take the daemon's start over the channel,
/// confine itself, load the plugin with the in-process loader (LoadedPlugin: the same file
/// checks, ABI checks and queue), then turn each call into the plugin's call and each
/// callback into a reply, until the daemon says stop or goes away.
public enum PluginHostService {
    public static func run(_ arguments: PluginHostArguments) -> Never {
        // Started in a box, this process is its pid 1, which stays behind to reap and report
        // (adorch_box_init); the host goes on as pid 2. The daemon gone is the end of the
        // host, whatever the plugin is doing.
        let boxed = getpid() == 1
        if boxed {
            guard adorch_box_init(PluginHostArguments.statusFD, PluginHostArguments.channelFD) == 0 else { exit(0) }
        } else {
            guard adorch_sandbox_die_with_parent(arguments.parent) != 0 else { exit(0) }
        }
        closeInherited()
        signal(SIGPIPE, SIG_IGN)
        // Before any thread starts: Landlock confines only the thread that applies it and
        // those it starts later (docs/confinement.md).
        let confined = arguments.confinement.apply(boxed: boxed)

        let channel = PluginChannel(fd: PluginHostArguments.channelFD, label: arguments.name)
        LoggingSystem.bootstrap { _ in ChannelLogHandler(channel: channel) }
        let logger = Logger(label: "adorch-plugin-host")
        let served = Served(root: rootAsSeen())
        // Before the reader starts: the daemon's start may be read and answered (started) at
        // once, and the handshake's order is hello, confined, then started.
        channel.send(PluginWire.Reply.hello(magic: PluginWire.magic, pid: boxed ? outerPID() : getpid()).frame)
        channel.send(PluginWire.Reply.confined(confined.description).frame)
        channel.startReading(name: arguments.name, onFrame: { body in
            let call: PluginWire.Call
            do throws(PluginWire.Malformed) { call = try PluginWire.Call(body: body) } catch {
                // On stderr, which the daemon logs as this host's, and at once: why the host
                // ends (the field, never its text: privacy.tc_string: 9000 bytes, over ...).
                FileHandle.standardError.write(Data("adorch-plugin-host: a call from the daemon does not decode: \(error.description)\n".utf8))
                _exit(3)
            }
            served.handle(call, channel: channel, arguments: arguments, logger: logger)
        }, onEnd: { _ in
            // The daemon closed its end or died: nothing here is anyone's any more.
            _exit(0)
        })
        dispatchMain()
    }
}

/// This process's pid as the daemon sees it: in a box, getpid() is the box's own number;
/// /proc (the daemon's, as the box has no mount namespace) lists each namespace's, outermost first.
private func outerPID() -> Int32 {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("NSpid:") }
    return line?.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { Int32($0) } ?? getpid()
}

/// Root's uid as this process sees it: 0, or in a box whose user namespace does not map root
/// (the daemon is not root), the overflow uid it shows for every owner it does not map. The
/// daemon checked the plugin's file with the real owners just before: only root or the
/// daemon's user can replace any part of the path, so none of it can have changed hands
/// since, and here an unmapped owner can only still be root. "/" is root's everywhere.
private func rootAsSeen() -> uid_t {
    var info = stat()
    return stat("/", &info) == 0 ? info.st_uid : 0
}

/// Nothing of the daemon's but the channel and the standard streams stays open here (the
/// daemon's other descriptors are close-on-exec, a socket systemd passed it may not be).
private func closeInherited() {
    let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap(Int32.init) ?? []
    for fd in open where fd > PluginHostArguments.channelFD { close(fd) }
}

/// The plugin once started, and the calls' answers.
///
/// @unchecked Sendable: `plugin` is set once, by the start, on the reader thread that
/// handles every call after it; nothing else touches it.
private final class Served: @unchecked Sendable {
    private var plugin: LoadedPlugin?
    /// Root's uid as this process sees it, for PluginFileTrust.
    private let root: uid_t

    init(root: uid_t) { self.root = root }

    func handle(_ call: PluginWire.Call, channel: PluginChannel, arguments: PluginHostArguments, logger: Logger) {
        let reply: @Sendable (PluginWire.Reply) -> Void = { channel.send($0.frame) }
        guard let plugin else {
            guard case .start(let name, let path, let configJSON, let insecure, let level) = call else { _exit(3) }
            var logger = logger
            logger.logLevel = Logger.Level(rawValue: level) ?? .info
            start(name: name, path: path, configJSON: configJSON, insecure: insecure, channel: channel, logger: logger)
            return
        }
        switch call {
        case .start: _exit(3)
        case .load(let order): plugin.load(order)
        case .show(let seq, let ad, let userID):
            if plugin.showsOnAnyThread { return reply(.shown(seq: seq, plugin.showNow(ad, userID: userID))) }
            plugin.show(ad, userID: userID, timeout: nil) { reply(.shown(seq: seq, $0)) }
        case .withdrawShow(let ad): plugin.withdrawShow(ad)
        case .notify(let ad, let event): plugin.notify(ad, event: event)
        case .control(let ad, let control): plugin.control(ad, control)
        case .lose(let ad, let loss): plugin.lose(ad, loss)
        case .destroy(let ad): plugin.destroy(ad)
        case .stats(let seq): plugin.stats(timeout: .seconds(1)) { reply(.stats(seq: seq, $0)) }
        case .ping(let seq): plugin.ping { reply(.pong(seq: seq)) }
        case .shutdown:
            plugin.shutdown(timeout: .seconds(5))
            reply(.shutDown)
            // The frame out before the process ends: the channel writes it on its own queue
            // only when the socket is full, which a daemon waiting for it is not.
            exit(0)
        }
    }

    private func start(name: String, path: String, configJSON: String, insecure: Bool, channel: PluginChannel, logger: Logger) {
        do throws(PluginLoadError) {
            // Checked again here, as the daemon checked it: the file could have changed since.
            if !insecure { try PluginFileTrust.check(path, owner: geteuid(), root: root) }
            // The daemon decodes each payload it gets (it trusts no host): parsing it here too
            // would be every load's JSON work twice.
            let loaded = try LoadedPlugin(name: name, path: path, configJSON: configJSON, logger: logger, decodesPayloads: false) { _, ad, report in
                channel.send(PluginWire.Reply.report(ad, report).frame)
            }
            plugin = loaded
            channel.send(PluginWire.Reply.started(loaded.info).frame)
        } catch {
            channel.send(PluginWire.Reply.refused(error.description).frame)
        }
    }
}

/// The host's log lines go to the daemon, which logs them as the plugin's.
private struct ChannelLogHandler: LogHandler {
    let channel: PluginChannel
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        channel.send(PluginWire.Reply.log(level: event.level.rawValue, message: event.message.description).frame)
    }
}
