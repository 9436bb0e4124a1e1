import AdorchEngine
import AdorchPrivacy
import AdorchVarlink
import Foundation
import Logging

// How an engine event reads: a journal line with its fields, and the JSON object apps get
// from Subscribe and ListEvents.

extension EngineEvent {
    var logLevel: Logger.Level {
        switch kind {
        case .adLoaded, .adShown, .adExpired, .adReplaced, .adOutbid, .adEvent, .rewardGranted: .info
        case .mediaCached: .debug
        case .adFailed, .adTimedOut, .slotEmpty, .networkPaused: .notice
        case .callbackIgnored, .contractViolation: .warning
        case .session: sessionEvent == "error" ? .notice : .info
        }
    }

    /// The journal fields beside the line: what an operator filters on.
    func logMetadata(_ ids: ExternalIDs) -> Logger.Metadata {
        var metadata: Logger.Metadata = [:]
        if let slot { metadata["slot"] = "\(slot)" }
        if let network { metadata["network"] = "\(network)" }
        if let adID { metadata[kind == .session ? "session_id" : "ad_id"] = "\(ids.external(adID))" }
        if kind == .session, terminal { metadata["ad_free_pod"] = "\(adFreePod)" }
        if let errorCode { metadata["error_code"] = "\(errorCode.rawValue)" }
        if let networkCode { metadata["network_code"] = "\(networkCode)" }
        // A user id is personal data: the journal has its tag, never the id.
        if let userID, !userID.isEmpty { metadata["user_tag"] = "\(UserTag.of(userID))" }
        if let id = MessageID(self) { metadata["message_id"] = "\(id.rawValue)" }
        return metadata
    }

    func logLine(_ ids: ExternalIDs) -> String {
        let ad = adID.map { " \(ids.external($0))" } ?? ""
        let slot = slot.map { " in \($0)" } ?? ""
        let network = network.map { " from \($0)" } ?? ""
        switch kind {
        case .adLoaded: return "ad\(ad) loaded\(slot)\(network)"
        case .adFailed:
            return "ad\(ad) failed\(slot)\(network): \(errorCode?.rawValue ?? "?") (network code \(networkCode ?? 0): \(message ?? ""))"
        case .adTimedOut: return "ad\(ad) timed out\(slot)\(network): \(message ?? "")"
        case .adExpired: return "ad\(ad) expired unshown\(slot)"
        case .adReplaced: return "ad\(ad) replaced by a fresher one\(slot)"
        case .adOutbid: return "ad\(ad) lost its auction\(slot)\(network): \(message ?? "")"
        case .adShown: return "ad\(ad) shown\(slot)\(network)"
        case .adEvent: return "ad\(ad) \(viewerEvent?.rawValue ?? message ?? "event")\(slot)"
        case .mediaCached: return "ad\(ad) media cached\(slot)"
        case .slotEmpty: return "slot \(self.slot ?? "?") ran dry: no valid ad ready"
        case .networkPaused: return "network \(self.network ?? "?") rate-limited us (network code \(networkCode ?? 0)): \(message ?? "")"
        case .callbackIgnored: return "plugin callback ignored\(slot)\(network): \(message ?? "")"
        case .contractViolation: return "contract violation\(network)\(slot): \(message ?? "")"
        case .session:
            let end = terminal ? " (session ended\(adFreePod ? ", ad-free pod earned" : ""))" : ""
            return "session\(ad)\(slot)\(network): \(sessionEvent ?? "?")\(message.map { ": \($0)" } ?? "")\(end)"
        case .rewardGranted: return "reward granted to user \(userID.map(UserTag.of) ?? "?") for ad\(ad)\(slot)\(network): \(message ?? "")"
        }
    }

    func json(at time: Date, _ ids: ExternalIDs) -> JSONValue {
        var object: [String: JSONValue] = ["kind": .string(kind.rawValue), "time": .string(timestamp(time))]
        if let slot { object["slot"] = .string(slot) }
        if let adID { object[kind == .session ? "session_id" : "ad_id"] = .string(ids.external(adID)) }
        if kind == .session {
            object["terminal"] = .bool(terminal)
            if terminal { object["ad_free_pod"] = .bool(adFreePod) }
        }
        if let network { object["network"] = .string(network) }
        if let errorCode { object["error"] = .string(errorCode.rawValue) }
        if let networkCode { object["network_code"] = .int(networkCode) }
        if let message { object["message"] = .string(message) }
        if let viewerEvent { object["viewer_event"] = .string(viewerEvent.rawValue) }
        if let userID, !userID.isEmpty { object["user_id"] = .string(userID) }
        if let name { object["name"] = .string(name) }
        if let detail = detailJSON.flatMap({ JSONValue.parse(Data($0.utf8)) }) { object["detail"] = detail }
        return .object(object)
    }
}
