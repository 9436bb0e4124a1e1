import AdorchEngine
import AdorchLocking
import CAdorchSandbox
import Dispatch
import Foundation
import Logging

/// An isolated plugin: its own adorch-plugin-host process, which dlopens it exactly as the
/// daemon would, spoken to over a socketpair (PluginWire). When the process dies or stops
/// answering its heartbeat, `onExit` hears which instance and why, once; the owner decides
/// what comes next.
///
/// @unchecked Sendable: it owns a process, a channel and a heartbeat timer on its queue;
/// the waiting answers and heartbeat times are behind their lock, the rest is immutable.
public final class PluginProcess: @unchecked Sendable {
    public let info: PluginInfo
    /// The host: the process that runs the plugin, as the daemon's /proc names it.
    public let pid: pid_t
    /// The process the daemon started, waits for and kills: the host itself, or the pid 1 of
    /// the host's box, whose end ends the box (docs/confinement.md).
    private let spawned: SpawnedHost
    /// What the host said of its confinement when it started, and of its box.
    public let confinement: String
    private let channel: PluginChannel
    private let settings: HostSettings
    private let logger: Logger
    private let queue: DispatchQueue
    private let state = LockedValue(Waiting())
    /// The host already bounds its plugin's callbacks; these bound what a plugin could forge on the channel.
    private let callbacks = CallbackBudget()
    private let details = SecondWindow(perSecond: CallbackBounds.detailBytesPerSecond)
    /// Its log lines in a second: those it sends and those it writes on stdout and stderr.
    private let logLines: SecondWindow
    private var heartbeat: DispatchSourceTimer?

    private struct Waiting {
        var nextSeq: UInt64 = 1
        var shows: [UInt64: @Sendable (Bool) -> Void] = [:]
        var stats: [UInt64: @Sendable (String?) -> Void] = [:]
        var lastAnswer = ContinuousClock.now
        var cpu = HostCPUWatch()
        /// The heartbeats sent and not answered yet, oldest first: each a random nonce the
        /// host's answer must echo, so a stuck plugin's thread cannot answer for its queue
        /// without reading the daemon's own calls off the channel.
        var pings: [UInt64] = []
        var shutDown: DispatchSemaphore?
        /// Set once: the exit is reported, nothing more is sent.
        var ended = false
        /// Why the daemon killed it, if it did.
        var killedFor: String?
        var stopping = false
    }

