// Inventory partitioned by privacy class (docs/privacy.md, "Inventory"): every preloaded ad
// is loaded under one class; a Show hands a viewer only ads of a class their signals allow
// for the ad's network, under the config as it is now; each class is preloaded for the
// viewers that asked for it, with the signals of the last of them.

/// The most recent viewer of a slot whose signals allowed a class from one waterfall entry:
/// whose signals that entry's loads of the class carry.
struct ClassViewer: Sendable {
    /// nil: a viewer who set nothing.
    var privacy: ViewerPrivacy?
    /// Who it was: a later Show of theirs that no longer allows the class withdraws it.
    var user: CapUser
    var at: Moment
}

extension Engine {
    /// How long a class stays asked for after its last Show, and a viewer's signals stay the
    /// ones its loads carry: the demand's longest window.
    static var classMemory: Duration { DemandEstimate.windows.last! }

    /// The classes `viewer` may be shown from each of the slot's entries, in waterfall order.
    func allowedClasses(_ viewer: ViewerPrivacy?, in slot: SlotState) -> [Set<PrivacyClass>] {
        slot.config.waterfall.map { settings.privacy.allowedClasses(viewer, for: $0.privacy) }
    }

    /// The class a Show of `viewer` counts as demand for: the best one they allow from any
    /// entry of the slot; nil when they allow none.
    func wantedClass(_ allowed: [Set<PrivacyClass>]) -> PrivacyClass? {
        let any = allowed.reduce(into: Set<PrivacyClass>()) { $0.formUnion($1) }
        return PrivacyClass.preference.first(where: any.contains)
    }

    /// A Show of `viewer` asked the slot: demand for their class, reach for every class they
    /// allow from any entry, and, per entry, theirs are the signals the loads of each class
    /// they allow there carry from now. A class they allowed there before and no longer do is
    /// withdrawn, so their old consent is not sent.
    mutating func noteViewer(_ viewer: ViewerPrivacy?, user: CapUser, of slotID: String, now: Moment) {
        // No copy of the slot is held while it is written: each write would copy its entries.
        guard slots[slotID] != nil else { return }
        let allowed = allowedClasses(viewer, in: slots[slotID]!)
        // A child-directed load carries a child's signals, never an adult's strings or content
        // rating: an adult who may take its ads (rule 6) is not whose signals it carries.
        let child = wantedClass(allowed) == .childDirected
        for (index, classes) in allowed.enumerated() {
            for privacyClass in PrivacyClass.allCases {
                if classes.contains(privacyClass), privacyClass != .childDirected || child {
                    slots[slotID]!.entries[index].viewers[privacyClass] = ClassViewer(privacy: viewer, user: user, at: now)
                } else if slots[slotID]!.entries[index].viewers[privacyClass]?.user == user {
                    slots[slotID]!.entries[index].viewers[privacyClass] = nil
                }
            }
        }
        guard let wanted = wantedClass(allowed) else { return }
        slots[slotID]!.classDemand[wanted, default: DemandEstimate()].noteShow(at: now)
        hostClassDemand[wanted, default: DemandEstimate()].noteShow(at: now)
        let reached = allowed.reduce(into: Set<PrivacyClass>()) { $0.formUnion($1) }
        for privacyClass in PrivacyClass.allCases {
            if reached.contains(privacyClass) {
                slots[slotID]!.classReach[privacyClass, default: DemandEstimate()].noteShow(at: now)
            } else {
                slots[slotID]!.classRefused[privacyClass] = now
            }
        }
    }

    /// An app set or cleared what its viewers said (SetPrivacy): the signals loads carry for
    /// that viewer (`userID`), or for any of the app's viewers when the app's own record
    /// changed ("": theirs may have come from it), are theirs no longer. Until one of them
    /// Shows again, no load carries their old signals; a class only they asked for is
    /// then loaded for no one, so a consent withdrawn is not sent on for `classMemory`.
    public mutating func forgetViewers(uid: UInt32, userID: String) {
        for slotID in Array(slots.keys) {
            for index in slots[slotID]!.entries.indices {
                slots[slotID]!.entries[index].viewers = slots[slotID]!.entries[index].viewers.filter { _, viewer in
                    viewer.user.uid != uid || !(userID.isEmpty || viewer.user.id == userID)
                }
            }
        }
    }

