// openrtb — an adorch plugin that buys each ad by real-time bidding from an OpenRTB 2.6
// exchange, written against adorch/plugin.h only, as any outside plugin author would. The
// protocol (requests, strict responses, macros, native markup) is the OpenRTB module beside
// it; video markup goes through the VAST plugin's VAST module; this file is the ABI glue.
//
// Win, billing and loss notices of the bids it loads go to the daemon in the payload's
// "notices" (plugin.h): the daemon sends each once, through its durable outbox. Trackers
// (VAST, native) and the losses of responses that fill nothing the plugin fires itself.
//
// Threads: ad_* run on the host's plugin queue and return at once; each HTTP transfer runs
// on a thread of its own (BidExchange). Host callbacks are made while holding `plugin`'s lock, and ad_destroy and deinit
// take it too, so a destroyed ad is never reported and nothing is reported after deinit.

import AdorchJSON
import AdorchLocking
import CAdorchPlugin
import Foundation
import OpenRTB
import VAST

/// One load: its request, then the winning bid and its markup once the auction is done.
private struct AdState: Sendable {
    var load: BidLoad
    var offer: Offer?
    var won: [Won] = []
    /// Loss notices of this load's other bids, decided by the plugin: with the ad's notices
    /// when it fills, fired by the plugin when it does not.
    var losses: [String] = []
    /// Trackers fired for this ad, by name: each at most once.
    var fired: Set<String> = []
    var resolver: ChainResolver?
}

/// A bid that won its impression, with its markup made ready.
private struct Won: Sendable {
    var bid: AcceptedBid
    var payload: [String: JSONValue]
    /// Whether its markup came with the win notice (the notice was then sent at load).
    var markupFromWin: Bool
    var vast: ResolvedAd?
    var native: NativeMarkup?
}

/// Why a winning bid's markup could not be made ready.
private struct MarkupProblem: Error { var why: String }

private struct PluginState: ~Copyable {
    var hostAddress: UInt = 0
    var exchange: BidExchange?
    var settings: BidderSettings?
    var ads: [adorch_ad_id: AdState] = [:]
    var counters: [String: Int] = [:]

    var host: UnsafePointer<adorch_host>? { UnsafePointer(bitPattern: hostAddress) }
}

private let plugin = LockedValue(PluginState())
/// How long a notice or a markup fetch may take: it is not an auction, tmax does not bound it.
private let noticeTimeout: Duration = .seconds(5)
/// Loss notices sent for one response at most (plugin.h's bound on a payload's "due"); the
/// rest are counted (`loss_notices_dropped`).
private let maxLossNotices = 16

private func count(_ key: String, _ n: Int = 1) { plugin.withLock { $0.counters[key, default: 0] += n } }

private func log(_ level: adorch_log_level, _ text: String) {
    plugin.withLock { state in
        guard let host = state.host else { return }
        text.withCString { host.pointee.log(host, level.rawValue, $0) }
    }
}

/// Fires one tracker URL (or a loss notice of a load that filled nothing), once per ad and
/// name; the answer only counts.
private func fire(_ name: String, _ url: String, of id: adorch_ad_id?) {
    guard !url.isEmpty else { return }
    guard let target = NoticeMacros.url(url) else { return count("notices_refused") }
    if let id {
        let first = plugin.withLock { state -> Bool in
            guard state.ads[id] != nil else { return false }
            return state.ads[id]!.fired.insert(name).inserted
        }
        guard first else { return }
    }
    guard let exchange = plugin.withLock({ $0.exchange }) else { return }
    count("notices_sent")
    exchange.get(target, timeout: noticeTimeout, limit: 64 << 10) { outcome in
        if case .response(let status, _) = outcome, (200..<400).contains(status) { return }
        count("notices_failed")
    }
}

private func string(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }

/// plugin.h's ADORCH_STRUCT_HAS, which Swift cannot import.
private func covers(_ size: UInt32, _ offset: Int?, _ fieldSize: Int) -> Bool {
    offset.map { Int(size) >= $0 + fieldSize } ?? false
}

