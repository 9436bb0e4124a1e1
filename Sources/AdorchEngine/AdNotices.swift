/// The notice URLs a plugin gave with an ad (its payload's "notices", plugin.h): the daemon,
/// not the plugin, sends them, each once, through a durable outbox, so that what a network
/// bills survives a `kill -9` of either (docs/bidding.md, "Notices").
public struct AdNotices: Sendable, Equatable {
    /// Sent when the ad is handed to a viewer (OpenRTB's nurl).
    public var win: [String] = []
    /// Sent when its impression counts (burl).
    public var billing: [String] = []
    /// Sent when it ends without being handed to anyone (lurl), `${AUCTION_LOSS}` the reason.
    public var loss: [String] = []
    /// Sent at once: what the plugin's own auction decided at load (its other bids' losses).
    public var due: [String] = []

    /// The most URLs of one kind, and the longest URL, a payload may give.
    public static let maxPerKind = 16
    public static let maxURLBytes = 4096
    /// The macros the daemon fills when a notice becomes due: a loss notice's reason (its
    /// `adorch_loss`, OpenRTB's code) and a billing notice's impression time (ms since the epoch).
    public static let lossMacro = "${AUCTION_LOSS}"
    public static let impressionTimeMacro = "${AUCTION_IMP_TS}"
    public static let daemonMacros = [lossMacro, impressionTimeMacro]
    /// The URLs of one kind.
    public subscript(kind: NoticeKind) -> [String] {
        get {
            switch kind {
            case .win: win
            case .billing: billing
            case .loss: loss
            case .due: due
            }
        }
        set {
            switch kind {
            case .win: win = newValue
            case .billing: billing = newValue
            case .loss: loss = newValue
            case .due: due = newValue
            }
        }
    }

    public init(win: [String] = [], billing: [String] = [], loss: [String] = [], due: [String] = []) {
        (self.win, self.billing, self.loss, self.due) = (win, billing, loss, due)
    }

    public var isEmpty: Bool { win.isEmpty && billing.isEmpty && loss.isEmpty && due.isEmpty }
}

/// A kind of notice, by its key in the payload's "notices" (plugin.h) and in the outbox; in
/// the order an ad's are written, so the plugin's own losses go before the ad's win.
public enum NoticeKind: String, Sendable, CaseIterable {
    case due, win, billing, loss
}

/// What became of an ad with notices, for the outbox: each ad's notices go through `hold`,
/// then `win` (and `billing`, then `settle`) or `loss`.
public enum NoticeStep: Sendable, Equatable {
    /// The ad is ready: keep its notices, send its `due` ones now.
    case hold(AdNotices)
    /// Handed to a viewer: send its win notices; its loss notices will never be.
    case win
    /// Its impression counted: send its billing notices.
    case billing
    /// Ended unshown: send its loss notices with this reason; the others will never be.
    case loss(AuctionLoss)
    /// Ended after a viewer had it: drop what was not sent (billing without an impression).
    case settle
}

/// Where an ad's notices stand in the engine.
enum NoticePhase: Sendable {
    case held, won
}
