import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import CAdorchPlugin
import Foundation

/// Every plugin under test, with its host struct and ledger, is kept for the life of the
/// process: a plugin thread that outlives deinit (a violation the validator reports) must
/// still find them. Kept here rather than only never freed, so LeakSanitizer sees them held.
private let everyPluginUnderTest = LockedValue<[PluginUnderTest]>([])

/// The plugin as the validator drives it: the host struct its callbacks go to, and every
/// [plugin queue] call made one at a time (from whichever thread asks) and timed.
///
/// @unchecked Sendable: it crosses the C boundary (the host struct, the plugin's objects);
/// calls into the plugin are serialized by `queueLock`, the timings by `timingLock`.
final class PluginUnderTest: @unchecked Sendable {
    let library: PluginLibrary
    let ledger = CallbackLedger()
    private let host: UnsafeMutablePointer<adorch_host>
    /// The plugin queue's one rule: never two calls at once.
    private let queueLock = NSLock()
    private let timingLock = NSLock()
    private var slowest: [String: Duration] = [:]
    private var overBound: [(function: String, took: Duration)] = []
    let bound: Duration
    /// Told after every call into the plugin returns (RunWatcher.progressed).
    private let returned: @Sendable () -> Void

    init(library: PluginLibrary, bound: Duration, returned: @escaping @Sendable () -> Void) {
        self.library = library
        self.bound = bound
        self.returned = returned
        host = .allocate(capacity: 1)
        host.initialize(to: adorch_host(
            struct_size: UInt32(MemoryLayout<adorch_host>.size), abi_major: PluginABI.major, abi_minor: PluginABI.minor,
            host_data: Unmanaged.passUnretained(ledger).toOpaque(), loaded: validatorLoaded, failed: validatorFailed, event: validatorEvent,
            log: validatorLog
        ))
        everyPluginUnderTest.withLock { $0.append(self) }
    }

    var entry: adorch_plugin_entry_t { library.entry.pointee }

    func initialize(configJSON: String) -> Int32 {
        ledger.setDeinitReturned(false)
        return call("init") { configJSON.withCString { entry.`init`(host, $0) } }
    }

    func deinitialize() {
        call("deinit") { entry.deinit() }
        ledger.setDeinitReturned(true)
    }

    /// ad_create for a fresh id; nil (with the id) when the plugin returned NULL.
    func create(_ request: Request, check: String) -> (id: UInt64, object: UnsafeMutableRawPointer?) {
        let id = ledger.create(check: check)
        let privacy = Request.privacies[Int(id % UInt64(Request.privacies.count))]
        let object = call("ad_create") { request.withCRequest(pluginMinor: entry.abi_minor, privacy: privacy) { entry.ad_create(id, $0) } }
        if object == nil { ledger.destroyed(id) }
        return (id, object)
    }

    /// ad_load; the plugin's immediate error, or 0.
    func load(_ id: UInt64, _ object: UnsafeMutableRawPointer) -> Int32 {
        // Marked before the call: the plugin may complete from inside it.
        ledger.loadCalled(id, refused: false)
        let code = call("ad_load") { entry.ad_load(object) }
        if code != 0 { ledger.loadCalled(id, refused: true) }
        return code
    }

    func show(_ object: UnsafeMutableRawPointer, context: String = #"{"user_id":"validator"}"#) -> Int32 {
        call("ad_show") { context.withCString { entry.ad_show(object, $0) } }
    }