private let formats: [UInt32: BidLoad.Format] = [
    adorch_format.ADORCH_FORMAT_REWARDED.rawValue: .rewarded, adorch_format.ADORCH_FORMAT_FULLSCREEN.rawValue: .fullscreen,
    adorch_format.ADORCH_FORMAT_INTERSTITIAL.rawValue: .interstitial, adorch_format.ADORCH_FORMAT_BANNER.rawValue: .banner,
    adorch_format.ADORCH_FORMAT_SPLASH.rawValue: .splash, adorch_format.ADORCH_FORMAT_NATIVE.rawValue: .native,
]

/// The load's privacy as the request gives it (ABI 1.4); none from an older host.
private func privacy(_ request: UnsafePointer<adorch_request>) -> LoadPrivacy {
    var facts = LoadPrivacy()
    guard covers(request.pointee.struct_size, MemoryLayout<adorch_request>.offset(of: \.privacy), MemoryLayout<UnsafeRawPointer>.size),
          let pointer = request.pointee.privacy,
          covers(pointer.pointee.struct_size, MemoryLayout<adorch_privacy>.offset(of: \.max_content_rating), MemoryLayout<UnsafeRawPointer>.size)
    else { return facts }
    let p = pointer.pointee
    facts.privacyClass = LoadPrivacy.Class(rawValue: Int(p.privacy_class)) ?? .childDirected
    facts.gdpr = p.gdpr < 0 ? nil : Int(p.gdpr)
    (facts.coppa, facts.underAgeOfConsent, facts.nonPersonalized) = (p.coppa != 0, p.under_age_of_consent != 0, p.non_personalized != 0)
    (facts.tcString, facts.gpp, facts.usPrivacy) = (string(p.tc_string), string(p.gpp), string(p.us_privacy))
    facts.gppSectionIDs = p.gpp_sid.map { Array(UnsafeBufferPointer(start: $0, count: Int(p.gpp_sid_count))).map(Int.init) } ?? []
    return facts
}

/// A waterfall entry's server_parameter: space-separated key=value tokens; only `floor=CPM` so far.
private func entryFloor(_ text: String) -> Result<Double, SettingsError> {
    var floor = 0.0
    for token in text.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
        guard let eq = token.firstIndex(of: "=") else { return .failure(SettingsError(key: "server_parameter", problem: "token '\(token)' is not key=value")) }
        let (key, value) = (token[..<eq], token[token.index(after: eq)...])
        guard key == "floor" else { return .failure(SettingsError(key: "server_parameter", problem: "has the unknown key '\(key)' (known: floor)")) }
        guard let cpm = Double(value), cpm.isFinite, cpm >= 0 else { return .failure(SettingsError(key: "server_parameter", problem: "floor must be a CPM of 0 or more, got \(value)")) }
        floor = cpm
    }
    return .success(floor)
}

/// The host's error for a response that could not be used.
private func hostError(_ kind: ResponseFailure.Kind) -> adorch_error {
    kind == .httpStatus ? .ADORCH_ERROR_NETWORK : .ADORCH_ERROR_MALFORMED
}

private func fail(_ id: adorch_ad_id, _ error: adorch_error, _ counter: String, _ message: String) {
    count(counter)
    // No ad, so no payload to carry them: the plugin sends these itself, once, from memory.
    for url in plugin.withLock({ $0.ads[id]?.losses ?? [] }) { fire("loss", url, of: nil) }
    plugin.withLock { state in
        guard let host = state.host, let ad = state.ads[id] else { return }
        ad.load.privacy.redacting(message).withCString { host.pointee.failed(host, id, Int32(error.rawValue), 0, $0) }
    }
}

/// A line about one load's auction, with the load's consent strings cut out (`redacting`).
private func log(_ level: adorch_log_level, about id: adorch_ad_id, _ text: String) {
    guard let privacy = plugin.withLock({ $0.ads[id]?.load.privacy }) else { return }
    log(level, privacy.redacting(text))
}

