// The hybrid auction of a slot with bidders (docs/bidding.md, "The auction"): bidders asked at
// once, the waterfall walked only above the best bid, the slot's floor enforced.

extension Engine {
    /// An entry's eCPM: the config's, else what its ads reported paying, else unknown.
    func ecpm(of slot: SlotState, _ index: Int) -> Double? {
        slot.config.waterfall[index].ecpm ?? slot.entries[index].paid.value
    }

    /// Whether the entry is a bidder; false for an index a reload took away.
    func isBidder(_ slot: SlotState, _ index: Int) -> Bool {
        slot.config.waterfall.indices.contains(index) && slot.config.waterfall[index].bidder
    }

    /// Moves every auction of the slot on as far as what is in hand allows.
    mutating func progressAuctions(_ slotID: String, now: Moment) -> [Effect] {
        var effects: [Effect] = []
        for privacyClass in PrivacyClass.preference where slots[slotID]?.auctions[privacyClass] != nil {
            effects += progressAuction(slotID, privacyClass, now: now)
        }
        return effects
    }

    /// Starts an auction for `want` ads of `privacyClass`: every bidder that may be asked, at
    /// once; with none, the walk starts at once. No round is kept that starts no load.
    mutating func startAuction(_ slotID: String, _ privacyClass: PrivacyClass, want: Int, now: Moment) -> [Effect] {
        guard let slot = slots[slotID], slot.auctions[privacyClass] == nil else { return [] }
        var round = AuctionRound(want: max(want, 1))
        var effects: [Effect] = []
        for (index, privacy) in usableEntries(slot, for: privacyClass, now: now) where isBidder(slot, index) {
            round.loads.append(nextID)
            effects.append(startLoad(slotID, entryIndex: index, privacy: privacy, now: now))
        }
        slots[slotID]!.auctions[privacyClass] = round
        effects += progressAuction(slotID, privacyClass, now: now)
        if effects.isEmpty { slots[slotID]!.auctions[privacyClass] = nil }
        return effects
    }

    /// One step of an auction: waits while any of its loads is in flight (no entry is compared
    /// with a bid not yet in hand), then walks the next entry whose eCPM beats the best bid, or
    /// decides: the best `want` ads it holds stay, the others lose to a higher bid.
    private mutating func progressAuction(_ slotID: String, _ privacyClass: PrivacyClass, now: Moment) -> [Effect] {
        guard let slot = slots[slotID], var round = slot.auctions[privacyClass] else { return [] }
        let held = round.loads.compactMap { ads[$0] }
        if held.contains(where: { if case .loading = $0.state { true } else { false } }) { return [] }
        // Ads a Show took meanwhile won their viewer; only those still ready take part.
        let inHand = held.filter { $0.isValid(at: now) }
        let best = inHand.filter { isBidder(slot, $0.entryIndex) }.map(\.price).max()
        let walkFilled = inHand.contains { !isBidder(slot, $0.entryIndex) }
        if !walkFilled, let (index, privacy) = nextWalkEntry(slot, privacyClass, best: best, walked: round.walked, now: now) {
            round.walked.insert(index)
            round.loads.append(nextID)
            slots[slotID]!.auctions[privacyClass] = round
            return [startLoad(slotID, entryIndex: index, privacy: privacy, now: now)]
        }
        slots[slotID]!.auctions[privacyClass] = nil
        let ranked = inHand.sorted { ($0.price, $1.id) > ($1.price, $0.id) }
        var effects: [Effect] = []
        for loser in ranked.dropFirst(round.want) {
            slots[slotID]!.counters.outbid += 1
            effects += end(loser.id, as: .outbid, now: now)
            effects.append(.emit(EngineEvent(.adOutbid, slot: slotID, adID: loser.id, network: loser.plugin,
                                             message: "price \(loser.price) lost to \(ranked[round.want - 1].price)")))
        }
        return effects
    }

    /// The walk's next entry, in waterfall order: a waterfall entry (not a bidder) not yet
    /// walked in this round, that may be asked now, whose eCPM is not under the floor and
    /// beats the best bid. An entry of unknown eCPM is walked only when no bid is in hand.
    private func nextWalkEntry(_ slot: SlotState, _ privacyClass: PrivacyClass, best: Double?, walked: Set<Int>,
                               now: Moment) -> (Int, LoadPrivacy)? {
        usableEntries(slot, for: privacyClass, now: now).first { index, _ in
            guard !isBidder(slot, index), !walked.contains(index) else { return false }
            let value = ecpm(of: slot, index)
            if let value, value < slot.config.floor { return false }
            guard let best else { return true }
            return value.map { $0 > best } ?? false
        }
    }

    /// A load reported a price under its slot's floor: refused as the floor says, the entry
    /// backing off as after a no-fill, its plugin told the bid lost below the floor.
    mutating func refusedBelowFloor(_ ad: AdRecord, price: Double, floor: Double, now: Moment) -> [Effect] {
        slots[ad.slot]?.counters.belowFloor += 1
        noteFailure(of: ad, code: .noFill, now: now)
        noteLoadEnded(ad, outcome: AdErrorCode.noFill.rawValue, now: now)
        var effects = end(ad.id, as: .belowFloor, now: now)
        effects.append(.emit(EngineEvent(.adFailed, slot: ad.slot, adID: ad.id, network: ad.plugin, errorCode: .noFill,
                                         message: "price \(price) under the slot's floor \(floor)", holder: eventHolder(of: ad))))
        return effects + attemptFailed(ad, code: .noFill, now: now) + refillWanting(now: now)
    }
}
