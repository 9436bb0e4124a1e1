import CAdorchPlugin

/// The host's error taxonomy (docs/rules.md, "Error taxonomy"). Plugins map their network's codes onto
/// it; apps and logs see these names first, the network's own code beside them.
public enum AdErrorCode: String, Sendable, CaseIterable {
    case `internal`
    case network
    case noFill = "no_fill"
    case invalidRequest = "invalid_request"
    case timeout
    case rateLimited = "rate_limited"
    case notReady = "not_ready"
    case expired
    case alreadyShown = "already_shown"
    case pluginFault = "plugin_fault"

    /// The code for a number from adorch/plugin.h's `adorch_error`: a switch over the
    /// header's enum, so an error added there does not build until it has its code here.
    /// Unknown numbers (a newer minor's, or garbage) are the plugin's fault.
    public init(abiValue: Int32) {
        guard let error = adorch_error(abiValue: abiValue) else {
            self = .pluginFault
            return
        }
        switch error {
        case .ADORCH_ERROR_INTERNAL: self = .internal
        case .ADORCH_ERROR_NETWORK: self = .network
        case .ADORCH_ERROR_NO_FILL: self = .noFill
        case .ADORCH_ERROR_INVALID_REQUEST: self = .invalidRequest
        case .ADORCH_ERROR_TIMEOUT: self = .timeout
        case .ADORCH_ERROR_RATE_LIMITED: self = .rateLimited
        case .ADORCH_ERROR_NOT_READY: self = .notReady
        // A network answer the plugin could not parse: the plugin could not use it.
        case .ADORCH_ERROR_MALFORMED: self = .pluginFault
        }
    }
}

extension adorch_error {
    /// The error with this number, or nil for one the header does not have; checked as
    /// adorch_format(abiValue:) says why.
    public init?(abiValue: Int32) {
        guard let value = adorch_error(rawValue: UInt32(bitPattern: abiValue)) else { return nil }
        switch value {
        case .ADORCH_ERROR_INTERNAL, .ADORCH_ERROR_NETWORK, .ADORCH_ERROR_NO_FILL, .ADORCH_ERROR_INVALID_REQUEST,
             .ADORCH_ERROR_TIMEOUT, .ADORCH_ERROR_RATE_LIMITED, .ADORCH_ERROR_NOT_READY, .ADORCH_ERROR_MALFORMED:
            self = value
        @unknown default:
            return nil
        }
    }
}

/// Why a Show found nothing to return.
public enum ShowError: Error, Equatable, Sendable {
    case slotNotFound(String)
    case noAdReady(slot: String)
    /// The slot's ready ads are held for other uids that asked and took fewer (docs/rules.md,
    /// "Fair share"). Apps hear it as NoAdReady: the slot has none for this one now.
    case fairShare(slot: String)
    /// No plugin the slot's waterfall names is available (`Engine.missingPlugins`): none will fill it.
    case unservable(slot: String, missingPlugins: [String])
    /// No entry of the slot's waterfall may serve this viewer an ad of any class their privacy
    /// signals allow (docs/privacy.md, "Inventory"): no ad is loaded for them, however long
    /// they wait. Apps hear it as NoAdReady, in the words of `noEntryServesViewer`.
    case viewerUnservable(slot: String)
    /// The plugins could not present any of the `tries` ads the call took (`Engine.showAttempts`).
    case displayFailed(slot: String, tries: Int)
    /// The ad the call took ended before its plugin answered (`reason`: removed by a reload, ...).
    case interrupted(slot: String, reason: String)
    /// The daemon is stopping.
    case shuttingDown
    case invalidParameter(name: String, reason: String)
    /// `uid` holds `open` ads and `loading` more are on their way to it: the call would go
    /// past its `limit` (`UIDBudgets.maxOpenAds`).
    case tooManyOpenAds(uid: UInt32, open: Int, loading: Int, limit: Int)
    /// `uid` has `waiting` rewards not acknowledged, its `limit`
    /// (`UIDBudgets.maxUnacknowledgedRewards`): a rewarded Show would earn one more.
    case tooManyUnacknowledgedRewards(uid: UInt32, waiting: Int, limit: Int)
    /// A frequency rule holds the slot for this user (docs/caps.md): `rule` is its name, and a
    /// Show `retryAfter` from now (whole milliseconds, rounded up) is let in, if nothing else is shown.
    case capped(slot: String, rule: String, retryAfter: Duration)
    /// The rewarded ad's promise (docs/rules.md, "Across a restart") could not be written: the
    /// ad was not handed out, since a restart would cost its viewer the reward.
    case promiseUnwritten(slot: String, reason: String)
    /// The ad's win notice (docs/bidding.md, "Notices") could not be written to the outbox: the
    /// ad was not handed out, since a restart would cost its network the bill.
    case noticeUnwritten(slot: String, reason: String)
}

extension ShowError {
    /// Why a viewer gets no ad of a slot whatever it holds: a Show's `viewerUnservable`, and a
    /// Load whose every entry was passed over for it, say it in these words.
    public static let noEntryServesViewer = "no waterfall entry may serve this viewer an ad their privacy signals allow"
}

/// Why a viewer report was refused.
public enum ReportError: Error, Equatable, Sendable {
    /// Unknown, never shown, already ended, or the event was already reported. `reason` is
    /// what is wrong with the ad, to follow its app-facing id ("has ended (closed)").
    case adNotValid(reason: String)
}