/// The auction's answer came: read it, notify the losers, make the winners' markup ready.
private func answered(_ id: adorch_ad_id, _ outcome: BidExchange.Outcome, offer: Offer, settings: BidderSettings) {
    let status: Int, body: [UInt8]
    switch outcome {
    case .timeout: return fail(id, .ADORCH_ERROR_TIMEOUT, "timeouts", "timeout: no answer within tmax (\(offer.tmax))")
    case .tooLarge(let bytes):
        return fail(id, .ADORCH_ERROR_MALFORMED, "failed_response_too_large", "response_too_large: \(bytes) bytes or more, over the \(settings.maxResponseBytes) taken")
    case .failed(let why): return fail(id, .ADORCH_ERROR_NETWORK, "network_errors", "network: \(why)")
    case .response(let s, let b): (status, body) = (s, b)
    }
    let read: ReadResponse
    switch BidResponseReader(settings: settings).read(status: status, body: body, offer: offer) {
    case .failure(let failure): return fail(id, hostError(failure.kind), "failed_\(failure.kind.rawValue)", failure.description)
    case .success(let r): read = r
    }
    // A response of thousands of bids costs a few log lines and `maxLossNotices` requests: the
    // exchange chooses the notice URLs, and must not make the plugin flood anyone.
    var lossNotices: [String] = []
    for (n, refused) in read.refused.enumerated() {
        count("refused_\(refused.reason.rawValue)")
        if n < 3 { log(ADORCH_LOG_WARNING, about: id, "openrtb: \(refused)") }
        lossNotices.append(NoticeMacros(refused: refused, offer: offer).substitute(refused.lossURL))
    }
    if read.refused.count > 3 { log(ADORCH_LOG_WARNING, about: id, "openrtb: and \(read.refused.count - 3) more bids refused in that response") }
    lost(lossNotices, of: id)
    // Each impression's bids, best first: the best whose markup is usable wins it (prepare).
    let candidates = Dictionary(grouping: read.bids, by: \.impID)
    guard !candidates.isEmpty else {
        // The first refusals name the trouble; a response of thousands of bad bids stays one line.
        let more = read.refused.count > 3 ? "; and \(read.refused.count - 3) more" : ""
        let reason = read.refused.isEmpty ? (read.noBidReason.map { "no bid (nbr \($0))" } ?? "no bid")
            : "no bid taken: \(read.refused.prefix(3).map(\.description).joined(separator: "; "))\(more)"
        return fail(id, .ADORCH_ERROR_NO_FILL, read.refused.isEmpty ? "no_bids" : "no_valid_bids", reason)
    }
    let ordered = offer.imps.keys.sorted { (Int($0) ?? 0, $0) < (Int($1) ?? 0, $1) }.compactMap { candidates[$0] }
    prepare(id, ordered, offer: offer, ready: [])
}

/// Loss notices the plugin decided for this load: kept for its payload, `maxLossNotices` at
/// most; the exchange chooses the URLs, and must not make the plugin flood anyone.
private func lost(_ urls: [String], of id: adorch_ad_id) {
    let urls = urls.filter { !$0.isEmpty }
    let dropped = plugin.withLock { state -> Int in
        guard state.ads[id] != nil else { return 0 }
        let room = max(0, maxLossNotices - state.ads[id]!.losses.count)
        state.ads[id]!.losses += urls.prefix(room)
        return max(0, urls.count - room)
    }
    if dropped > 0 { count("loss_notices_dropped", dropped) }
}

/// Notices for a settled impression: every bid under its winner lost to a higher one (102).
private func lost(_ bids: ArraySlice<AcceptedBid>, offer: Offer, of id: adorch_ad_id) {
    lost(bids.map { NoticeMacros(bid: $0, offer: offer, loss: .lostToHigherBid).substitute($0.lossURL) }, of: id)
}

