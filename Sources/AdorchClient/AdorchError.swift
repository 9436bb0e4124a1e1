import AdorchJSON
import Foundation

/// Every error of the library: the daemon's (its Varlink error name, message and the reply's
/// parameters, with `kind` typed from them) and the connection's own.
///
///     do { let ad = try await client.show(slot: "rewarded_main", userID: "u1") }
///     catch let error as AdorchError { if case .noAdReady(let slot) = error.kind { ... } }
public struct AdorchError: Error, Sendable, CustomStringConvertible {
    /// One case per error of the io.adorch.Ads and io.adorch.Manager interfaces, of the
    /// daemon's connection-level refusals and of org.varlink.service, then the client's own.
    /// A name this library does not know is `.unknown`: `name` still says which it was.
    public enum Kind: Sendable, Equatable {
        // io.adorch.Ads and io.adorch.Manager
        case noAdReady(slot: String)
        case slotNotFound(slot: String)
        case adNotValid(adID: String)
        case sessionNotFound(sessionID: String)
        case loadFailed(slot: String, error: String, attempts: [Attempt])
        case invalidParameter(parameter: String)
        case rewardNotFound(transID: String)
        case ledgerFailed
        case shuttingDown
        case rateLimited(retryAfterMs: Int)
        /// A frequency rule (`rule`, e.g. "pacing 30s per user") holds this Show: one after
        /// `retryAfterMs` is let in, if no other ad is shown to the user meanwhile (docs/caps.md).
        case capped(slot: String, rule: String, retryAfterMs: Int)
        /// `budget` max_open_ads_per_uid: close ads you are done with; max_unacknowledged_rewards_per_uid
        /// (a rewarded Show): `open` rewards wait, acknowledge them with AckReward.
        case tooManyOpenAds(budget: String, limit: Int, open: Int, loading: Int)
        case tooManySessions(budget: String, limit: Int, live: Int)
        /// The app keeps `limit` privacy records ([limits] max_privacy_records_per_uid): clear one first.
        case tooManyPrivacyRecords(limit: Int)
        /// The daemon could not write the privacy record (a full disk): nothing changed.
        case privacyNotStored
        /// io.adorch.Ads's and io.adorch.Manager's (method and uid set) and org.varlink.service's.
        case permissionDenied(method: String?, uid: Int?)
        case noRewardKey
        case reloadFailed
        // The daemon's refusals of a connection (it closes it after them)
        case tooManyConnections
        case tooManyPendingBytes
        case readerTooSlow
        case incompleteMessage
        // org.varlink.service
        case interfaceNotFound(interface: String)
        case methodNotFound(method: String)
        case methodNotImplemented(method: String)
        /// org.varlink.service.InvalidParameter: the call's parameters do not fit the IDL.
        case varlinkInvalidParameter(parameter: String)
        case expectedMore
        // The client's own
        /// No connection to the daemon: `errno` of connect (ENOENT, ECONNREFUSED...), after
        /// the reconnect policy's retries if the client was connected before.
        case cannotConnect(path: String, errno: Int32)
        /// The connection broke after the call was sent: it may have taken effect, so it is
        /// not sent again (only reads are).
        case connectionLost(method: String)
        case timeout
        case malformedReply
        /// The app closed the client (`Client.close`): it makes no more calls.
        case closed
        /// A daemon error this library does not know (a newer daemon's): see `name`.
        case unknown
    }

    /// One waterfall attempt of a failed Load.
    public struct Attempt: Sendable, Equatable, Codable {
        public var network: String
        public var adUnitID: String
        public var error: String
        enum CodingKeys: String, CodingKey { case network, adUnitID = "ad_unit_id", error }
    }

    public let kind: Kind
    /// The daemon's error name, e.g. "io.adorch.Ads.NoAdReady"; for the client's own errors
    /// "io.adorch.client." and the case (ConnectionLost...).
    public let name: String
    public let message: String
    /// The error reply's parameters as the daemon sent them (empty for the client's own).
    public let parameters: [String: JSONValue]

    /// The typed error of a daemon's error reply.
    public init(name: String, parameters: [String: JSONValue]) {
        self.name = name
        self.parameters = parameters
        message = parameters["message"]?.stringValue ?? ""
        kind = Self.kinds[name]?(Fields(parameters)) ?? .unknown
    }

