import AdorchEngine
import Logging

/// Fixed journal MESSAGE_IDs for the events operators look for. Each is explained in
/// systemd/adorchd.catalog (`journalctl -x`); never change a value, only add new ones.
public enum MessageID: String, CaseIterable, Sendable {
    case daemonReady = "3b28691854264dadac70945aed5cc4e2"
    case daemonStopping = "68d6fdf7d89e4a60ae1da8024e55ebe1"
    case reloadDone = "d8188c9bed4c4402a30e67c4045dcb25"
    case reloadFailed = "6124784ccf944cddbd1ecb9fffb7cc39"
    case pluginLoaded = "b8c0a6d6b81b4fac800752ee6dc901ed"
    case pluginRefused = "ef0aa0361eed497699523d267b762f19"
    case adLoaded = "ee59a388108a42f88a79a9857066c01b"
    case adFailed = "5c19dcdfe69e424a9a30fbf826606bd5"
    case adExpired = "2950cf1a43594e528f95d0c023a3fc37"
    case adShown = "e6a920eef0194cac8fb4b2a1feb172e5"
    case slotRanDry = "e1115f36afb649299e488022e42183cd"
    case rewardGranted = "4e68efa0388647b7916beaa94fd8f429"
    case contractViolation = "0128bb1337974270bd92e7f3cae895fe"
    case sessionEnded = "9d0f4c2e1b7a4e58a3c6d2f1e0b9a871"
    case permissionDenied = "5462c684b9474ac4bf47a18e5372e72b"
    case pluginCrashed = "d8d11656ce3d445db13eedf47fb70ab3"
    case pluginDisabled = "8f0b395eccda40358e61e20ca64d1955"

    /// As logger metadata: the journal handler turns it into the MESSAGE_ID= field.
    public var metadata: Logger.Metadata { ["message_id": "\(rawValue)"] }

    /// The engine events that carry one.
    init?(_ event: EngineEvent) {
        switch event.kind {
        case .adLoaded: self = .adLoaded
        case .adFailed, .adTimedOut: self = .adFailed
        case .adExpired: self = .adExpired
        case .adShown: self = .adShown
        case .slotEmpty: self = .slotRanDry
        case .callbackIgnored, .contractViolation: self = .contractViolation
        case .rewardGranted: self = .rewardGranted
        case .session where event.terminal: self = .sessionEnded
        case .adReplaced, .adOutbid, .adEvent, .mediaCached, .networkPaused, .session: return nil
        }
    }
}
