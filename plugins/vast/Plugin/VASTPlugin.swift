// vast — an adorch plugin that fills rewarded, full-screen and interstitial slots from any
// VAST ad server (VAST 2.0, 3.0 and 4.x), written against adorch/plugin.h only, as any
// outside plugin author would. Swift, with Foundation's HTTP client and XML parser; the VAST
// logic itself (parsing, wrapper chains, media choice, macros) is the VAST module beside it.
//
// Threads: ad_* run on the host's plugin queue and return at once; HTTP runs on
// URLSession's own threads. Host callbacks are made while holding `plugin`'s lock, and
// ad_destroy and deinit take it too, so a destroyed ad is never reported and nothing is
// reported after deinit.

import AdorchLocking
import CAdorchPlugin
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import VAST

/// One load: what the request said, and what the plugin learned since.
private struct AdState: Sendable {
    var slot: String
    var format: UInt32
    var parameters: EntryParameters
    var macros: Macros
    var timeout: Duration
    var width: Int
    var height: Int
    var resolver: ChainResolver?
    var resolved: ResolvedAd?
    var shown = false
    /// VAST events whose URLs were fired: each once per ad.
    var fired: Set<String> = []
}

/// The plugin's state; the host pointer is kept as a number, since a pointer is not Sendable.
private struct PluginState: ~Copyable {
    var hostAddress: UInt = 0
    var session: URLSession?
    var settings = PluginSettings()
    var ads: [adorch_ad_id: AdState] = [:]
    var counters: [String: Int] = [:]

    var host: UnsafePointer<adorch_host>? { UnsafePointer(bitPattern: hostAddress) }
}

/// The plugin's own config ([plugins.vast] config in adorchd.toml).
private struct PluginSettings: Sendable {
    var trackingTimeout: Duration = .seconds(5)
    var userAgent = "adorch-vast/1.0"
    var maxWrappers = 5
}

/// A waterfall entry's server_parameter: space-separated key=value tokens.
struct EntryParameters: Sendable {
    var tagURL = ""
    var maxWrappers: Int?
    var types: [String]?
    var delivery: String?
    var bitrate: Int?

    struct Problem: Error { var message: String }

    static func parse(_ text: String) -> Result<EntryParameters, Problem> {
        var p = EntryParameters()
        for token in text.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            guard let eq = token.firstIndex(of: "=") else { return .failure(Problem(message: "token '\(token)' is not key=value")) }
            let key = token[..<eq], value = String(token[token.index(after: eq)...])
            switch key {
            case "tag_url": p.tagURL = value
            case "max_wrappers":
                guard let n = Int(value), (0...20).contains(n) else { return .failure(Problem(message: "max_wrappers is 0 to 20, got \(value)")) }
                p.maxWrappers = n
            case "types": p.types = value.split(separator: ",").map { $0.lowercased() }
            case "delivery":
                guard ["progressive", "streaming"].contains(value) else { return .failure(Problem(message: "delivery is progressive or streaming, got \(value)")) }
                p.delivery = value
            case "bitrate":
                guard let n = Int(value), n > 0 else { return .failure(Problem(message: "bitrate is kbit/s > 0, got \(value)")) }
                p.bitrate = n
            default: return .failure(Problem(message: "unknown key '\(key)'"))
            }
        }
        guard let url = URL(string: p.tagURL), ["http", "https"].contains(url.scheme ?? "") else {
            return .failure(Problem(message: "tag_url must be an http(s) URL, got '\(p.tagURL)'"))
        }
        return .success(p)
    }
}

private let plugin = LockedValue(PluginState())
private let fetchStarter = DispatchQueue(label: "adorch.plugin.vast.fetch")

private func count(_ key: String, _ n: Int = 1) { plugin.withLock { $0.counters[key, default: 0] += n } }

private func log(_ level: adorch_log_level, _ text: String) {
    plugin.withLock { state in
        guard let host = state.host else { return }
        text.withCString { host.pointee.log(host, level.rawValue, $0) }
    }
}

