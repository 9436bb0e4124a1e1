import AdorchEngine

/// adorch: the daemon's own engine, unchanged, driven by the simulator's clock.
public final class AdorchPolicy: PreloadPolicy {
    public let name = "adorch"
    private var engine: Engine!
    private var slotIDs: [String] = []
    /// The engine's ad id for each load in flight, and for each ad the simulator's id.
    private var engineIDForLoad: [Int: AdID] = [:]
    private var simAd: [AdID: Int] = [:]
    private var networkIndex: [String: Int] = [:]
    private var pendingWakes: Set<Double> = []
    private let settings: SchedulerSettings

    public init(settings: SchedulerSettings = SchedulerSettings()) { self.settings = settings }

    private func moment(_ t: Double) -> Moment { Moment(nanoseconds: UInt64((t + 1) * 1e9)) }

    public func start(_ sim: DaySimulator) {
        let w = sim.workload
        networkIndex = Dictionary(uniqueKeysWithValues: w.networks.enumerated().map { ($1.name, $0) })
        slotIDs = w.slots.map(\.id)
        let waterfall = w.networks.map { WaterfallEntry(plugin: $0.name, timeout: .milliseconds(Int64($0.timeoutSeconds * 1000))) }
        // As a user would run it: the workload's buffer is the floor of a demand-aware buffer.
        let slots = w.slots.map {
            SlotConfig(id: $0.id, format: $0.format, buffer: $0.buffer, bufferMax: SlotConfig.defaultBufferMax,
                       ttl: .seconds(4 * 3600), waterfall: waterfall)
        }
        engine = Engine(slots: slots, plugins: Set(networkIndex.keys), settings: settings, seed: w.seed)
        apply(engine.advance(to: moment(sim.now)), sim)
    }

    private func apply(_ effects: [Effect], _ sim: DaySimulator) {
        for effect in effects {
            switch effect {
            case .load(let order):
                let load = sim.load(slot: slotIDs.firstIndex(of: order.slotID)!, network: networkIndex[order.plugin]!)
                engineIDForLoad[load] = order.adID
            case .destroy(let id, _):
                if let ad = simAd.removeValue(forKey: id) { sim.drop(ad) }
            default:
                break
            }
        }
        // A microsecond late, so that the moment of the wake-up is surely not before `next`;
        // one wake-up per moment, or they would pile up with every input.
        if let next = engine.nextWakeup(after: moment(sim.now)) {
            let at = Double(next.nanoseconds) / 1e9 - 1 + 1e-6
            if pendingWakes.insert(at).inserted { sim.wake(at: at) }
        }
    }

    public func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? {
        let (result, effects) = engine.show(slot: slotIDs[slot], userID: Audience.id(user), now: moment(sim.now))
        apply(effects, sim)
        guard case .success(let shown) = result else { return nil }
        // Taken from the map first: the close destroys the ad, which must not drop it as unshown.
        let ad = simAd.removeValue(forKey: shown.id)
        // The app reports the impression, which a slot's caps count, then the close.
        for event in [ViewerEvent.impression, .close] { apply(engine.report(event, for: shown.id, now: moment(sim.now)).1, sim) }
        return ad
    }

    public func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {
        guard let id = engineIDForLoad.removeValue(forKey: load) else { return }
        let plugin = sim.workload.networks[network].name
        let report: PluginReport
        switch result {
        case .fill(let ad, let expiresAt):
            simAd[id] = ad
            report = .loaded(payloadJSON: "{}", expiresIn: .milliseconds(Int64((expiresAt - sim.now) * 1000)), price: nil)
        case .noFill: report = .failed(.noFill, networkCode: 0, message: "")
        case .error: report = .failed(.network, networkCode: 0, message: "")
        case .rateLimited: report = .failed(.rateLimited, networkCode: 0, message: "")
        case .timeout: return  // the engine's own deadline ends the load
        }
        apply(engine.pluginReported(report, for: id, from: plugin, now: moment(sim.now)), sim)
    }

    public func wake(_ sim: DaySimulator) {
        pendingWakes = pendingWakes.filter { $0 > sim.now }
        apply(engine.advance(to: moment(sim.now)), sim)
    }
}
