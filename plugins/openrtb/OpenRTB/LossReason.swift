/// Why a bid did not win, as its loss notice says (`${AUCTION_LOSS}`): OpenRTB 2.6 §5.25,
/// the list OpenRTB 3.0 defines. Only the codes adorch sends are named.
public enum LossReason: Int, Sendable, CaseIterable {
    /// The bid was taken but not shown before its `exp`, or the daemon dropped it unshown.
    case expired = 2
    case invalidBidResponse = 3
    case missingMarkup = 7
    case missingPrice = 9
    case belowFloor = 100
    case lostToHigherBid = 102
    case incorrectCreativeFormat = 204
    case advertiserExclusions = 205
    case categoryExclusions = 209
}