/// One GET within `timeout` (the whole exchange, not only the idle time).
private func httpGet(_ session: URLSession, _ userAgent: String, _ text: String, timeout: Duration,
                     completion: @escaping @Sendable (Result<Data, FetchFailure>) -> Void) {
    guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? "") else {
        return completion(.failure(.failed("not an http(s) URL")))
    }
    var request = URLRequest(url: url)
    request.timeoutInterval = requestTimeoutInterval(for: timeout)  // the limit itself is the timer below
    request.setValue(userAgent, forHTTPHeaderField: "User-Agent")
    let answered = LockedValue(false)
    let claim: @Sendable () -> Bool = { answered.withLock { done in defer { done = true }; return !done } }
    let task = session.dataTask(with: request) { data, response, error in
        guard claim() else { return }
        if let error {
            let timedOut = (error as? URLError)?.code == .timedOut
            return completion(.failure(timedOut ? .timeout : .failed(error.localizedDescription)))
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else { return completion(.failure(.failed("HTTP \(status)"))) }
        completion(.success(data ?? Data()))
    }
    task.resume()
    // The answer is given up on at the timeout, but the task is not cancelled: Foundation's
    // URLSession on Linux can crash the process when a cancel races the task's own end
    // (swift-corelibs-foundation #3296, "a task that in not in the registry"). The request's
    // timeoutInterval ends it soon after.
    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000))) {
        guard claim() else { return }
        completion(.failure(.timeout))
    }
}

/// Fires one tracking or error URL, asynchronously, with the tracking timeout; the answer
/// only counts.
private func ping(_ url: String) {
    let (session, settings) = plugin.withLock { ($0.session, $0.settings) }
    guard let session else { return }
    count("pings_sent")
    httpGet(session, settings.userAgent, url, timeout: settings.trackingTimeout) { result in
        if case .failure = result { count("pings_failed") }
    }
}

/// Fires the URLs of one VAST event of an ad, once per ad.
private func fire(_ event: String, of id: adorch_ad_id) {
    let urls: [String] = plugin.withLock { state in
        guard var ad = state.ads[id], let resolved = ad.resolved, !ad.fired.contains(event) else { return [] }
        ad.fired.insert(event)
        state.ads[id] = ad
        let tracking = resolved.tracking
        switch event {
        case "impression": return (tracking.impressions + (tracking.events["creativeView"] ?? [])).map { ad.macros.expand($0) }
        case "click": return tracking.clickTracking.map { ad.macros.expand($0) }
        default: return (tracking.events[event] ?? []).map { ad.macros.expand($0) }
        }
    }
    urls.forEach(ping)
}

/// The VAST event for a host event the app reported.
private let vastEvents: [UInt32: String] = [
    adorch_event.ADORCH_EVENT_IMPRESSION.rawValue: "impression", adorch_event.ADORCH_EVENT_CLICK.rawValue: "click",
    adorch_event.ADORCH_EVENT_CLOSE.rawValue: "close", adorch_event.ADORCH_EVENT_COMPLETE.rawValue: "complete",
    adorch_event.ADORCH_EVENT_SKIP.rawValue: "skip", adorch_event.ADORCH_EVENT_START.rawValue: "start",
    adorch_event.ADORCH_EVENT_FIRST_QUARTILE.rawValue: "firstQuartile", adorch_event.ADORCH_EVENT_MIDPOINT.rawValue: "midpoint",
    adorch_event.ADORCH_EVENT_THIRD_QUARTILE.rawValue: "thirdQuartile",
]

private func hostError(_ kind: ChainFailure.Kind) -> adorch_error {
    switch kind {
    case .noFill: .ADORCH_ERROR_NO_FILL
    case .timeout: .ADORCH_ERROR_TIMEOUT
    case .network: .ADORCH_ERROR_NETWORK
    case .malformed: .ADORCH_ERROR_MALFORMED
    }
}

private func string(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }

/// plugin.h's ADORCH_STRUCT_HAS, which Swift cannot import: whether a struct of `size` bytes
/// (the other side's struct_size) holds the field at `offset` of `fieldSize` bytes.
private func covers(_ size: UInt32, _ offset: Int?, _ fieldSize: Int) -> Bool {
    offset.map { Int(size) >= $0 + fieldSize } ?? false
}

/// What the request says of the load's privacy (ABI 1.4), for the VAST privacy macros; nil
/// from a host that gives none.
private func privacyFacts(_ request: UnsafePointer<adorch_request>) -> PrivacyFacts? {
    guard covers(request.pointee.struct_size, MemoryLayout<adorch_request>.offset(of: \.privacy), MemoryLayout<UnsafeRawPointer>.size),
          let privacy = request.pointee.privacy,
          covers(privacy.pointee.struct_size, MemoryLayout<adorch_privacy>.offset(of: \.max_content_rating), MemoryLayout<UnsafeRawPointer>.size)
    else { return nil }
    let p = privacy.pointee
    let personalized = p.privacy_class == adorch_privacy_class.ADORCH_PRIVACY_PERSONALIZED.rawValue
    let childDirected = p.privacy_class == adorch_privacy_class.ADORCH_PRIVACY_CHILD_DIRECTED.rawValue || p.coppa != 0
    return PrivacyFacts(
        gdpr: p.gdpr < 0 ? nil : p.gdpr != 0, tcString: string(p.tc_string),
        limitAdTracking: !personalized || p.non_personalized != 0, childDirected: childDirected, gpp: string(p.gpp),
        gppSectionIDs: p.gpp_sid.map { Array(UnsafeBufferPointer(start: $0, count: Int(p.gpp_sid_count))) } ?? []
    )
}

