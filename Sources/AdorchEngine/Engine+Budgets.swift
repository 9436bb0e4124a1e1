// Budgets per uid (docs/rules.md, "Budgets per uid"): what one app's uid may hold of the
// engine, so that one app cannot take what every other app needs.

extension Engine {
    /// The uid an ad was handed to, while the ad lasts.
    public func holder(of id: AdID) -> UInt32? { ads[id]?.holder ?? promised[id]?.holder }

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
}
