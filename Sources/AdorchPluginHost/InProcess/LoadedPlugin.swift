import AdorchEngine
import AdorchJSON
import AdorchLocking
import CAdorchPlugin
import Dispatch
import Foundation
import Logging

/// Receives what a plugin reports, already copied out of C memory and decoded.
/// Called on the plugin's calling thread: the receiver hops to its own queue.
public typealias PluginReportHandler = @Sendable (_ plugin: String, _ ad: AdID, _ report: PluginReport) -> Void

/// What operators see of a plugin.
public struct PluginInfo: Sendable, Equatable {
    public var name: String
    public var path: String
    /// The name the plugin gives itself in its entry.
    public var declaredName: String
    public var version: String
    public var description: String
    public var abiMajor: UInt32
    public var abiMinor: UInt32
    public var formats: [AdFormat]
}

/// One dlopened plugin and the serial queue every call into it runs on, but ad_show of a
/// plugin that declared ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD (showNow).
///
/// @unchecked Sendable: it owns a Dispatch queue and C pointers; every call into the plugin
/// but showNow's is confined to `queue`, `objects` and the any-thread flag are behind their
/// locks (showNow reads them on its caller's thread), the rest is immutable after init.
public final class LoadedPlugin: @unchecked Sendable {
    public let info: PluginInfo
    private let library: PluginLibrary
    private let entry: UnsafePointer<adorch_plugin_entry_t>
    private let host: UnsafeMutablePointer<adorch_host>
    private let sink: Unmanaged<CallbackSink>
    private let queue: DispatchQueue
    private let objects = LockedValue<[AdID: UnsafeMutableRawPointer]>([:])
    /// nil: the plugin did not declare ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD.
    private let anyThreadShows: LockedValue<AnyThreadShowRecord?>
    /// Shows queued and not started: a withdrawn one is skipped when its turn comes.
    private let queuedShows = LockedValue<Set<AdID>>([])
    private var initialized = false

    /// Opens `path`, checks the entry against this host's ABI and calls the plugin's init.
    /// Any refusal closes the library again and says why in the error.
    /// `decodesPayloads` false: a loaded payload is reported as the plugin's text only, bounded
    /// but not parsed (a plugin's host forwards it, and the daemon decodes it, once).
    public init(name: String, path: String, configJSON: String, logger: Logger, decodesPayloads: Bool = true,
                onReport: @escaping PluginReportHandler) throws(PluginLoadError) {
        let library = try PluginLibrary(path: path)
        self.info = library.info(name: name)
        self.library = library
        self.entry = library.entry
        self.queue = DispatchQueue(label: "adorch.plugin.\(name)")
        self.anyThreadShows = LockedValue(library.showsOnAnyThread ? AnyThreadShowRecord() : nil)
        var pluginLogger = logger
        pluginLogger[metadataKey: "plugin"] = "\(name)"
        let sink = Unmanaged.passRetained(CallbackSink(plugin: name, logger: pluginLogger, decodesPayloads: decodesPayloads, onReport: onReport))
        self.sink = sink
        self.host = .allocate(capacity: 1)
        host.initialize(to: adorch_host(
            struct_size: UInt32(MemoryLayout<adorch_host>.size), abi_major: PluginABI.major,
            abi_minor: PluginABI.minor, host_data: sink.toOpaque(),
            loaded: hostLoaded, failed: hostFailed, event: hostEvent, log: hostLog
        ))
        let code = queue.sync { configJSON.withCString { entry.pointee.`init`(host, $0) } }
        // Every stored property is set, so a throw from here runs deinit, which frees the
        // host struct and the sink; the library stays mapped, as after any plugin's use.
        guard code == 0 else { throw .initFailed(path: path, name: name, code: code) }
        initialized = true
    }

    deinit {
        // The daemon shuts a plugin down before letting it go (or its init failed). One that
        // never finished shutting down may still call back: its host struct and sink are
        // leaked rather than freed under it. Nothing here may capture self.
        guard !initialized else { return }
        host.deallocate()
        sink.release()
        // The library stays mapped: a plugin thread that outlived deinit must not jump into
        // unmapped code. Reloading a changed file needs a restart.
    }

    // MARK: Calls into the plugin, each on its queue