    /// Each class's share of the slot's demand: among the classes asked for within
    /// `classMemory`, in proportion to their rates. Before any is (a slot no Show with a class
    /// reached yet), the unset viewer's class has it all, so that apps that set no privacy
    /// find their ads as before; with `unsetViewer` nil, none has any.
    func classShares(of slot: SlotState, now: Moment) -> [PrivacyClass: Double] {
        let asked = recentlyAsked(slot.classDemand, now: now)
        // Classes the slot's viewers may take (their loads need one's signals) but did not ask for.
        let reached = recentlyAsked(slot.classReach, now: now)
        let expected = slot.config.isDemandAware && !asked.isEmpty
            ? hostClassShares(now: now).filter { asked[$0.key] == nil && reached[$0.key] != nil } : [:]
        // One class, the common case (every app that sets no signals): no rate to work out.
        guard asked.count + expected.count > 1 else {
            return asked.first.map { [$0.key: 1] } ?? settings.privacy.unsetViewer.map { [$0: 1] } ?? [:]
        }
        let rates = asked.mapValues { max($0.longRate(at: now), $0.shortRate(at: now)) }
        let total = rates.values.reduce(0, +), left = 1 - expected.values.reduce(0, +)
        return rates.mapValues { $0 / total * left }.merging(expected) { own, _ in own }
    }

    /// The estimates of `demand` whose class was asked within `classMemory`.
    func recentlyAsked(_ demand: [PrivacyClass: DemandEstimate], now: Moment) -> [PrivacyClass: DemandEstimate] {
        demand.filter { $0.value.lastShow.map { $0 + Self.classMemory > now } ?? false }
    }

    /// Each class's share of the host's demand, among the classes asked on any slot within
    /// `classMemory`: what a demand-aware slot expects of a class its own viewers have not
    /// asked for yet, so that the first of them finds an ad where the slot is busy enough to
    /// keep one for them.
    func hostClassShares(now: Moment) -> [PrivacyClass: Double] {
        let rates = recentlyAsked(hostClassDemand, now: now).mapValues { max($0.longRate(at: now), $0.shortRate(at: now)) }
        let total = rates.values.reduce(0, +)
        return total > 0 ? rates.mapValues { $0 / total } : [:]
    }

    /// How many of the slot's `total` ads each class keeps. A fixed buffer is shared in
    /// proportion to the classes' demand (`BufferTarget.shares`), each class asked for
    /// keeping at least one. A demand-aware slot keeps for each class what the target rule
    /// gives on that class's own Shows (`ownTarget`), so that each group of viewers finds an
    /// ad as often as the slot's viewers would if they were one: the classes' refills run
    /// apart, so together they may hold more than the slot's target, up to buffer_max (or the
    /// target, if the fair share raised it past that), cut in proportion beyond. Where a
    /// class would keep none and every recent Show may take the last class, that class keeps
    /// the whole target as one pool. Where they hold less (demand too thin for an ad of each
    /// class to be likely shown, while an ad for all of them is), the rest goes to the classes
    /// the most Shows may take (their reach), so one ad several groups may take is held rather
    /// than one a single group may. None while the slot keeps none.
    func classTargets(of slot: SlotState, total: Int, now: Moment) -> [PrivacyClass: Int] {
        let shares = classShares(of: slot, now: now)
        if shares.count == 1, let only = shares.first { return [only.key: total] }
        let classes = PrivacyClass.preference.filter { shares[$0] != nil }
        var counts: [Int]
        if slot.config.isDemandAware, total > 0 {
            counts = classes.map { ownTarget(of: slot, $0, share: shares[$0]!, now: now) }
            let held = counts.reduce(0, +), most = max(total, slot.config.bufferMax)
            // A class too rarely asked here to keep an ad of its own, while every Show of the
            // slot within `classMemory` could take an ad of the last class (child-directed ads
            // go to whoever may be shown non-personalised ones): the slot keeps its whole target
            // in that class, one pool that all its viewers share.
            if let pool = classes.last, counts.contains(0), slot.classRefused[pool].map({ $0 + Self.classMemory <= now }) ?? true {
                counts = classes.map { $0 == pool ? total : 0 }
            } else if held > most {
                counts = BufferTarget.shares(of: most, weights: counts.map(Double.init), floor: classes.map { _ in false })
            } else if held < total {
                let reach = classes.map { slot.classReach[$0].map { max($0.longRate(at: now), $0.shortRate(at: now)) } ?? 0 }
                counts = zip(counts, BufferTarget.shares(of: total - held, weights: reach, floor: classes.map { _ in false })).map(+)
            }
        } else {
            counts = BufferTarget.shares(of: total, weights: classes.map { shares[$0]! }, floor: classes.map { _ in true })
        }
        return Dictionary(uniqueKeysWithValues: zip(classes, counts))
    }

