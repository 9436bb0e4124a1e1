import AdorchDaemon
import AdorchEngine
import AdorchFuzzSupport
import Foundation

/// A config file and its drop-ins: the input is split at lines `#---`; the first part is
/// the main file, the rest drop-ins merged over it in order. A config the parser takes is
/// then run.
func fuzzConfig(_ data: Data) {
    let parts = String(decoding: data, as: UTF8.self).components(separatedBy: "\n#---\n")
    let dropIns = parts.dropFirst().enumerated().map { (source: "fuzz.toml.d/\($0.offset).toml", text: $0.element) }
    guard let config = try? DaemonConfig.parse(toml: parts[0], source: "fuzz.toml", dropIns: Array(dropIns),
                                               mergedSource: "fuzz.toml (with drop-ins)") else { return }
    run(config)
}

/// The config's slots and scheduler settings in an engine on a manual clock, to each wake-up
/// it asks for: loads fill or not by turns, preloaded slots are shown. Whatever numbers the
/// parser took, the arithmetic on them must not trap (a backoff_base_ms it once took
/// killed the daemon at the first no-fill).
func run(_ config: DaemonConfig) {
    var engine = Engine(slots: config.slots, plugins: Set(config.slots.flatMap { $0.waterfall.map(\.plugin) }),
                        settings: config.scheduler, seed: 1)
    var now = Moment(nanoseconds: 1_000_000_000)
    var effects = engine.advance(to: now)
    for _ in 0..<20 {
        var next: [Effect] = []
        for case .load(let order) in effects {
            let report: PluginReport = order.adID % 3 == 0
                ? .loaded(payloadJSON: "{}", expiresIn: nil, price: 1) : .failed(.noFill, networkCode: 0, message: "")
            next += engine.pluginReported(report, for: order.adID, from: order.plugin, now: now)
        }
        for slot in config.slots where slot.format.isPreloaded { next += engine.show(slot: slot.id, userID: nil, privacy: nil, now: now).1 }
        guard let wake = engine.nextWakeup(after: now), wake > now else { return }
        now = wake
        effects = next + engine.advance(to: now)
    }
}

@main enum Main { static func main() { FuzzTarget.main(fuzzConfig) } }