    /// docs/rules.md, "Fresh object per load": a fresh object for this one load, loaded once.
    public func load(_ order: LoadOrder) {
        queue.async { [self] in
            guard initialized else { return }
            let report = sink.takeUnretainedValue()
            report.callbacks.earn(CallbackBounds.callbacksPerLoad)
            let object = order.withCRequest(pluginMinor: entry.pointee.abi_minor) { entry.pointee.ad_create(order.adID, $0) }
            guard let object else {
                report.deliver(order.adID, .failed(.internal, networkCode: 0, message: "ad_create returned NULL"))
                return
            }
            objects.withLock { $0[order.adID] = object }
            let code = entry.pointee.ad_load(object)
            if code != 0 {
                report.deliver(order.adID, .failed(AdErrorCode(abiValue: code), networkCode: 0, message: "ad_load returned \(code)"))
            }
        }
    }

    /// Whether ad_show may be called on any thread (showNow): the plugin declared
    /// ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD, and its calls have not lost it (AnyThreadShowRecord).
    public var showsOnAnyThread: Bool { anyThreadShows.withLock { $0.map { !$0.withdrawn } ?? false } }

    /// Presents an ad of a plugin that showsOnAnyThread, on the calling thread: whether the
    /// plugin could. The caller is the one that later asks for the ad's notify and destroy,
    /// so that those come after ad_show returned (plugin.h's [show] rule). The call that makes
    /// AnyThreadShowRecord withdraw the flag is logged; it stays withdrawn for the plugin's life.
    public func showNow(_ id: AdID, userID: String?) -> Bool {
        guard let object = objects.withLock({ $0[id] }) else { return false }
        sink.takeUnretainedValue().callbacks.earn(CallbackBounds.callbacksPerShow)
        let context = showContext(userID)
        let started = ContinuousClock.now
        let code = context.withCString { entry.pointee.ad_show(object, $0) }
        let took = ContinuousClock.now - started
        if anyThreadShows.withLock({ $0?.note(took) ?? false }) {
            sink.takeUnretainedValue().logger.warning("""
                plugin \(info.name): ad_show took \(milliseconds(took)) off its queue, and \(AnyThreadShowRecord.strikes) of its \
                last \(AnyThreadShowRecord.window) calls there took over the \(milliseconds(AnyThreadShowRecord.bound)) they may take: \
                its Shows go through its queue from now on
                """)
        }
        return code == 0
    }

    /// Presents an ad on the plugin's queue. `completion` hears whether the plugin could; with
    /// a `timeout`, false if its queue did not get to it in time (a call into it is stuck).
    /// Without one, whoever waits keeps its own deadline (a Show's is the engine's).
    public func show(_ id: AdID, userID: String?, timeout: DispatchTimeInterval?,
                     completion: @escaping @Sendable (Bool) -> Void) {
        let answered = LockedFlag()
        queuedShows.withLock { _ = $0.insert(id) }
        queue.async { [self] in
            var shown = false
            // Withdrawn while it waited behind a slow call: whoever waited has moved on.
            if queuedShows.withLock({ $0.remove(id) }) != nil, let object = objects.withLock({ $0[id] }) {
                sink.takeUnretainedValue().callbacks.earn(CallbackBounds.callbacksPerShow)
                let context = showContext(userID)
                shown = context.withCString { entry.pointee.ad_show(object, $0) } == 0
            }
            if answered.setIfUnset() { completion(shown) }
        }
        guard let timeout else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
            if answered.setIfUnset() { completion(false) }
        }
    }

    /// Drops a `show` of `id` that has not started on the queue yet (its answer would come
    /// too late to count); one already running runs to its end.
    public func withdrawShow(_ id: AdID) {
        queuedShows.withLock { _ = $0.remove(id) }
    }

    public func notify(_ id: AdID, event: ViewerEvent) {
        guard library.knows(event: event.abi) else { return }  // newer than the plugin's minor
        queue.async { [self] in
            guard let object = objects.withLock({ $0[id] }) else { return }
            entry.pointee.ad_notify(object, event.abi.rawValue, nil)
        }
    }

    /// Pauses or resumes an interactive session.
    public func control(_ id: AdID, _ control: SessionControl) {
        guard library.knows(event: control.abi) else { return }
        queue.async { [self] in
            guard let object = objects.withLock({ $0[id] }) else { return }
            entry.pointee.ad_notify(object, control.abi.rawValue, nil)
        }
    }

    public func lose(_ id: AdID, _ loss: AuctionLoss) {
        guard library.knows(event: .ADORCH_EVENT_LOSS) else { return }
        queue.async { [self] in
            guard let object = objects.withLock({ $0[id] }) else { return }
            "{\"reason\":\(loss.abi.rawValue)}".withCString { entry.pointee.ad_notify(object, adorch_event.ADORCH_EVENT_LOSS.rawValue, $0) }
        }
    }

    public func destroy(_ id: AdID) {
        queue.async { [self] in
            if let object = objects.withLock({ $0.removeValue(forKey: id) }) { entry.pointee.ad_destroy(object) }
            sink.takeUnretainedValue().deliver(id, .destroyed)
        }
    }

    /// Runs `answer` on the plugin's queue once the calls before it returned: an isolated
    /// plugin's heartbeat, which a call stuck in the plugin holds up.
    public func ping(_ answer: @escaping @Sendable () -> Void) {
        queue.async(execute: answer)
    }

    /// The plugin's own counters (a JSON object), or nil if it has none or is not answering
    /// within `timeout` (its queue is stuck in a slow call).
    public func stats(timeout: DispatchTimeInterval, completion: @escaping @Sendable (String?) -> Void) {
        let answered = LockedFlag()
        queue.async { [self] in
            let text = entry.pointee.stats_json.flatMap { $0() }.map { String(cString: $0) }
            if answered.setIfUnset() { completion(text) }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
            if answered.setIfUnset() { completion(nil) }
        }
    }

    /// Destroys every object the plugin still holds, then calls its deinit. Idempotent.
    /// Returns false if the plugin's queue did not get there within `timeout` (a call into
    /// it never returned): the daemon stops anyway, without that plugin's deinit.
    @discardableResult
    public func shutdown(timeout: DispatchTimeInterval) -> Bool {
        let done = DispatchSemaphore(value: 0)
        queue.async { [self] in
            if initialized {
                let all = objects.withLock { objects in
                    defer { objects.removeAll() }
                    return objects.sorted { $0.key < $1.key }
                }
                for (_, object) in all { entry.pointee.ad_destroy(object) }
                entry.pointee.deinit()
                initialized = false
            }
            done.signal()
        }
        return done.wait(timeout: .now() + timeout) == .success
    }
}