/// Makes each impression's winner ready in turn, best bid first (fetching its markup from its
/// win notice, resolving VAST): a bid whose markup is unusable is refused (`failed_markup`,
/// loss notice 3) and the next one tried, so a high bid with broken markup cannot keep the
/// slot empty. Then reports the load.
private func prepare(_ id: adorch_ad_id, _ pending: [[AcceptedBid]], offer: Offer, ready: [Won], problems: [String] = []) {
    guard let bids = pending.first else {
        guard ready.isEmpty else { return loaded(id, ready) }
        return fail(id, .ADORCH_ERROR_MALFORMED, "failed_markup", "no bid with usable markup: \(problems.prefix(3).joined(separator: "; "))")
    }
    guard let bid = bids.first else { return prepare(id, Array(pending.dropFirst()), offer: offer, ready: ready, problems: problems) }
    let next: @Sendable (Result<Won, MarkupProblem>) -> Void = { result in
        switch result {
        case .success(let won):
            count("bids_won")
            lost(bids.dropFirst(), offer: offer, of: id)
            prepare(id, Array(pending.dropFirst()), offer: offer, ready: ready + [won], problems: problems)
        case .failure(let problem):
            count("refused_bad_markup")
            log(ADORCH_LOG_WARNING, about: id, "openrtb: bid \(bid.id) refused (bad_markup): \(problem.why)")
            lost([NoticeMacros(bid: bid, offer: offer, loss: .invalidBidResponse).substitute(bid.lossURL)], of: id)
            prepare(id, [Array(bids.dropFirst())] + pending.dropFirst(), offer: offer, ready: ready, problems: problems + ["bid \(bid.id): \(problem.why)"])
        }
    }
    switch bid.markup {
    case .inline(let adm): make(id, bid, markup: adm, fromWin: false, offer: offer, done: next)
    case .onWin:
        guard let exchange = plugin.withLock({ $0.exchange }), let url = NoticeMacros.url(NoticeMacros(bid: bid, offer: offer).substitute(bid.winURL)) else {
            return next(.failure(MarkupProblem(why: "its nurl is not an http or https URL")))
        }
        count("markups_fetched")
        exchange.get(url, timeout: noticeTimeout, limit: 1 << 20) { outcome in
            guard case .response(200, let body) = outcome, !body.isEmpty else { return next(.failure(MarkupProblem(why: "the win notice gave no markup (\(outcome))"))) }
            make(id, bid, markup: String(decoding: body, as: UTF8.self), fromWin: true, offer: offer, done: next)
        }
    }
}

