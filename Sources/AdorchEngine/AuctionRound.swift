import CAdorchPlugin

/// One auction of a hybrid slot for its next ads (docs/bidding.md, "The auction"): every
/// bidder asked at once, then the waterfall walked, one entry at a time, while an entry's
/// eCPM beats the best bid in hand. Decided when nothing of it is loading and no entry is
/// left to walk: the best `want` of its ads stay, the others lose to a higher bid.
struct AuctionRound: Sendable {
    /// How many ads it is for: its class's shortfall when it began, at least one.
    var want: Int
    /// Every load it started, bids and walked entries, in order.
    var loads: [AdID] = []
    /// The entries the walk asked.
    var walked: Set<Int> = []
}

/// Prices per 1,000 impressions: a reported price, an entry's `ecpm` and a slot's `floor`
/// outside it are refused. Past 100,000 (100 for a single impression) it is a typo or a lie.
public enum CPM {
    public static let range: ClosedRange<Double> = 0...100_000
}

/// What a waterfall entry's ads reported paying: an average in which the newest price
/// weighs `newest`, so an entry's eCPM follows its network's prices over a day. One price
/// counts at most `outlier` times the average, or a `outlier`th of it: a single absurd report
/// cannot make the walk ask the entry in every auction for thousands of them.
struct PaidAverage: Sendable {
    static let newest = 0.125
    static let outlier = 10.0
    private(set) var value: Double?

    mutating func note(_ price: Double) {
        guard let value else { return self.value = price }
        let bounded = value > 0 ? min(max(price, value / Self.outlier), value * Self.outlier) : price
        self.value = value + Self.newest * (bounded - value)
    }
}

/// Why a bidder's ad ended unshown: the OpenRTB loss reason codes plugin.h's `adorch_loss`
/// names, told to its plugin before ad_destroy (ADORCH_EVENT_LOSS).
public enum AuctionLoss: Sendable, Equatable {
    /// It expired, or was replaced as it neared expiry, before any viewer took it.
    case expired
    /// Its price was under the slot's floor.
    case belowFloor
    /// Its round's auction went to higher prices.
    case lostToHigherBid

    /// The reason with this code, nil for one the header does not name.
    public init?(abiValue: UInt64) {
        guard let reason = [Self.expired, .belowFloor, .lostToHigherBid].first(where: { UInt64($0.abi.rawValue) == abiValue }) else { return nil }
        self = reason
    }

    public var abi: adorch_loss {
        switch self {
        case .expired: ADORCH_LOSS_EXPIRED
        case .belowFloor: ADORCH_LOSS_BELOW_FLOOR
        case .lostToHigherBid: ADORCH_LOSS_LOST_TO_HIGHER_BID
        }
    }
}
