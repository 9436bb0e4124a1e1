import AdorchRewards
import AdorchVarlink
import Foundation

/// The longest value, in UTF-8 bytes, of each string an app hands the daemon that goes on to
/// an event, the journal, the reward ledger or a plugin (docs/rules.md, "Bounded fields").
/// Without them one app's megabyte user id is copied into every subscriber's stream, every
/// journal line and every redelivery, for every app. A longer value, or one holding a control
/// character, is refused with InvalidParameter naming the field, before anything else happens.
/// The JSON objects (targeting, ad_parameters) are bounded as a whole: their string values
/// may hold anything, since they only ever leave the daemon as escaped JSON text.
enum FieldBounds {
    /// Show's user_id, and ListRewards' filter on it.
    static let userID = 256
    /// Show's reward.name.
    static let rewardName = 64
    /// Show's reward.extra: the app's custom data, kept in the ledger and sent to the callback.
    static let rewardExtra = 1024
    /// InitInteractive's creative_url.
    static let creativeURL = 2048
    /// InitInteractive's ad_parameters, as compact JSON text.
    static let adParameters = 8192
    /// Load's targeting, as compact JSON text.
    static let targeting = 4096

    /// The same limits on ledger rows: rows written before there were any are left out of
    /// what the ledger reads back, so they cannot flood a subscriber.
    static let rewardRows = RewardRowBounds(userID: userID, rewardName: rewardName, extra: rewardExtra)

    /// `value`, if it is at most `limit` bytes long and holds no control character: these
    /// strings reach journal and console lines as they are, where a newline, a carriage return
    /// or a NUL would let an app forge lines (and a lone NUL passed for a non-empty user id).
    static func check(_ value: String, _ parameter: String, max limit: Int) throws(VarlinkError) -> String {
        let length = value.utf8.count
        guard length <= limit else { throw tooLong(parameter, length, limit) }
        guard !value.utf8.contains(where: isControl) else {
            throw invalidParameter(parameter, "control characters are not allowed (U+0000 to U+001F and U+007F)")
        }
        return value
    }

    /// A call's optional `user_id`, bounded: Show, ListSlots, ListRewards and GetCaps take one.
    static func userID(of call: VarlinkCall) throws(VarlinkError) -> String? {
        try call.optionalString("user_id").map { id throws(VarlinkError) in try check(id, "user_id", max: userID) }
    }

    /// The C0 controls and DEL. Every byte of a multi-byte UTF-8 sequence is 0x80 or above.
    private static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }

    /// `object` as compact JSON text, if that is at most `limit` bytes long.
    static func check(_ object: [String: JSONValue], _ parameter: String, max limit: Int) throws(VarlinkError) -> String {
        let text = JSONValue.object(object).jsonString
        guard text.utf8.count <= limit else { throw tooLong(parameter, text.utf8.count, limit) }
        return text
    }

    /// An absolute http or https URL of at most `creativeURL` bytes.
    static func creativeURL(_ text: String) throws(VarlinkError) -> String {
        let url = try check(text, "creative_url", max: creativeURL)
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = parts.host, !host.isEmpty
        else { throw invalidParameter("creative_url", "expected an absolute http or https URL, got \"\(url)\"") }
        return url
    }

    private static func tooLong(_ parameter: String, _ length: Int, _ limit: Int) -> VarlinkError {
        invalidParameter(parameter, "at most \(limit) bytes, got \(length)")
    }
}
