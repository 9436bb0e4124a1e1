// swift-example — an adorch plugin written in Swift, to show the ABI works from both
// languages. It serves house ads after a short simulated latency, from its own Dispatch
// queue: completions arrive on another thread than the call, as with a real SDK.
//
// Swift cannot export a named data symbol, so it exports the function
// adorch_plugin_get_entry with @_cdecl (see adorch/plugin.h). The daemon and this plugin
// share one Swift runtime.

import AdorchLocking
import CAdorchPlugin
import Dispatch
import Glibc

/// One ad object: what the completion needs. Owned by the host through an Unmanaged pointer
/// from ad_create until ad_destroy.
private final class HouseAd {
    let id: adorch_ad_id
    let slot: String
    let format: UInt32

    init(id: adorch_ad_id, slot: String, format: UInt32) {
        self.id = id
        self.slot = slot
        self.format = format
    }
}

/// What the completions share with the plugin queue. Host callbacks are made while holding
/// the lock, so ad_destroy (which takes it too) can never be overtaken by a completion.
private struct State: ~Copyable {
    /// The host's address: kept as a number, since a pointer may not cross into the lock.
    var hostAddress: UInt = 0
    var live: Set<adorch_ad_id> = []
    /// Reported loaded: only these may be shown.
    var loaded: Set<adorch_ad_id> = []

    var host: UnsafePointer<adorch_host>? { UnsafePointer(bitPattern: hostAddress) }
}

private let state = LockedValue(State())
private let worker = DispatchQueue(label: "adorch.plugin.swift-example.worker")

private func log(_ host: UnsafePointer<adorch_host>, _ level: adorch_log_level, _ text: String) {
    text.withCString { host.pointee.log(host, level.rawValue, $0) }
}

private func payload(for ad: HouseAd) -> String {
    let formats = [1: "rewarded", 2: "fullscreen", 3: "interstitial"]
    return """
    {"network":"swift-example","title":"House ad from Swift","media_url":"https://example.invalid/swift.mp4",\
    "format":"\(formats[Int(ad.format)] ?? "unknown")","slot":"\(ad.slot)","expires_in_s":1800,"price":0.5,\
    "tracks_impressions":false}
    """
}

// Initialized once on first use (Swift globals are lazily and atomically initialized) and
// never written again: only read, from any thread, by the host.
nonisolated(unsafe) private let entryStorage: UnsafeMutablePointer<adorch_plugin_entry_t> = {
    let entry = UnsafeMutablePointer<adorch_plugin_entry_t>.allocate(capacity: 1)
    entry.initialize(to: adorch_plugin_entry_t(
        abi_major: UInt32(ADORCH_PLUGIN_ABI_MAJOR),
        abi_minor: UInt32(ADORCH_PLUGIN_ABI_MINOR),
        struct_size: UInt32(MemoryLayout<adorch_plugin_entry_t>.size),
        name: UnsafePointer(strdup("swift-example")),
        version: UnsafePointer(strdup("1.0.0")),
        description: UnsafePointer(strdup("house ads, written in Swift with @_cdecl")),
        formats: (1 << 1) | (1 << 2) | (1 << 3),
        init: { host, _ in
            guard let host else { return 1 }
            let address = UInt(bitPattern: host)
            state.withLock { $0.hostAddress = address }
            log(host, ADORCH_LOG_INFO, "swift-example ready")
            return 0
        },
        deinit: {
            // Drain pending completions before the host pointer goes away.
            worker.sync {}
            state.withLock { $0.hostAddress = 0 }
        },
        ad_create: { id, request in
            guard let request else { return nil }
            let ad = HouseAd(id: id, slot: String(cString: request.pointee.slot_id), format: request.pointee.format)
            state.withLock { _ = $0.live.insert(id) }
            return Unmanaged.passRetained(ad).toOpaque()
        },
        ad_load: { opaque in
            guard let opaque else { return Int32(adorch_error.ADORCH_ERROR_INTERNAL.rawValue) }
            let ad = Unmanaged<HouseAd>.fromOpaque(opaque).takeUnretainedValue()
            let (id, text) = (ad.id, payload(for: ad))
            worker.asyncAfter(deadline: .now() + .milliseconds(Int.random(in: 5...30))) {
                state.withLock { state in
                    guard let host = state.host, state.live.contains(id) else { return }
                    state.loaded.insert(id)
                    text.withCString { host.pointee.loaded(host, id, $0) }
                }
            }
            return 0
        },
        ad_show: { opaque, _ in
            guard let opaque else { return Int32(adorch_error.ADORCH_ERROR_NOT_READY.rawValue) }
            let id = Unmanaged<HouseAd>.fromOpaque(opaque).takeUnretainedValue().id
            return state.withLock { $0.loaded.contains(id) } ? 0 : Int32(adorch_error.ADORCH_ERROR_NOT_READY.rawValue)
        },
        ad_notify: { _, _, _ in },
        ad_destroy: { opaque in
            guard let opaque else { return }
            let ad = Unmanaged<HouseAd>.fromOpaque(opaque)
            let id = ad.takeUnretainedValue().id
            state.withLock { state in
                state.live.remove(id)
                state.loaded.remove(id)
            }
            ad.release()
        },
        stats_json: nil,
        // Not SHOW_ANY_THREAD: a Swift closure's first calls can take far longer than 1 ms.
        flags: 0
    ))
    return entry
}()

@_cdecl("adorch_plugin_get_entry")
public func adorchPluginGetEntry() -> UnsafePointer<adorch_plugin_entry_t> {
    UnsafePointer(entryStorage)
}
