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

    /// The code for a number from adorch/plugin.h's `adorch_error`; unknown numbers are the
    /// plugin's fault.
    public init(abiValue: Int32) {
        switch abiValue {
        case 1: self = .internal
        case 2: self = .network
        case 3: self = .noFill
        case 4: self = .invalidRequest
        case 5: self = .timeout
        case 6: self = .rateLimited
        case 7: self = .notReady
        // 8, a network answer the plugin could not parse, and unknown numbers: the plugin's fault.
        default: self = .pluginFault
        }
    }
}

/// Why a Show found nothing to return.
public enum ShowError: Error, Equatable, Sendable {
    case slotNotFound(String)
    case noAdReady(slot: String)
    /// The plugins could not present any of the `tries` ads the call took (`Engine.showAttempts`).
    case displayFailed(slot: String, tries: Int)
    case invalidParameter(name: String, reason: String)
}

/// Why a viewer report was refused.
public enum ReportError: Error, Equatable, Sendable {
    /// Unknown, never shown, already ended, or the event was already reported.
    case adNotValid(reason: String)
}