/// The load finished: tell the host, unless the ad was destroyed or the plugin stopped.
private func finish(_ id: adorch_ad_id, _ result: Result<ResolvedAd, ChainFailure>) {
    switch result {
    case .success(let ad): count("fills"); count("wrappers_followed", ad.wrappers)
    case .failure(let failure): count(failure.vastCode.map { "vast_error_\($0)" } ?? "failed_\(failure.kind)")
    }
    plugin.withLock { state in
        guard let host = state.host, state.ads[id] != nil else { return }
        switch result {
        case .success(let ad):
            state.ads[id]!.resolved = ad
            ad.payloadJSON().withCString { host.pointee.loaded(host, id, $0) }
        case .failure(let failure):
            failure.description.withCString {
                host.pointee.failed(host, id, Int32(hostError(failure.kind).rawValue), Int64(failure.vastCode ?? 0), $0)
            }
        }
    }
}

nonisolated(unsafe) private let entryStorage: UnsafeMutablePointer<adorch_plugin_entry_t> = {
    let entry = UnsafeMutablePointer<adorch_plugin_entry_t>.allocate(capacity: 1)
    entry.initialize(to: adorch_plugin_entry_t(
        abi_major: UInt32(ADORCH_PLUGIN_ABI_MAJOR),
        abi_minor: UInt32(ADORCH_PLUGIN_ABI_MINOR),
        struct_size: UInt32(MemoryLayout<adorch_plugin_entry_t>.size),
        name: UnsafePointer(strdup("vast")),
        version: UnsafePointer(strdup("1.1.0")),
        description: UnsafePointer(strdup("any VAST 2.0-4.x ad server: wrapper chains, media choice, tracking")),
        formats: (1 << adorch_format.ADORCH_FORMAT_REWARDED.rawValue) | (1 << adorch_format.ADORCH_FORMAT_FULLSCREEN.rawValue) | (1 << adorch_format.ADORCH_FORMAT_INTERSTITIAL.rawValue),
        init: { host, config in
            guard let host else { return 1 }
            var settings = PluginSettings()
            let object = (try? JSONSerialization.jsonObject(with: Data(string(config).utf8))) as? [String: Any] ?? [:]
            if let ms = object["tracking_timeout_ms"] as? Int, ms > 0 { settings.trackingTimeout = .milliseconds(ms) }
            if let agent = object["user_agent"] as? String, !agent.isEmpty { settings.userAgent = agent }
            if let depth = object["max_wrappers"] as? Int, (0...20).contains(depth) { settings.maxWrappers = depth }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpMaximumConnectionsPerHost = 8
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            let session = URLSession(configuration: configuration)
            let address = UInt(bitPattern: host)
            plugin.withLock { state in
                state = PluginState()
                state.hostAddress = address
                state.session = session
                state.settings = settings
            }
            log(ADORCH_LOG_INFO, "vast: ready (wrapper depth \(settings.maxWrappers), tracking timeout \(settings.trackingTimeout))")
            return 0
        },
        deinit: {
            let session = plugin.withLock { state -> URLSession? in
                for ad in state.ads.values { ad.resolver?.cancel() }
                defer { state = PluginState() }
                return state.session
            }
            // Not invalidateAndCancel: cancelling tasks in flight can crash (see httpGet).
            session?.finishTasksAndInvalidate()
        },
        ad_create: { id, request in
            guard let request else { return nil }
            let r = request.pointee
            let targeting = (try? JSONSerialization.jsonObject(with: Data(string(r.targeting_json).utf8))) as? [String: Any] ?? [:]
            var macros = Macros([
                "APPBUNDLE": targeting["app_id"] as? String ?? "", "SLOTID": string(r.slot_id),
                "USERID": r.reward.map { string($0.pointee.user_id) } ?? "", "TESTMODE": r.test_mode != 0 ? "1" : "0",
            ])
            macros.setPrivacy(privacyFacts(request))
            let parameters: EntryParameters
            switch EntryParameters.parse(string(r.server_parameter)) {
            case .success(let p): parameters = p
            case .failure(let problem):
                log(ADORCH_LOG_ERROR, "vast: server_parameter of slot \(string(r.slot_id)): \(problem.message)")
                return nil
            }
            let state = AdState(slot: string(r.slot_id), format: r.format, parameters: parameters, macros: macros,
                                timeout: .milliseconds(Int64(r.timeout_ms)), width: Int(r.width), height: Int(r.height))
            plugin.withLock { $0.ads[id] = state }
            // The host only passes the object back: the id is all the plugin needs.
            return UnsafeMutableRawPointer(bitPattern: UInt(id))
        },
        ad_load: { opaque in
            let id = adorch_ad_id(UInt(bitPattern: opaque))
            guard let (ad, session, settings) = plugin.withLock({ state in state.ads[id].map { ($0, state.session, state.settings) } }),
                  let session
            else { return Int32(adorch_error.ADORCH_ERROR_INTERNAL.rawValue) }
            count("loads")
            var preferences = MediaPreferences()
            if let types = ad.parameters.types { preferences.types = types }
            preferences.delivery = ad.parameters.delivery
            if let bitrate = ad.parameters.bitrate { preferences.targetBitrate = bitrate }
            // The request's size is the slot's player size.
            (preferences.width, preferences.height) = (ad.width, ad.height)
            let resolver = ChainResolver(
                settings: ChainResolver.Settings(maxWrappers: ad.parameters.maxWrappers ?? settings.maxWrappers,
                                                 preferences: preferences, macros: ad.macros),
                // A little before the host's own deadline, so the answer (and the error pings)
                // arrive while the host still waits.
                deadline: ContinuousClock.now + ad.timeout - min(.milliseconds(50), ad.timeout / 10),
                fetch: { url, timeout, completion in httpGet(session, settings.userAgent, url, timeout: timeout, completion: completion) },
                ping: ping
            )
            plugin.withLock { $0.ads[id]?.resolver = resolver }
            // Starting a URLSession task took up to 114 ms under load (adorch-plugin-validate's
            // time check): the plugin queue only hands the fetch to a thread of ours.
            fetchStarter.async { resolver.resolve(ad.parameters.tagURL) { finish(id, $0) } }
            return 0
        },
        ad_show: { opaque, _ in
            let id = adorch_ad_id(UInt(bitPattern: opaque))
            let ready = plugin.withLock { state -> Bool in
                guard state.ads[id]?.resolved != nil else { return false }
                state.ads[id]!.shown = true
                return true
            }
            return ready ? 0 : Int32(adorch_error.ADORCH_ERROR_NOT_READY.rawValue)
        },
        ad_notify: { opaque, event, _ in
            guard let name = vastEvents[event] else { return }
            fire(name, of: adorch_ad_id(UInt(bitPattern: opaque)))
        },
        ad_destroy: { opaque in
            let id = adorch_ad_id(UInt(bitPattern: opaque))
            // Loaded but never shown (expired, replaced, drained): VAST 4.1's notUsed.
            let unused = plugin.withLock { state in state.ads[id].map { $0.resolved != nil && !$0.shown } ?? false }
            if unused { fire("notUsed", of: id) }
            plugin.withLock { state in state.ads.removeValue(forKey: id)?.resolver?.cancel() }
        },
        stats_json: {
            let counters = plugin.withLock { state in state.counters.merging(["live": state.ads.count]) { $1 } }
            let data = (try? JSONSerialization.data(withJSONObject: counters, options: [.sortedKeys])) ?? Data("{}".utf8)
            return statsText.withLock { kept in
                free(UnsafeMutableRawPointer(bitPattern: kept))
                kept = strdup(String(decoding: data, as: UTF8.self)).map { UInt(bitPattern: $0) } ?? 0
                return UnsafePointer(bitPattern: kept)
            }
        },
        // Not SHOW_ANY_THREAD: ad_show takes the lock that ad_destroy holds while it cancels a
        // resolver's URLSession work, which has no 1 ms bound.
        flags: 0
    ))
    return entry
}()

/// The last stats string, kept until the next call (the header's rule), as an address.
private let statsText = LockedValue<UInt>(0)

@_cdecl("adorch_plugin_get_entry")
public func adorchPluginGetEntry() -> UnsafePointer<adorch_plugin_entry_t> {
    UnsafePointer(entryStorage)
}
