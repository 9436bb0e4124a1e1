// The hybrid auction of a slot with bidders or prices (docs/bidding.md, "The auction"): bidders
// asked at once, the waterfall walked by price, the slot's floor enforced.

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

    /// One step of an auction. While a bid is coming, it waits: no entry is compared with a bid
    /// not in hand. Then the walk: while the auction holds fewer ads than it is for, each place
    /// still open is walked at once from the top, whatever the eCPM; with every place
    /// taken, one entry at a time, and only one whose eCPM beats the lowest price kept (with
    /// one place, the best bid). With nothing left to walk it is decided: the best `want` ads
    /// it holds stay, the others lose to a higher bid.
    private mutating func progressAuction(_ slotID: String, _ privacyClass: PrivacyClass, now: Moment) -> [Effect] {
        guard let slot = slots[slotID], var round = slot.auctions[privacyClass] else { return [] }
        let held = round.loads.compactMap { ads[$0] }
        let loading = held.filter { if case .loading = $0.state { true } else { false } }
        if loading.contains(where: { isBidder(slot, $0.entryIndex) }) { return [] }
        // Ads a Show took meanwhile won their viewer; only those still ready take part.
        let ranked = held.filter { $0.isValid(at: now) }.sorted { ($0.price, $1.id) > ($1.price, $0.id) }
        let open = round.want - ranked.count - loading.count
        var effects: [Effect] = []
        if open > 0 {
            // Each open place walks from the top, as a waterfall of its own: several may ask
            // one entry at once, as far as its network takes loads in flight; one that failed
            // is backing off, and the next place starts below it.
            for _ in 0..<open {
                guard let (index, privacy) = walkEntries(slots[slotID]!, privacyClass, beating: nil, walked: [], now: now).first else { break }
                round.walked.insert(index)
                round.loads.append(nextID)
                effects.append(startLoad(slotID, entryIndex: index, privacy: privacy, now: now))
            }
        } else if loading.isEmpty, ranked.count >= round.want,
                  let (index, privacy) = walkEntries(slot, privacyClass, beating: ranked[round.want - 1].price, walked: round.walked, now: now).first {
            round.walked.insert(index)
            round.loads.append(nextID)
            effects.append(startLoad(slotID, entryIndex: index, privacy: privacy, now: now))
        }
        if !effects.isEmpty || !loading.isEmpty {
            slots[slotID]!.auctions[privacyClass] = round
            return effects
        }
        slots[slotID]!.auctions[privacyClass] = nil
        for loser in ranked.dropFirst(round.want) {
            slots[slotID]!.counters.outbid += 1
            effects += end(loser.id, as: .outbid, now: now)
            effects.append(.emit(EngineEvent(.adOutbid, slot: slotID, adID: loser.id, network: loser.plugin,
                                             message: "price \(loser.price) lost to \(ranked[round.want - 1].price)")))
        }
        return effects
    }

    /// The entries the walk may ask, in waterfall order: waterfall entries (not bidders) not
    /// yet walked in this auction, that may be asked now, whose eCPM is not under the floor
    /// and, when `beating` a price, beats it (an entry of unknown eCPM then does not).
    private func walkEntries(_ slot: SlotState, _ privacyClass: PrivacyClass, beating price: Double?, walked: Set<Int>,
                             now: Moment) -> [(Int, LoadPrivacy)] {
        usableEntries(slot, for: privacyClass, now: now).filter { index, _ in
            guard !isBidder(slot, index), !walked.contains(index) else { return false }
            let value = ecpm(of: slot, index)
            if let value, value < slot.config.floor { return false }
            guard let price else { return true }
            return value.map { $0 > price } ?? false
        }
    }

    /// A price the engine cannot rank by: outside `CPM.range`, or none from a bidder, whose
    /// price is what its auction is decided on. The load is the plugin's fault.
    func priceRefusal(of report: PluginReport, for ad: AdRecord) -> String? {
        guard case .loaded(_, _, let price, _, _, _, _) = report else { return nil }
        if let price, !CPM.range.contains(price) {
            return "a price of \(price) per 1,000 impressions, outside \(CPM.range.lowerBound)...\(CPM.range.upperBound)"
        }
        if price == nil, let slot = slots[ad.slot], isBidder(slot, ad.entryIndex) {
            return "a bid without a price (the payload's \"price\", a number per 1,000 impressions)"
        }
        return nil
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
