// The payload budget per plugin (docs/isolation.md, "Payload bytes per plugin"):
// what one plugin's ads may hold of the daemon's memory, whatever each ad's own bound.

extension Engine {
    /// The most bytes of payload one plugin's ads may hold at once, ready and shown still
    /// open, besides each payload's own bound (plugin.h, ADORCH_PAYLOAD_MAX_BYTES, 8 MiB).
    /// Forty ready ads just under 8 MiB each took the daemon from 39 to 376 MB: per ad, the
    /// bound let a plugin's buffers grow with the slots and their buffer sizes.
    public static let payloadBytesPerPlugin = 64 << 20

    /// The bytes a `.loaded` report would add to its plugin's ads: a preloaded ad keeps its
    /// payload, a Load's ads each keep their item.
    func payloadBytes(of report: PluginReport, for ad: AdRecord) -> Int {
        guard case .loaded(let payload, _, _, _, let items, _, _) = report else { return 0 }
        guard let rid = ad.requestID else { return payload.utf8.count }
        return items.prefix(requests[rid]?.count ?? items.count).reduce(0) { $0 + $1.json.utf8.count }
    }

    /// Why this load's payload may not be kept, or nil: it would take its plugin past
    /// `payloadBytesPerPlugin`. The load then fails as the plugin's fault, and its entry backs
    /// off as for any failure, so a plugin cannot make a slot load over and over against it.
    func payloadRefusal(of report: PluginReport, for ad: AdRecord) -> String? {
        let bytes = payloadBytes(of: report, for: ad)
        let held = ads.payloadBytes(of: ad.plugin)
        guard bytes > 0, held + bytes > Self.payloadBytesPerPlugin else { return nil }
        return "its payload of \(bytes) bytes would bring the payloads of plugin \(ad.plugin)'s ads to \(held + bytes) bytes, "
            + "over the \(Self.payloadBytesPerPlugin) one plugin's ads may hold (Engine.payloadBytesPerPlugin)"
    }
}
