import Crypto
import Foundation

/// A network's server-to-server reward callback (docs/rules.md, "Server-to-server callback"):
/// the network calls the publisher's server with user_id, trans_id, reward_name,
/// reward_amount, extra and sign = sha256(app_security_key + ":" + trans_id) as lowercase hex.
public enum RewardCallback {
    public struct Query: Sendable, Equatable {
        public var userID: String
        public var transID: String
        public var rewardName: String
        public var rewardAmount: Int64
        public var extra: String
        public var sign: String
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case missing(String)
        case malformed(String)

        public var description: String {
            switch self {
            case .missing(let field): "the query has no \(field)"
            case .malformed(let field): "\(field) is not valid"
            }
        }
    }

    /// The signature of a transaction: sha256 of "key:trans_id", as lowercase hex.
    public static func sign(key: String, transID: String) -> String {
        SHA256.hash(data: Data("\(key):\(transID)".utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Parses `user_id=…&trans_id=…&…` (a leading `?` is allowed; values percent-decoded).
    public static func parse(_ query: String) throws(Failure) -> Query {
        var fields: [String: String] = [:]
        let text = query.hasPrefix("?") ? String(query.dropFirst()) : query
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let raw = parts.count > 1 ? String(parts[1]) : ""
            guard let value = raw.replacingOccurrences(of: "+", with: " ").removingPercentEncoding else { throw .malformed(name) }
            if fields[name] != nil { throw .malformed("\(name) (given twice)") }
            fields[name] = value
        }
        func required(_ name: String) throws(Failure) -> String {
            guard let value = fields[name], !value.isEmpty else { throw .missing(name) }
            return value
        }
        let amountText = fields["reward_amount"] ?? "0"
        guard let amount = Int64(amountText.isEmpty ? "0" : amountText), amount >= 0 else { throw .malformed("reward_amount") }
        let sign = try required("sign")
        guard sign.count == 64, sign.allSatisfy(\.isHexDigit) else { throw .malformed("sign") }
        return Query(userID: try required("user_id"), transID: try required("trans_id"), rewardName: fields["reward_name"] ?? "",
                     rewardAmount: amount, extra: fields["extra"] ?? "", sign: sign.lowercased())
    }

    /// Whether the signature is right, compared in constant time.
    public static func signatureIsValid(_ query: Query, key: String) -> Bool {
        constantTimeEqual(Array(sign(key: key, transID: query.transID).utf8), Array(query.sign.utf8))
    }

    /// The JSON body the network expects as the answer (docs/rules.md, "Server-to-server callback").
    public static func body(isValid: Bool) -> String { isValid ? #"{"isValid": true}"# : #"{"isValid": false}"# }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