/// The payload the app gets for one bid, once its markup is usable.
private func make(_ id: adorch_ad_id, _ bid: AcceptedBid, markup: String, fromWin: Bool, offer: Offer, done: @escaping @Sendable (Result<Won, MarkupProblem>) -> Void) {
    let adm = NoticeMacros(bid: bid, offer: offer).substitute(markup)
    var payload: [String: JSONValue] = [
        "network": "openrtb", "price": .double(bid.price), "currency": .string(offer.currency), "bid_id": .string(bid.id),
        "seat": .string(bid.seat), "creative_id": .string(bid.creativeID), "deal_id": .string(bid.dealID),
        "advertiser_domains": .array(bid.advertiserDomains.map { .string($0) }),
        "expires_in_s": .int(max(1, Int64(bid.expiry / .seconds(1)))), "tracks_impressions": false,
    ]
    switch bid.media {
    case .banner:
        payload["creative_type"] = "banner"
        payload["html"] = .string(adm)
        done(.success(Won(bid: bid, payload: payload, markupFromWin: fromWin)))
    case .native:
        do throws(NativeMarkup.Problem) {
            let native = try NativeMarkup(adm: adm)
            payload["creative_type"] = "native"
            for (key, value) in native.assets { payload[key] = value }
            payload["click_url"] = .string(native.clickURL)
            done(.success(Won(bid: bid, payload: payload, markupFromWin: fromWin, native: native)))
        } catch { done(.failure(MarkupProblem(why: error.description))) }
    case .video, .audio:
        guard let exchange = plugin.withLock({ $0.exchange }), let load = plugin.withLock({ $0.ads[id]?.load }) else { return }
        var preferences = MediaPreferences()
        (preferences.width, preferences.height) = (load.width, load.height)
        let resolver = ChainResolver(settings: ChainResolver.Settings(preferences: preferences), deadline: .now + noticeTimeout,
            fetch: { url, timeout, completion in
                guard let target = NoticeMacros.url(url) else { return completion(.failure(.failed("not an http or https URL"))) }
                exchange.get(target, timeout: timeout, limit: 1 << 20) { outcome in
                    switch outcome {
                    case .response(let status, let body) where (200..<300).contains(status): completion(.success(Data(body)))
                    case .response(let status, _): completion(.failure(.failed("HTTP \(status)")))
                    case .timeout: completion(.failure(.timeout))
                    case .tooLarge(let bytes): completion(.failure(.failed("\(bytes) bytes, too large")))
                    case .failed(let why): completion(.failure(.failed(why)))
                    }
                }
            },
            ping: { url in fire("vast-error:\(url)", url, of: id) })
        plugin.withLock { $0.ads[id]?.resolver = resolver }
        resolver.resolve(document: Data(adm.utf8)) { [payload] result in
            var payload = payload
            switch result {
            case .failure(let failure): done(.failure(MarkupProblem(why: failure.description)))
            case .success(let vast):
                for (key, value) in JSONValue.parse((try? JSONSerialization.data(withJSONObject: vast.payload())) ?? Data())?.objectValue ?? [:] where key != "network" {
                    payload[key] = value
                }
                payload["creative_type"] = "video"
                // The shorter of the bid's exp and the VAST <Expires>.
                if let expires = vast.inline.expires { payload["expires_in_s"] = .int(min(Int64(expires), payload["expires_in_s"]?.intValue ?? Int64(expires))) }
                payload["network"] = "openrtb"
                done(.success(Won(bid: bid, payload: payload, markupFromWin: fromWin, vast: vast)))
            }
        }
    }
}

/// One winner's notices for the daemon (plugin.h, "notices"): the loss reason and the
/// impression's time left for it to fill in; no win notice when the markup came with it.
private func notices(of won: Won, offer: Offer, due: [String]) -> JSONValue {
    var billing = NoticeMacros(bid: won.bid, offer: offer)
    billing.kept = ["AUCTION_IMP_TS"]
    var loss = NoticeMacros(bid: won.bid, offer: offer, loss: .expired)
    loss.kept = ["AUCTION_LOSS"]
    let lists: [(String, [String])] = [
        ("win", won.markupFromWin ? [] : [NoticeMacros(bid: won.bid, offer: offer).substitute(won.bid.winURL)]),
        ("billing", [billing.substitute(won.bid.billingURL)]), ("loss", [loss.substitute(won.bid.lossURL)]), ("due", due),
    ]
    // Only URLs the daemon takes: a bid's unusable one costs that notice, not the ad.
    return .object(Dictionary(uniqueKeysWithValues: lists.map { key, urls in (key, .array(urls.compactMap(daemonURL).map { .string($0) })) }))
}

/// A notice URL as the daemon takes it: http or https, escaped, the macros the daemon fills
/// left as written; nil for none.
private func daemonURL(_ text: String) -> String? {
    guard !text.isEmpty, var url = NoticeMacros.url(text)?.absoluteString else { return nil }
    for macro in ["AUCTION_LOSS", "AUCTION_IMP_TS"] { url = url.replacingOccurrences(of: "$%7B\(macro)%7D", with: "${\(macro)}") }
    return url
}

/// Every winner's markup is ready: the load succeeded.
private func loaded(_ id: adorch_ad_id, _ won: [Won]) {
    count("fills")
    plugin.withLock { state in
        guard let host = state.host, let ad = state.ads[id], let offer = ad.offer else { return }
        state.ads[id]!.won = won
        // Several native ads asked at once come as {"ads": [...]} (plugin.h, `loaded`), however many were won.
        let several = ad.load.count > 1
        let items = won.enumerated().map { n, w in
            JSONValue.object(w.payload.merging(["notices": notices(of: w, offer: offer, due: n == 0 ? ad.losses : [])]) { $1 })
        }
        let payload: JSONValue = !several ? items[0] : ["ads": .array(items), "price": .double(won.map(\.bid.price).max() ?? 0),
                                                        "expires_in_s": .int(won.compactMap { $0.payload["expires_in_s"]?.intValue }.min() ?? 1)]
        payload.jsonString.withCString { host.pointee.loaded(host, id, $0) }
    }
}