/// What the C callbacks reach through `host_data`, bounded as plugin.h says (CallbackBounds).
final class CallbackSink: Sendable {
    let plugin: String
    let logger: Logger
    let onReport: PluginReportHandler
    let decodesPayloads: Bool
    let callbacks = CallbackBudget()
    let details = SecondWindow(perSecond: CallbackBounds.detailBytesPerSecond)
    private let logLines = SecondWindow(perSecond: CallbackBounds.logLinesPerSecond)

    init(plugin: String, logger: Logger, decodesPayloads: Bool, onReport: @escaping PluginReportHandler) {
        self.plugin = plugin
        self.logger = logger
        self.decodesPayloads = decodesPayloads
        self.onReport = onReport
    }

    /// A report of the plugin's, if earned by a call or within ADORCH_CALLBACKS_PER_S; the host's own `.destroyed` always.
    func deliver(_ ad: AdID, _ report: PluginReport) {
        if report != .destroyed {
            guard callbacks.admit(warning: logger) else { return }
        }
        onReport(plugin, ad, report)
    }

    /// One of the plugin's log lines, within ADORCH_LOG_LINES_PER_S; one below the log level
    /// is neither written nor counted.
    func log(level: Logger.Level, _ text: String) {
        guard level >= logger.logLevel else { return }
        if logLines.admit(warning: logger, FloodNote.logLines) { logger.log(level: level, "\(CallbackBounds.logText(text))") }
    }
}

/// The line a flood leaves in the journal, once a second at most.
public enum FloodNote {
    public static func callbacks(_ n: Int) -> String {
        "\(n) callbacks dropped in the last second: over the \(CallbackBounds.callbacksPerSecond) a plugin may make in one (plugin.h, ADORCH_CALLBACKS_PER_S)"
    }

    public static func details(_ n: Int) -> String {
        "\(n) event details dropped in the last second: over the \(CallbackBounds.detailBytesPerSecond) bytes of them a plugin may send in one (plugin.h, ADORCH_DETAIL_BYTES_PER_S)"
    }

    public static func logLines(_ n: Int) -> String {
        "\(n) log lines dropped in the last second: over the \(CallbackBounds.logLinesPerSecond) a plugin may write in one (plugin.h, ADORCH_LOG_LINES_PER_S)"
    }
}

private func sink(_ host: UnsafePointer<adorch_host>?) -> CallbackSink? {
    guard let data = host?.pointee.host_data else { return nil }
    return Unmanaged<CallbackSink>.fromOpaque(data).takeUnretainedValue()
}