    /// What the target rule (`BufferTarget`) gives for `privacyClass` alone: the demand of
    /// the Shows that counted for it, refilled through the entries whose networks serve it,
    /// with no bound but buffer_max.
    func ownTarget(of slot: SlotState, _ privacyClass: PrivacyClass, share: Double, now: Moment) -> Int {
        // A class the slot's viewers have not asked for lately: its share of the slot's demand, as on the host.
        let asked = recentlyAsked(slot.classDemand, now: now)[privacyClass]
        let rate = asked.map { max($0.longRate(at: now), $0.shortRate(at: now)) }
            ?? max(slot.demand.longRate(at: now), slot.demand.shortRate(at: now)) * share
        let entries = slot.config.waterfall.indices.filter {
            availablePlugins.contains(slot.config.waterfall[$0].plugin) && slot.config.waterfall[$0].privacy.servedClasses.contains(privacyClass)
        }
        let (refill, lifetime) = BufferTarget.chain(entries.map { slot.entries[$0].estimate }, ttl: slot.config.ttl)
        let (needed, usable) = BufferTarget.counts(rate: rate, refill: refill, lifetime: lifetime, upTo: slot.config.bufferMax + 1)
        return min(needed, usable, slot.config.bufferMax)
    }

    /// The privacy a load of `privacyClass` from entry `index` carries, or nil when that entry
    /// may not be asked for one: its network, as configured now, does not serve the class for
    /// the viewer whose signals the load would carry; no viewer asked within `classMemory`
    /// (but the unset viewer's class while the slot is cold); or its plugin cannot receive the
    /// signals the load needs.
    func loadPrivacy(_ slot: SlotState, _ index: Int, _ privacyClass: PrivacyClass, now: Moment) -> LoadPrivacy? {
        let network = slot.config.waterfall[index].privacy
        let privacy: LoadPrivacy
        if let last = slot.entries[index].viewers[privacyClass], last.at + Self.classMemory > now,
           settings.privacy.allowedClasses(last.privacy, for: network).contains(privacyClass) {
            privacy = LoadPrivacy(privacyClass, for: last.privacy?.signals)
        } else if privacyClass == settings.privacy.unsetViewer, isCold(slot, now: now), network.servedClasses.contains(privacyClass) {
            privacy = LoadPrivacy(privacyClass, for: nil)
        } else if privacyClass == .childDirected, network.servesChildren {
            // No child asked lately, but adults who may take its ads did: the class's flag alone.
            privacy = LoadPrivacy(privacyClass, for: nil)
        } else {
            return nil
        }
        return network.receivesSignals || !privacy.needsSignals ? privacy : nil
    }

    /// No Show with a class reached the slot within `classMemory`.
    func isCold(_ slot: SlotState, now: Moment) -> Bool {
        !slot.classDemand.values.contains { $0.lastShow.map { $0 + Self.classMemory > now } ?? false }
    }

    /// Whether `viewer` may be shown `ad`: its class is one their signals allow for its
    /// entry's network as the config says now.
    func mayShow(_ ad: AdRecord, to allowed: [Set<PrivacyClass>]) -> Bool {
        allowed.indices.contains(ad.entryIndex) && allowed[ad.entryIndex].contains(ad.privacy.privacyClass)
    }

    /// After a reload: ready and loading ads whose network no longer serves their class end,
    /// as removed (no viewer may be shown them).
    mutating func endUnservedClasses(in slotID: String, now: Moment) -> [Effect] {
        guard let slot = slots[slotID] else { return [] }
        return ads.inSlot(slotID).flatMap { ad -> [Effect] in
            if case .shown = ad.state { return [] }
            let served = slot.config.waterfall.indices.contains(ad.entryIndex)
                && slot.config.waterfall[ad.entryIndex].privacy.servedClasses.contains(ad.privacy.privacyClass)
            return served ? [] : end(ad.id, as: .removed, now: now)
        }
    }
}
