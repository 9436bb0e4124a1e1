import XCTest

@testable import AdorchEngine

/// Drives an engine with a manual clock and records what it asks the shell to do.
struct Harness {
    var engine: Engine
    var now = Moment(nanoseconds: 1_000_000_000)
    var effects: [Effect] = []

    init(slots: [SlotConfig], plugins: Set<String> = ["a", "b"], settings: SchedulerSettings = .init(backoffJitter: 0)) {
        engine = Engine(slots: slots, plugins: plugins, settings: settings, seed: 7)
        effects = engine.advance(to: now)
    }

    mutating func advance(_ d: Duration) {
        now = now + d
        effects += engine.advance(to: now)
    }

    /// Load orders not yet answered, in order.
    var loads: [LoadOrder] {
        effects.compactMap { if case .load(let o) = $0 { o } else { nil } }
    }

    var destroyed: [AdID] {
        effects.compactMap { if case .destroy(let id, _) = $0 { id } else { nil } }
    }

    /// What bidders' plugins were told of ads ending unshown, in order.
    var losses: [(AdID, AuctionLoss)] {
        effects.compactMap { if case .lose(let id, _, let loss) = $0 { (id, loss) } else { nil } }
    }

    var events: [EngineEvent] {
        effects.compactMap { if case .emit(let e) = $0 { e } else { nil } }
    }

    mutating func report(_ r: PluginReport, _ id: AdID, from plugin: String? = nil) {
        let owner = plugin ?? loads.first { $0.adID == id }?.plugin ?? "a"
        effects += engine.pluginReported(r, for: id, from: owner, now: now)
    }

    mutating func fill(_ id: AdID, expiresIn: Duration? = nil, price: Double? = nil) {
        report(.loaded(payloadJSON: #"{"n":\#(id)}"#, expiresIn: expiresIn, price: price), id)
    }

    mutating func show(_ slot: String, user: String? = "u1") -> Result<ShownAd, ShowError> {
        let (result, out) = engine.show(slot: slot, userID: user, privacy: nil, now: now)
        effects += out
        return result
    }

    mutating func reportViewer(_ event: ViewerEvent, _ id: AdID) -> Result<Void, ReportError> {
        let (result, out) = engine.report(event, for: id, now: now)
        effects += out
        return result
    }

    func status(_ slot: String) -> SlotStatus { engine.slotStatuses(at: now).first { $0.config.id == slot }! }
}