    init(_ kind: Kind, message: String) {
        self.kind = kind
        self.message = message
        parameters = [:]
        let label = "\(kind)".prefix { $0 != "(" }
        name = "io.adorch.client." + label.prefix(1).uppercased() + label.dropFirst()
    }

    public var description: String { message.isEmpty ? name : "\(name): \(message)" }

    /// The reply's parameters, read leniently: a field the daemon left out is empty or zero
    /// (the name alone types the error).
    private struct Fields {
        let values: [String: JSONValue]
        init(_ values: [String: JSONValue]) { self.values = values }
        func string(_ key: String) -> String { values[key]?.stringValue ?? "" }
        func int(_ key: String) -> Int { values[key]?.intValue.map { Int($0) } ?? 0 }
    }

    /// Every error name the library types, by qualified name: the one table of them.
    private static let kinds: [String: @Sendable (Fields) -> Kind] = {
        var kinds: [String: @Sendable (Fields) -> Kind] = [
            "io.adorch.Ads.NoAdReady": { .noAdReady(slot: $0.string("slot")) },
            "io.adorch.Ads.AdNotValid": { .adNotValid(adID: $0.string("ad_id")) },
            "io.adorch.Ads.SessionNotFound": { .sessionNotFound(sessionID: $0.string("session_id")) },
            "io.adorch.Ads.LoadFailed": { fields in
                let attempts = fields.values["attempts"].flatMap { try? decode([Attempt].self, from: $0) } ?? []
                return .loadFailed(slot: fields.string("slot"), error: fields.string("error"), attempts: attempts)
            },
            "io.adorch.Ads.InvalidParameter": { .invalidParameter(parameter: $0.string("parameter")) },
            "io.adorch.Ads.RewardNotFound": { .rewardNotFound(transID: $0.string("trans_id")) },
            "io.adorch.Ads.ShuttingDown": { _ in .shuttingDown },
            "io.adorch.Ads.RateLimited": { .rateLimited(retryAfterMs: $0.int("retry_after_ms")) },
            "io.adorch.Ads.Capped": { .capped(slot: $0.string("slot"), rule: $0.string("rule"), retryAfterMs: $0.int("retry_after_ms")) },
            "io.adorch.Ads.TooManyOpenAds": {
                .tooManyOpenAds(budget: $0.string("budget"), limit: $0.int("limit"), open: $0.int("open"), loading: $0.int("loading"))
            },
            "io.adorch.Ads.TooManySessions": { .tooManySessions(budget: $0.string("budget"), limit: $0.int("limit"), live: $0.int("live")) },
            "io.adorch.Ads.TooManyPrivacyRecords": { .tooManyPrivacyRecords(limit: $0.int("limit")) },
            "io.adorch.Ads.PrivacyNotStored": { _ in .privacyNotStored },
            "io.adorch.Manager.NoRewardKey": { _ in .noRewardKey },
            "io.adorch.Manager.ReloadFailed": { _ in .reloadFailed },
            "io.adorch.TooManyConnections": { _ in .tooManyConnections },
            "io.adorch.TooManyPendingBytes": { _ in .tooManyPendingBytes },
            "io.adorch.ReaderTooSlow": { _ in .readerTooSlow },
            "io.adorch.IncompleteMessage": { _ in .incompleteMessage },
            "org.varlink.service.InterfaceNotFound": { .interfaceNotFound(interface: $0.string("interface")) },
            "org.varlink.service.MethodNotFound": { .methodNotFound(method: $0.string("method")) },
            "org.varlink.service.MethodNotImplemented": { .methodNotImplemented(method: $0.string("method")) },
            "org.varlink.service.InvalidParameter": { .varlinkInvalidParameter(parameter: $0.string("parameter")) },
            "org.varlink.service.ExpectedMore": { _ in .expectedMore },
            "org.varlink.service.PermissionDenied": { _ in .permissionDenied(method: nil, uid: nil) },
        ]
        // Errors both interfaces declare, with the same fields.
        for interface in ["io.adorch.Ads", "io.adorch.Manager"] {
            kinds["\(interface).SlotNotFound"] = { .slotNotFound(slot: $0.string("slot")) }
            kinds["\(interface).LedgerFailed"] = { _ in .ledgerFailed }
            kinds["\(interface).PermissionDenied"] = { .permissionDenied(method: $0.string("method"), uid: $0.int("uid")) }
        }
        return kinds
    }()
}