/// Decodes a loaded payload: it must be a JSON object; `expires_in_s`, `price`,
/// `tracks_impressions` and `notices` are read, and `notices` taken out of what apps get.
public func decodePayload(_ text: String) -> PluginReport {
    if text.isEmpty { return .loadedInvalid(reason: "loaded with an empty payload") }
    guard let (value, hadDuplicateKeys) = JSONValue.parseForwarding(text), case .object(var object) = value else {
        return .loadedInvalid(reason: "loaded with a payload that is not a JSON object")
    }
    // The billing URLs are the daemon's to send, not an app's to fire.
    let notices: AdNotices?
    switch object.removeValue(forKey: "notices").map({ readNotices($0, at: "notices") }) {
    case .failure(let problem)?: return .loadedInvalid(reason: problem.reason)
    case .success(let read)?: notices = read
    case nil: notices = nil
    }
    // The payload goes to apps as the plugin wrote it (never parsed again): unless a key came
    // twice, when readers would disagree on which value counts, or notices were taken out.
    // Then it goes as the daemon read it, the first of each.
    var forwarded = hadDuplicateKeys || notices != nil ? JSONValue.object(object).jsonString : text
    // A lifetime past a century is no lifetime a network means: not read, rather than overflowing.
    // Zero or less is an ad already expired: the engine's floor (Engine.shortestLifetime) raises
    // it as it does 1e-300, rather than the slot's ttl taking its place.
    let expiresIn = object["expires_in_s"]?.doubleValue.flatMap { $0 < 3e9 ? Duration.milliseconds(Int64(max(0, $0) * 1000)) : nil }
    let price = object["price"]?.doubleValue
    let tracksItself = object["tracks_impressions"].flatMap { $0.boolValue ?? $0.doubleValue.map { $0 != 0 } } ?? false
    // Several native ads come as {"ads": [...]}; anything else is one ad.
    // One ad keeps the plugin's own text: serializing it again costs more than the rest of a load.
    var items: [PayloadItem] = []
    if let ads = object["ads"]?.arrayValue {
        for (n, element) in ads.enumerated() {
            guard var element = element.objectValue else { continue }
            var own: AdNotices?
            switch element.removeValue(forKey: "notices").map({ readNotices($0, at: "ads[\(n)].notices") }) {
            case .failure(let problem)?: return .loadedInvalid(reason: problem.reason)
            case .success(let read)?: own = read
            case nil: own = nil
            }
            items.append(PayloadItem(json: JSONValue.object(element).jsonString, hasHeadline: !(element["headline"]?.stringValue ?? "").isEmpty, notices: own))
        }
        if notices != nil { return .loadedInvalid(reason: "notices of several ads go in each of \"ads\", not beside it") }
        if items.contains(where: { $0.notices != nil }) {
            object["ads"] = .array(items.compactMap { JSONValue.parse(Data($0.json.utf8)) })
            forwarded = JSONValue.object(object).jsonString
        }
    } else {
        items = [PayloadItem(json: forwarded, hasHeadline: !(object["headline"]?.stringValue ?? "").isEmpty, notices: notices)]
    }
    return .loaded(payloadJSON: forwarded, expiresIn: expiresIn, price: price,
                   tracksItself: tracksItself, items: items, rewardByNetwork: object["reward_by"]?.stringValue == "network", notices: notices)
}

/// Why a payload's notices cannot be taken, naming where.
struct NoticesProblem: Error { var reason: String }

/// A payload's "notices" (plugin.h): an object of http or https URL lists, each kind at most
/// `AdNotices.maxPerKind` long, each URL at most `AdNotices.maxURLBytes`.
func readNotices(_ value: JSONValue, at path: String) -> Result<AdNotices, NoticesProblem> {
    guard let object = value.objectValue else { return .failure(NoticesProblem(reason: "\(path) is not a JSON object")) }
    let known = NoticeKind.allCases.map(\.rawValue)
    if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
        return .failure(NoticesProblem(reason: "\(path) has the unknown key \"\(unknown)\" (known: \(known.joined(separator: ", ")))"))
    }
    var notices = AdNotices()
    for kind in NoticeKind.allCases {
        let key = kind.rawValue
        guard let list = object[key] else { continue }
        guard let urls = list.arrayValue else { return .failure(NoticesProblem(reason: "\(path).\(key) is not an array of URLs")) }
        guard urls.count <= AdNotices.maxPerKind else {
            return .failure(NoticesProblem(reason: "\(path).\(key) has \(urls.count) URLs, over the \(AdNotices.maxPerKind) a kind may have"))
        }
        for (n, url) in urls.enumerated() {
            guard let text = url.stringValue, text.utf8.count <= AdNotices.maxURLBytes, isNoticeURL(text) else {
                return .failure(NoticesProblem(reason: "\(path).\(key)[\(n)] is not an http or https URL of at most \(AdNotices.maxURLBytes) bytes"))
            }
            notices[kind].append(text)
        }
    }
    return .success(notices)
}