    /// ad_show on the calling thread, outside the queue's one-call-at-a-time rule, as a host
    /// may call it for a plugin that declares ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD; its code
    /// and how long it took.
    func showOffQueue(_ object: UnsafeMutableRawPointer) -> (code: Int32, took: Duration) {
        let started = ContinuousClock.now
        let code = timed("ad_show") { #"{"user_id":"validator"}"#.withCString { entry.ad_show(object, $0) } }
        return (code, ContinuousClock.now - started)
    }

    func notify(_ object: UnsafeMutableRawPointer, _ event: UInt32, detail: String?) {
        call("ad_notify") {
            if let detail { detail.withCString { entry.ad_notify(object, event, $0) } } else { entry.ad_notify(object, event, nil) }
        }
    }

    /// ad_destroy; from its return on, any report for `id` is a violation.
    @discardableResult
    func destroy(_ id: UInt64, _ object: UnsafeMutableRawPointer) -> AdRecord? {
        call("ad_destroy") { entry.ad_destroy(object) }
        return ledger.destroyed(id)
    }

    func stats() -> String? {
        guard let function = entry.stats_json else { return nil }
        return call("stats_json") { function().map { String(cString: $0) } }
    }

    /// The slowest call of each function, and every call over the bound.
    var timings: (slowest: [String: Duration], overBound: [(function: String, took: Duration)]) {
        timingLock.lock()
        defer { timingLock.unlock() }
        return (slowest, overBound)
    }

    @discardableResult
    private func call<T>(_ function: String, _ body: () -> T) -> T {
        queueLock.lock()
        defer { queueLock.unlock() }
        return timed(function, body)
    }

    private func timed<T>(_ function: String, _ body: () -> T) -> T {
        let started = ContinuousClock.now
        let result = body()
        let took = ContinuousClock.now - started
        timingLock.lock()
        if took > slowest[function] ?? .zero { slowest[function] = took }
        if took > bound { overBound.append((function, took)) }
        timingLock.unlock()
        returned()
        return result
    }
}

/// One load request as the validator makes it: an order as the daemon's engine would give it,
/// whose deadline starts at its ad_create (`LoadOrder.withCRequest` builds the C request for
/// the validator and the loader alike).
struct Request: Sendable {
    var order: LoadOrder
    /// From ad_create to the deadline the plugin is given.
    var timeout: Duration

    init(format: AdFormat, serverParameter: String, timeout: Duration) {
        order = LoadOrder(adID: 0, plugin: "validator", slotID: "validator", format: format,
                          entry: WaterfallEntry(plugin: "validator", adUnitID: "validator-unit", serverParameter: serverParameter, timeout: timeout),
                          deadline: Moment(nanoseconds: 0),
                          reward: format == .rewarded ? RewardModel(name: "coins", amount: 10, extra: "") : nil,
                          testMode: true, targetingJSON: "{}")
        self.timeout = timeout
    }

    /// The loads' privacy (ABI 1.4), one class after another, every signal set in one of them:
    /// a plugin that reads request.privacy is exercised as the daemon will.
    static let privacies: [LoadPrivacy] = [
        LoadPrivacy(privacyClass: .personalized, signals: PrivacySignals(gdprApplies: .yes, tcString: "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA")),
        LoadPrivacy(privacyClass: .nonPersonalized, signals: PrivacySignals(
            gdprApplies: .no, gpp: "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA", gppSid: [2], usPrivacy: "1YYN", nonPersonalized: true)),
        LoadPrivacy(privacyClass: .childDirected, signals: PrivacySignals(childDirected: true, underAgeOfConsent: true, maxContentRating: .g)),
    ]

    func withCRequest<T>(pluginMinor: UInt32, privacy: LoadPrivacy, _ body: (UnsafePointer<adorch_request>) -> T) -> T {
        var order = order
        order.deadline = Moment.monotonicNow() + .milliseconds(timeout.millisecondsUInt32)
        order.privacy = privacy
        return order.withCRequest(pluginMinor: pluginMinor, body)
    }
}

private func ledger(_ host: UnsafePointer<adorch_host>?) -> CallbackLedger? {
    host?.pointee.host_data.map { Unmanaged<CallbackLedger>.fromOpaque($0).takeUnretainedValue() }
}

private let validatorLoaded: @convention(c) (UnsafePointer<adorch_host>?, adorch_ad_id, UnsafePointer<CChar>?) -> Void = {
    host, ad, payload in
    ledger(host)?.loaded(ad, payload: payload.map { String(cString: $0) } ?? "")
}

private let validatorFailed: @convention(c) (UnsafePointer<adorch_host>?, adorch_ad_id, Int32, Int64, UnsafePointer<CChar>?) -> Void = {
    host, ad, error, networkCode, message in
    ledger(host)?.failed(ad, error: error, networkCode: networkCode, message: message.map { String(cString: $0) } ?? "")
}

private let validatorEvent: @convention(c) (UnsafePointer<adorch_host>?, adorch_ad_id, UInt32, UnsafePointer<CChar>?) -> Void = {
    host, ad, event, detail in
    ledger(host)?.event(ad, event, detail: detail.map { String(cString: $0) })
}

private let validatorLog: @convention(c) (UnsafePointer<adorch_host>?, UInt32, UnsafePointer<CChar>?) -> Void = {
    host, level, message in
    ledger(host)?.logged(level: level, message.map { String(cString: $0) } ?? "")
}