/// The trackers of one app event, for every winner of the ad (its notices are the daemon's).
private func notify(_ id: adorch_ad_id, _ event: UInt32, _ detail: String?) {
    let won = plugin.withLock { state in state.ads[id]?.won ?? [] }
    for (index, w) in won.enumerated() {
        let tag = "\(index)"
        switch event {
        case adorch_event.ADORCH_EVENT_IMPRESSION.rawValue:
            let trackers = (w.vast.map { $0.tracking.impressions + ($0.tracking.events["creativeView"] ?? []) } ?? []) + (w.native?.impressionTrackers ?? [])
            for (n, url) in trackers.enumerated() { fire("imp\(tag).\(n)", url, of: id) }
        case adorch_event.ADORCH_EVENT_CLICK.rawValue:
            let trackers = (w.vast?.tracking.clickTracking ?? []) + (w.native?.clickTrackers ?? [])
            for (n, url) in trackers.enumerated() { fire("click\(tag).\(n)", url, of: id) }
        default:
            let names: [UInt32: String] = [
                adorch_event.ADORCH_EVENT_START.rawValue: "start", adorch_event.ADORCH_EVENT_FIRST_QUARTILE.rawValue: "firstQuartile",
                adorch_event.ADORCH_EVENT_MIDPOINT.rawValue: "midpoint", adorch_event.ADORCH_EVENT_THIRD_QUARTILE.rawValue: "thirdQuartile",
                adorch_event.ADORCH_EVENT_COMPLETE.rawValue: "complete", adorch_event.ADORCH_EVENT_SKIP.rawValue: "skip",
                adorch_event.ADORCH_EVENT_CLOSE.rawValue: "close",
            ]
            guard let name = names[event], let urls = w.vast?.tracking.events[name] else { continue }
            for (n, url) in urls.enumerated() { fire("\(name)\(tag).\(n)", url, of: id) }
        }
    }
}

