// Budgets per uid (docs/rules.md, "Budgets per uid"): what one app's uid may hold of the
// engine, so that one app cannot take what every other app needs.

extension Engine {
    /// The uid an ad was handed to, while the ad lasts.
    public func holder(of id: AdID) -> UInt32? { ads[id]?.holder ?? promised[id]?.holder }

    /// The uid an event about `ad` belongs to (`EngineEvent.holder`): the one it was handed
    /// to, or the one whose Load it is loading for.
    func eventHolder(of ad: AdRecord) -> UInt32? { ad.holder ?? ad.requestID.flatMap { requests[$0]?.holder } }

    /// Why handing `count` more ads to `uid` would take it past its open-ads budget, or nil
    /// if it may have them. Ads still loading for its Loads count too: a burst of Loads
    /// cannot overshoot the budget by what is in flight.
    func openAdsRefusal(_ uid: UInt32?, asking count: Int) -> ShowError? {
        guard let uid, UIDBudgets.bind(uid) else { return nil }
        let open = ads.held(by: uid)
        let loading = requests.values.reduce(0) { $0 + ($1.holder == uid ? $1.count : 0) }
        let limit = settings.budgets.maxOpenAds
        return open + loading + count > limit ? .tooManyOpenAds(uid: uid, open: open, loading: loading, limit: limit) : nil
    }

    /// Why a Show of `slot` would take `uid` past its bound on unacknowledged rewards
    /// (docs/rules.md, "A bound on unacknowledged rewards"), or nil if it may show. `waiting`
    /// is how many of its rewards wait for AckReward: the ledger is the shell's, so the shell
    /// counts them. Only a rewarded slot's Show is held back, and before any ad is taken, so
    /// no viewer watches an ad whose reward the ledger would not keep; a reward already
    /// earned (an ad on screen, a network's late reward) is always granted.
    func unacknowledgedRewardsRefusal(_ uid: UInt32?, slot: SlotConfig, waiting: Int) -> ShowError? {
        guard let uid, UIDBudgets.bind(uid), slot.format == .rewarded else { return nil }
        let limit = settings.budgets.maxUnacknowledgedRewards
        return waiting >= limit ? .tooManyUnacknowledgedRewards(uid: uid, waiting: waiting, limit: limit) : nil
    }
}
