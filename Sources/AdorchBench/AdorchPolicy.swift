import AdorchEngine

/// adorch: the daemon's own engine, unchanged, driven by the simulator's clock. On a capped
/// day the engine holds the day's rules itself, and the app asks it for every request; or,
/// as the control that tells what the engine's handling of caps changes, the app checks
/// them itself and the engine knows nothing of them, as for the references. On the privacy
/// day (`DayPrivacy`) each Show carries its viewer's privacy and each network its declaration;
/// on any other day, none and the defaults, as a daemon whose apps set nothing.
///
/// With `auction`, the day's bidders join every slot as `bidder = true` entries and each
/// network carries its `ecpm`: the hybrid auction (docs/bidding.md), measured on revenue.
public final class AdorchPolicy: PreloadPolicy {
    public let name: String
    private let capsInEngine: Bool
    private let auction: Bool
    /// The control's name in the tables.
    public static let controlName = "adorch, caps in the app"
    /// The hybrid auction's name in the tables.
    public static let auctionName = "adorch, hybrid auction"
    private var engine: Engine!
    private var slotIDs: [String] = []
    /// The engine's ad id for each load in flight, and for each ad the simulator's id.
    private var engineIDForLoad: [Int: AdID] = [:]
    private var simAd: [AdID: Int] = [:]
    private var networkIndex: [String: Int] = [:]
    private var pendingWakes: Set<Double> = []
    private var nextRequest: RequestID = 1
    private let settings: SchedulerSettings
    /// Per slot, the times of the requests the engine answered Capped.
    public private(set) var cappedAt: [[Double]] = []

    public init(settings: SchedulerSettings = SchedulerSettings(), capsInEngine: Bool = true, auction: Bool = false) {
        (self.settings, self.capsInEngine, self.auction) = (settings, capsInEngine, auction)
        name = auction ? Self.auctionName : capsInEngine ? "adorch" : Self.controlName
    }

    /// A time of the day on the engine's clock, whose origin is a second before the day's.
    static func moment(_ t: Double) -> Moment { Moment(nanoseconds: UInt64((t + 1) * 1e9)) }

    public func start(_ sim: DaySimulator) {
        let w = sim.workload
        let sources = auction ? w.sources : w.networks
        networkIndex = Dictionary(uniqueKeysWithValues: sources.enumerated().map { ($1.name, $0) })
        slotIDs = w.slots.map(\.id)
        let waterfall = sources.enumerated().map { index, network in
            let bidder = index >= w.networks.count
            return WaterfallEntry(plugin: network.name, timeout: .milliseconds(Int64(network.timeoutSeconds * 1000)),
                                  privacy: sim.privacy?.networks[index] ?? NetworkPrivacy(), bidder: bidder,
                                  ecpm: auction && !bidder && network.ecpm > 0 ? network.ecpm : nil)
        }
        // As a user would run it: the workload's buffer is the floor of a demand-aware buffer.
        let slots = w.slots.enumerated().map { index, slot in
            var config = SlotConfig(id: slot.id, format: slot.format, buffer: slot.buffer, bufferMax: SlotConfig.defaultBufferMax,
                                    ttl: .seconds(4 * 3600), waterfall: waterfall)
            if capsInEngine, let caps = sim.caps, caps.slot == index { config.caps = caps.rules }
            return config
        }
        cappedAt = slots.map { _ in [] }
        engine = Engine(slots: slots, plugins: Set(networkIndex.keys), settings: settings, seed: w.seed)
        apply(engine.advance(to: Self.moment(sim.now)), sim)
    }

    private func apply(_ effects: [Effect], _ sim: DaySimulator) {
        for effect in effects {
            switch effect {
            case .load(let order):
                let load = sim.load(slot: slotIDs.firstIndex(of: order.slotID)!, network: networkIndex[order.plugin]!,
                                    privacyClass: order.privacy.privacyClass)
                engineIDForLoad[load] = order.adID
            case .destroy(let id, _):
                if let ad = simAd.removeValue(forKey: id) { sim.drop(ad) }
            default:
                break
            }
        }
        // A microsecond late, so that the moment of the wake-up is surely not before `next`;
        // one wake-up per moment, or they would pile up with every input.
        if let next = engine.nextWakeup(after: Self.moment(sim.now)) {
            let at = Double(next.nanoseconds) / 1e9 - 1 + 1e-6
            if pendingWakes.insert(at).inserted { sim.wake(at: at) }
        }
    }