nonisolated(unsafe) private let entryStorage: UnsafeMutablePointer<adorch_plugin_entry_t> = {
    let entry = UnsafeMutablePointer<adorch_plugin_entry_t>.allocate(capacity: 1)
    entry.initialize(to: adorch_plugin_entry_t(
        abi_major: UInt32(ADORCH_PLUGIN_ABI_MAJOR),
        abi_minor: UInt32(ADORCH_PLUGIN_ABI_MINOR),
        struct_size: UInt32(MemoryLayout<adorch_plugin_entry_t>.size),
        name: UnsafePointer(strdup("openrtb")),
        version: UnsafePointer(strdup("0.1.0")),
        description: UnsafePointer(strdup("an OpenRTB 2.6 exchange: one bid request per load, strict responses, win, billing and loss notices")),
        formats: formats.keys.reduce(0) { $0 | (1 << $1) },
        init: { host, config in
            guard let host else { return 1 }
            let settings: BidderSettings
            do throws(SettingsError) {
                settings = try BidderSettings(config: JSONValue.parse(Data(string(config).utf8)) ?? .null)
            } catch {
                let line = "openrtb: \(error)"
                line.withCString { host.pointee.log(host, ADORCH_LOG_ERROR.rawValue, $0) }
                return 1
            }
            let exchange = BidExchange(userAgent: "adorch-openrtb/0.1")
            let address = UInt(bitPattern: host)
            plugin.withLock { state in
                state = PluginState()
                (state.hostAddress, state.exchange, state.settings) = (address, exchange, settings)
            }
            // Without any user and password the URL holds: the journal is no place for them.
            var shown = URLComponents(url: settings.endpoint, resolvingAgainstBaseURL: false)
            shown?.user = nil
            shown?.password = nil
            log(ADORCH_LOG_INFO, "openrtb: bidding at \(shown?.string ?? "its endpoint") (tmax \(settings.tmax), \(settings.currency), floor \(settings.floor))")
            return 0
        },
        deinit: {
            // Transfers still running end on their own, by their time limit, into a state with no ads.
            plugin.withLock { state in
                for ad in state.ads.values { ad.resolver?.cancel() }
                state = PluginState()
            }
        },
        ad_create: { id, request in
            guard let request else { return nil }
            let r = request.pointee
            guard let format = formats[r.format] else { return nil }
            var floor: Double
            switch entryFloor(string(r.server_parameter)) {
            case .success(let f): floor = f
            case .failure(let problem):
                log(ADORCH_LOG_ERROR, "openrtb: slot \(string(r.slot_id)): \(problem)")
                return nil
            }
            let uid = covers(r.struct_size, MemoryLayout<adorch_request>.offset(of: \.load_uid), MemoryLayout<UnsafeRawPointer>.size) ? string(r.load_uid) : ""
            // The slot's floor (1.4) over the entry's own when higher.
            if covers(r.struct_size, MemoryLayout<adorch_request>.offset(of: \.bid_floor), MemoryLayout<Double>.size), r.bid_floor.isFinite {
                floor = max(floor, r.bid_floor)
            }
            let load = BidLoad(format: format, loadUID: uid.isEmpty ? UUID().uuidString : uid, slot: string(r.slot_id), adUnit: string(r.ad_unit_id),
                               width: Int(r.width), height: Int(r.height), count: Int(r.count), testMode: r.test_mode != 0,
                               // plugin.h rule 3: the answer is due ADORCH_DEADLINE_MARGIN_MS before the deadline.
                               timeLeft: .milliseconds(max(1, Int64(r.timeout_ms) - Int64(ADORCH_DEADLINE_MARGIN_MS))), floor: floor, privacy: privacy(request))
            plugin.withLock { $0.ads[id] = AdState(load: load) }
            // The host only passes the object back: the id is all the plugin needs.
            return UnsafeMutableRawPointer(bitPattern: UInt(id))
        },
        ad_load: { opaque in
            let id = adorch_ad_id(UInt(bitPattern: opaque))
            guard let (load, exchange, settings) = plugin.withLock({ state in state.ads[id].map { ($0.load, state.exchange, state.settings) } }),
                  let exchange, let settings
            else { return Int32(adorch_error.ADORCH_ERROR_INTERNAL.rawValue) }
            let (json, offer) = BidRequestBuilder(settings: settings).build(load)
            plugin.withLock { $0.ads[id]?.offer = offer }
            count("requests")
            exchange.post(settings.endpoint, json: json.jsonData, timeout: offer.tmax, limit: settings.maxResponseBytes) { outcome in
                answered(id, outcome, offer: offer, settings: settings)
            }
            return 0
        },
        ad_show: { opaque, _ in
            let id = adorch_ad_id(UInt(bitPattern: opaque))
            let ready = plugin.withLock { state in state.ads[id].map { !$0.won.isEmpty } == true }
            return ready ? 0 : Int32(adorch_error.ADORCH_ERROR_NOT_READY.rawValue)
        },
        ad_notify: { opaque, event, detail in notify(adorch_ad_id(UInt(bitPattern: opaque)), event, detail.map { String(cString: $0) }) },
        ad_destroy: { opaque in
            let id = adorch_ad_id(UInt(bitPattern: opaque))
            plugin.withLock { state in state.ads.removeValue(forKey: id)?.resolver?.cancel() }
        },
        stats_json: {
            let counters = plugin.withLock { state in state.counters.merging(["live": state.ads.count]) { $1 } }
            let text = JSONValue.object(counters.mapValues { .int(Int64($0)) }).jsonString
            return statsText.withLock { kept in
                free(UnsafeMutableRawPointer(bitPattern: kept))
                kept = strdup(text).map { UInt(bitPattern: $0) } ?? 0
                return UnsafePointer(bitPattern: kept)
            }
        },
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