    /// Starts the host, hands it the plugin and waits for its init. Refusals (the file, the
    /// ABI, init) come back as the in-process loader says them; a host that dies on the way
    /// is refused with how it died.
    public init(name: String, path: String, configJSON: String, settings: HostSettings, logger: Logger,
                onReport: @escaping PluginReportHandler, onExit: @escaping @Sendable (ObjectIdentifier, PluginExit) -> Void) throws(PluginLoadError) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw .cannotOpen(path: path, reason: "socketpair: \(String(cString: strerror(errno)))")
        }
        var output: [Int32] = [-1, -1]
        let piped = adorch_cloexec_pipe(&output)
        guard piped == 0 else {
            let why = String(cString: strerror(piped))
            close(pair[0])
            close(pair[1])
            throw .cannotOpen(path: path, reason: "pipe: \(why)")
        }
        let (childEnd, outputEnd) = (pair[1], output[1])
        let outcome = SpawnThread.run { SpawnedHost.start(settings: settings, name: name, channelFD: childEnd, output: outputEnd) }
        close(pair[1])
        close(output[1])
        var pluginLogger = logger
        pluginLogger[metadataKey: "plugin"] = "\(name)"
        let logLines = SecondWindow(perSecond: CallbackBounds.logLinesPerSecond)
        let host: SpawnedHost
        switch outcome {
        case .success(let spawnedHost): host = spawnedHost
        case .failure(let failure):
            close(pair[0])
            close(output[0])
            throw .cannotOpen(path: path, reason: failure.reason)
        }
        HostOutput.startReading(output[0], name: name, logger: pluginLogger, lines: logLines)
        self.spawned = host
        self.settings = settings
        self.logLines = logLines
        self.logger = pluginLogger
        channel = PluginChannel(fd: pair[0], label: name)
        queue = DispatchQueue(label: "adorch.host.\(name)")

        // The start: hello, confined, then started or refused, each within the start timeout.
        let router = Router()
        channel.startReading(name: name, onFrame: { body in
            do throws(PluginWire.Malformed) { router.reply(try PluginWire.Reply(body: body)) } catch {
                router.malformed(error.description)
            }
        }, onEnd: { why in router.end(why) })
        channel.send(PluginWire.Call.start(name: name, path: path, configJSON: configJSON, insecurePlugins: settings.insecurePlugins,
                                           logLevel: logger.logLevel.rawValue).frame)
        // What the plugin logs on its way up is logged as it comes (bounded as ever): a start
        // that fails or hangs is explained by it.

        var confinedText = ""
        var hostPID = host.pid
        var started: PluginInfo?
        var refusal: String?
        var after: [PluginWire.Reply] = []
        let deadline = DispatchTime.now() + .nanoseconds(Int(HostSettings.startTimeout.nanosecondsClamped))
        while started == nil, refusal == nil {
            if router.arrived.wait(timeout: deadline) == .timedOut {
                refusal = "its host did not start within \(HostSettings.startTimeout)"
                break
            }
            let (replies, ended) = router.take()
            for reply in replies {
                if started != nil || refusal != nil {
                    after.append(reply)
                    continue
                }
                switch reply {
                // Said before the plugin is loaded, so the host's own word: in a box, its pid outside.
                case .hello(let magic, let pid) where magic == PluginWire.magic: if host.box != nil { hostPID = pid }
                case .hello: refusal = "\(settings.executable) is not this daemon's plugin host"
                case .confined(let text): confinedText = text
                case .started(let info): started = info
                case .refused(let reason): refusal = reason
                case .log(let level, let message):
                    if logLines.admit(warning: pluginLogger, FloodNote.logLines) { pluginLogger.log(level: Logger.Level(rawValue: level) ?? .info, "\(CallbackBounds.logText(message))") }
                // A plugin may call its host from init on: what it reports is handled once it started.
                case .report: after.append(reply)
                default: refusal = "its host answered out of turn"
                }
            }
            if started == nil, refusal == nil, let why = ended {
                refusal = "its host ended before the plugin's init returned: \(host.reap(killedFor: nil, channelError: why).reason)"
            }
        }
        guard let started, refusal == nil else {
            host.kill()
            router.attach(onReply: { _ in }, onEnd: { why in _ = host.reap(killedFor: "refused", channelError: why) })
            throw .refusedByHost(path: path, name: name, reason: refusal ?? "")
        }
        info = started
        pid = hostPID
        confinement = [host.box ?? "", confinedText].filter { !$0.isEmpty }.joined(separator: "; ")

        // From here, replies go to the instance; the end of the channel is the end of the host.
        let report = onReport
        router.attach(onReply: { [weak self] reply in self?.handle(reply, onReport: report) },
                      onEnd: { [weak self] why in
                          // An instance let go of before its host ended (a reload removed it) still reaps it.
                          guard let self else { return _ = host.reap(killedFor: nil, channelError: why) }
                          ended(why, onExit: onExit)
                      })
        for reply in after { handle(reply, onReport: report) }
        startHeartbeat()
    }

    deinit {
        heartbeat?.cancel()
    }

    // MARK: Calls

    public func load(_ order: LoadOrder) {
        callbacks.earn(CallbackBounds.callbacksPerLoad)
        send(.load(order))
    }

    public func show(_ id: AdID, userID: String?, timeout: DispatchTimeInterval?, completion: @escaping @Sendable (Bool) -> Void) {
        callbacks.earn(CallbackBounds.callbacksPerShow)
        ask(\.shows, otherwise: false, timeout: timeout, completion: completion) { .show(seq: $0, ad: id, userID: userID) }
    }

    public func withdrawShow(_ id: AdID) { send(.withdrawShow(id)) }
    public func notify(_ id: AdID, event: ViewerEvent) { send(.notify(id, event)) }
    public func control(_ id: AdID, _ control: SessionControl) { send(.control(id, control)) }
    public func lose(_ id: AdID, _ loss: AuctionLoss) { send(.lose(id, loss)) }
    public func destroy(_ id: AdID) { send(.destroy(id)) }

    public func stats(timeout: DispatchTimeInterval, completion: @escaping @Sendable (String?) -> Void) {
        ask(\.stats, otherwise: nil, timeout: timeout, completion: completion) { .stats(seq: $0) }
    }

    /// Sends the call `make` builds with a new seq and hands its answer to `completion`,
    /// once: the host's, or `otherwise` when the host has ended or `timeout` passes first.
    private func ask<Answer: Sendable>(_ waiting: WritableKeyPath<Waiting, [UInt64: @Sendable (Answer) -> Void]>, otherwise: Answer,
                                       timeout: DispatchTimeInterval?, completion: @escaping @Sendable (Answer) -> Void,
                                       _ make: (UInt64) -> PluginWire.Call) {
        let answered = LockedFlag()
        let once: @Sendable (Answer) -> Void = { answer in
            if answered.setIfUnset() { completion(answer) }
        }
        guard let seq = state.withLock({ s -> UInt64? in
            guard !s.ended else { return nil }
            defer { s.nextSeq += 1 }
            s[keyPath: waiting][s.nextSeq] = once
            return s.nextSeq
        }) else { return once(otherwise) }
        send(make(seq))
        guard let timeout else { return }
        nonisolated(unsafe) let waiting = waiting  // a key path into this class's own state, read under its lock
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
            _ = self?.state.withLock { $0[keyPath: waiting].removeValue(forKey: seq) }
            once(otherwise)
        }
    }

    /// Asks the host to destroy what is left and deinit, then waits for it to exit; a host
    /// that does not within `timeout` is killed. No exit is reported for it.
    @discardableResult
    public func shutdown(timeout: DispatchTimeInterval) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let alive = state.withLock { s -> Bool in
            s.stopping = true
            s.shutDown = done
            return !s.ended
        }
        heartbeat?.cancel()
        guard alive else { return true }
        send(.shutdown)
        let clean = done.wait(timeout: .now() + timeout) == .success
        if !clean { spawned.kill() }
        return clean
    }

    // MARK: What comes back

    private func send(_ call: PluginWire.Call) { channel.send(call.frame) }

    private func handle(_ reply: PluginWire.Reply, onReport: PluginReportHandler) {
        switch reply {
        case .report(let ad, var report):
            if report != .destroyed {
                guard callbacks.admit(warning: logger) else { return }
            }
            if case .other(let name, let detail?) = report, !details.admit(cost: detail.utf8.count, warning: logger, FloodNote.details) {
                report = .other(name: name, detailJSON: nil)
            }
            onReport(info.name, ad, report)
        case .shown(let seq, let shown):
            state.withLock { $0.lastAnswer = .now; return $0.shows.removeValue(forKey: seq) }?(shown)
        case .stats(let seq, let text):
            state.withLock { $0.stats.removeValue(forKey: seq) }?(text)
        case .pong(let nonce):
            state.withLock { s in
                // An answer to a heartbeat that was sent counts, and answers the ones before it too.
                guard let index = s.pings.firstIndex(of: nonce) else { return }
                s.pings.removeFirst(index + 1)
                s.lastAnswer = .now
            }
        case .log(let level, let message):
            if logLines.admit(warning: logger, FloodNote.logLines) { logger.log(level: Logger.Level(rawValue: level) ?? .info, "\(CallbackBounds.logText(message))") }
        case .shutDown: state.withLock { $0.shutDown }?.signal()
        case .hello, .started, .refused, .confined:
            killNow(for: "its host answered out of turn")
        }
    }

    private func startHeartbeat() {
        // Silence is counted from here: the start (exec, dlopen, init) had its own timeout.
        state.withLock { $0.lastAnswer = .now }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let every = Int(settings.heartbeatInterval.nanosecondsClamped)
        timer.schedule(deadline: .now() + .nanoseconds(every), repeating: .nanoseconds(every), leeway: .milliseconds(20))
        timer.setEventHandler { [weak self] in self?.beat() }
        heartbeat = timer
        timer.resume()
    }

    private func beat() {
        let (nonce, silent) = state.withLock { s -> (UInt64, Duration) in
            let nonce = UInt64.random(in: 1...UInt64.max)
            s.pings.append(nonce)
            // Kept to what the hang timeout can need: the oldest of a longer silence no longer matters.
            if s.pings.count > 256 { s.pings.removeFirst(s.pings.count - 256) }
            return (nonce, ContinuousClock.now - s.lastAnswer)
        }
        if silent > settings.hangTimeout {
            return killNow(for: "stopped answering: its plugin queue has not answered the heartbeat for \(silent.roundedMilliseconds) ms"
                + " (a call into the plugin has not returned)\(addressSpaceNote())")
        }
        if let cpu = HostCPUWatch.cpuTime(of: pid), let used = state.withLock({ $0.cpu.record(cpu: cpu, at: .now) }) {
            return killNow(for: "used \(used.roundedMilliseconds) ms of CPU in the last \(HostCPUWatch.window.roundedMilliseconds) ms,"
                + " more than \(HostCPUWatch.cores) core's worth (its threads spin)")
        }
        send(.ping(seq: nonce))
    }

    /// A host at its address-space limit is a plugin that allocates without end: said so.
    private func addressSpaceNote() -> String {
        guard let limit = settings.confinement.addressSpaceBytes,
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmPeak:") }),
              let kb = UInt64(line.split(separator: " ").dropFirst().first ?? "")
        else { return "" }
        return kb * 1024 * 10 >= limit * 9 ? "; it reached its address-space limit (\(kb / 1024) of \(limit >> 20) MiB)" : ""
    }

    private func killNow(for reason: String) {
        let first = state.withLock { s -> Bool in
            guard s.killedFor == nil, !s.ended else { return false }
            s.killedFor = reason
            return true
        }
        if first { spawned.kill() }
    }

    /// Whether its host has ended (its exit reported, or about to be).
    public var hasEnded: Bool { state.withLock { $0.ended } }

    private func ended(_ channelError: String?, onExit: @Sendable (ObjectIdentifier, PluginExit) -> Void) {
        heartbeat?.cancel()
        channel.shutdownSending()
        let (killedFor, stopping, shows, stats, done) = state.withLock { s in
            s.ended = true
            defer { s.shows.removeAll(); s.stats.removeAll() }
            return (s.killedFor, s.stopping, Array(s.shows.values), Array(s.stats.values), s.shutDown)
        }
        let exit = spawned.reap(killedFor: killedFor, channelError: channelError)
        // The exit first: the owner ends the plugin's ads before it hears the Shows that
        // were waiting were not presented (they then answer nothing that is still open).
        if !stopping { onExit(ObjectIdentifier(self), exit) }
        for answer in shows { answer(false) }
        for answer in stats { answer(nil) }
        done?.signal()
    }
}

extension PluginProcess: PluginInstance {}