    public func show(slot: Int, user: Int, _ sim: DaySimulator) -> Int? {
        switch requestShow(slot: slotIDs[slot], user: user, sim) {
        case .success(let shown):
            // Taken from the map first: the close destroys the ad, which must not drop it as unshown.
            let ad = simAd.removeValue(forKey: shown.id)
            // The app reports the impression, which the caps count, then the close.
            for event in [ViewerEvent.impression, .close] { apply(engine.report(event, for: shown.id, now: Self.moment(sim.now)).1, sim) }
            return ad
        case .failure(.capped):
            cappedAt[slot].append(sim.now)
            return nil
        case .failure:
            return nil
        }
    }

    /// The app leaves caps to adorch, so it asks here too; but only while the engine's rules
    /// hold the user. An engine that would let the request in counted fewer impressions than
    /// the check did (a let-in request it had no ad for, `DayCaps.refused`): its Show would
    /// hand out an ad the check refused. The Capped answer then missing from `cappedAt` tells.
    public func refused(slot: Int, user: Int, _ sim: DaySimulator) {
        guard capsInEngine else { return }
        let (id, now) = (slotIDs[slot], Self.moment(sim.now))
        guard engine.capHold(slot: id, user: CapUser(uid: nil, id: Audience.id(user)), now: now) != nil else { return }
        if case .failure(.capped) = requestShow(slot: id, user: user, sim) { cappedAt[slot].append(sim.now) }
    }

    /// A Show as the daemon makes it (EngineRuntime.show): `requestShow`, the ad's plugin asked
    /// to present it and answering at once that it did (the day's networks always can), until
    /// the call's `.completeShow`. The user's privacy is the day's, or none.
    private func requestShow(slot: String, user: Int, _ sim: DaySimulator) -> Result<ShownAd, ShowError> {
        let (request, now) = (nextRequest, Self.moment(sim.now))
        nextRequest += 1
        var effects = engine.requestShow(slot: slot, userID: Audience.id(user), privacy: sim.privacy?.viewer[user], request: request, now: now)
        var outcome: Result<ShownAd, ShowError>?
        while !effects.isEmpty {
            var others: [Effect] = [], answers: [Effect] = []
            for effect in effects {
                switch effect {
                case .completeShow(request, let result): outcome = result
                case .show(let id, _, _): answers += engine.showAnswered(id, presented: true, now: now)
                default: others.append(effect)
                }
            }
            apply(others, sim)
            effects = answers
        }
        guard let outcome else { preconditionFailure("the engine did not complete Show request \(request)") }
        return outcome
    }

    public func loadFinished(_ load: Int, slot: Int, network: Int, _ result: LoadResult, _ sim: DaySimulator) {
        guard let id = engineIDForLoad.removeValue(forKey: load) else { return }
        let plugin = sim.workload.sources[network].name
        let report: PluginReport
        switch result {
        case .fill(let ad, let expiresAt):
            simAd[id] = ad
            // A bid says its price; a network says none, and its entry's ecpm stands for it.
            let price = network >= sim.workload.networks.count ? sim.price(of: ad) : nil
            report = .loaded(payloadJSON: "{}", expiresIn: .milliseconds(Int64((expiresAt - sim.now) * 1000)), price: price)
        case .noFill: report = .failed(.noFill, networkCode: 0, message: "")
        case .error: report = .failed(.network, networkCode: 0, message: "")
        case .rateLimited: report = .failed(.rateLimited, networkCode: 0, message: "")
        case .timeout: return  // the engine's own deadline ends the load
        }
        apply(engine.pluginReported(report, for: id, from: plugin, now: Self.moment(sim.now)), sim)
    }

    public func wake(_ sim: DaySimulator) {
        pendingWakes = pendingWakes.filter { $0 > sim.now }
        apply(engine.advance(to: Self.moment(sim.now)), sim)
    }
}