/// An absolute http or https URL with a host, escaped by the plugin (printable ASCII), once
/// the macros the daemon fills are.
private func isNoticeURL(_ text: String) -> Bool {
    let lower = text.prefix(8).lowercased()
    guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return false }
    let filled = AdNotices.daemonMacros.reduce(text) { $0.replacingOccurrences(of: $1, with: "0") }
    guard let url = URLComponents(string: filled), let host = url.percentEncodedHost, !host.isEmpty, !host.contains("%") else { return false }
    return url.port.map { (1...65535).contains($0) } ?? true
}

private let hostLoaded: @convention(c) (UnsafePointer<adorch_host>?, adorch_ad_id, UnsafePointer<CChar>?) -> Void = {
    host, ad, payload in
    if let payload, strnlen(payload, CallbackBounds.payloadBytes + 1) > CallbackBounds.payloadBytes {
        return sink(host)?.deliver(ad, .loadedInvalid(reason: "loaded with a payload over the \(CallbackBounds.payloadBytes) bytes plugin.h allows (ADORCH_PAYLOAD_MAX_BYTES)")) ?? ()
    }
    guard let sink = sink(host) else { return }
    let text = payload.map { String(cString: $0) } ?? ""
    sink.deliver(ad, sink.decodesPayloads ? decodePayload(text) : .loaded(payloadJSON: text, expiresIn: nil, price: nil))
}

private let hostFailed: @convention(c) (UnsafePointer<adorch_host>?, adorch_ad_id, Int32, Int64, UnsafePointer<CChar>?) -> Void = {
    host, ad, code, networkCode, message in
    sink(host)?.deliver(ad, .failed(AdErrorCode(abiValue: code), networkCode: networkCode,
                                    message: CallbackBounds.message(message.map { String(cString: $0) } ?? "")))
}

private let hostEvent: @convention(c) (UnsafePointer<adorch_host>?, adorch_ad_id, UInt32, UnsafePointer<CChar>?) -> Void = {
    host, ad, event, detail in
    let known = adorch_event(abiValue: event)
    // A detail over ADORCH_TEXT_MAX_BYTES is dropped, as one that is not a JSON object is,
    // and so is one past the plugin's ADORCH_DETAIL_BYTES_PER_S: before it is parsed.
    let text = detail.flatMap { detail -> String? in
        let length = strnlen(detail, CallbackBounds.textBytes + 1)
        guard length <= CallbackBounds.textBytes, let sink = sink(host),
              sink.details.admit(cost: length, warning: sink.logger, FloodNote.details) else { return nil }
        return String(cString: detail)
    }
    // A detail must be a JSON object to be passed on; anything else is dropped.
    let object = text.flatMap { JSONValue.parse(Data($0.utf8))?.objectValue }
    let report: PluginReport = switch known {
    case .ADORCH_EVENT_MEDIA_CACHED?: .mediaCached
    case .ADORCH_EVENT_REWARD?: .reward(transID: object?["trans_id"]?.stringValue)
    // One only the host sends, or a newer minor's, goes by its number.
    default: .other(name: known.flatMap { $0.isReportedByPlugins ? $0.vocabularyName : nil } ?? "event_\(event)",
                    detailJSON: object.map { JSONValue.object($0).jsonString })
    }
    sink(host)?.deliver(ad, report)
}

private let hostLog: @convention(c) (UnsafePointer<adorch_host>?, UInt32, UnsafePointer<CChar>?) -> Void = {
    host, level, message in
    guard let sink = sink(host) else { return }
    let text = message.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: strnlen($0, CallbackBounds.textBytes + 1)), as: UTF8.self) } ?? ""
    let swiftLevel: Logger.Level = switch level {
    case ...3: .error
    case 4: .warning
    case 5: .notice
    case 6: .info
    default: .debug
    }
    sink.log(level: swiftLevel, text)
}

private func milliseconds(_ d: Duration) -> String {
    String(format: "%.1f ms", Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15)
}

/// ad_show's context_json.
private func showContext(_ userID: String?) -> String { JSONValue.object(["user_id": .string(userID ?? "")]).jsonString }
