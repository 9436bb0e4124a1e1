import AdorchLocking
import AdorchVarlink
import Logging

/// [Varlink queue, any thread] Who may call what, and how often: the config's [access]
/// rules and the per-uid call rates (Show, Load, lists, reports), checked for every call
/// before it reaches the engine; and every refusal's journal line, kept to one per uid and
/// kind a minute (`RefusalLog`), also for the budgets the engine side enforces.
final class CallGate: Sendable {
    private let access: LockedValue<AccessPolicy>
    private let rates: LockedValue<[Budget: RateLimiter]>
    private let refusals = LockedValue(Refusals())
    private let logger: Logger

    private struct Refusals {
        var log = RefusalLog()
        var counts: [Budget: Int] = [:]
    }

    init(_ config: DaemonConfig, logger: Logger) {
        access = LockedValue(config.access)
        rates = LockedValue([.showRate: RateLimiter(rate: config.showRate), .loadRate: RateLimiter(rate: config.loadRate),
                             .listRate: RateLimiter(rate: config.listRate), .reportRate: RateLimiter(rate: config.reportRate)])
        self.logger = logger
    }

    /// A reload's rules apply from the next call on.
    func update(_ config: DaemonConfig) {
        access.withLock { $0 = config.access }
        rates.withLock {
            $0[.showRate]!.rate = config.showRate
            $0[.loadRate]!.rate = config.loadRate
            $0[.listRate]!.rate = config.listRate
            $0[.reportRate]!.rate = config.reportRate
        }
    }

    /// Calls refused for each budget since start.
    var refusedCounts: [Budget: Int] { refusals.withLock { $0.counts } }

    /// The [access] rules in force now, for what a caller may see (`Viewer`).
    var policy: AccessPolicy { access.withLock { $0 } }

    /// The refusal of `call` (on `slot`) as the caller sees it, or nil if it may make it.
    func refusal(of call: VarlinkCall, slot: String?) -> VarlinkError? {
        guard let reason = access.withLock({ $0.refusal(of: call, slot: slot) }) else { return nil }
        return denied(call, reason)
    }

    /// Logs a refusal for the operator: per method, each kind of call a uid was refused, a
    /// line a minute each. Also for refusals the caller is not told of as such (a Report on
    /// an ad handed to another uid answers as an unknown id).
    func logRefusal(_ call: VarlinkCall, _ reason: String) {
        let uid = call.peer.map { "\($0.uid)" } ?? "unknown"
        if let suppressed = note("permission denied \(call.method)", call) {
            logger.warning("permission denied: uid \(uid) (pid \(call.peer.map { "\($0.pid)" } ?? "unknown")) called \(call.method): \(reason)\(RefusalLog.suffix(suppressed))",
                           metadata: ["peer_uid": "\(uid)", "peer_pid": "\(call.peer.map { "\($0.pid)" } ?? "")", "method": "\(call.method)"]
                               .merging(MessageID.permissionDenied.metadata) { $1 })
        }
    }

    /// Logs a refusal and names it for the caller.
    func denied(_ call: VarlinkCall, _ reason: String) -> VarlinkError {
        logRefusal(call, reason)
        let uid = call.peer.map { "\($0.uid)" } ?? "unknown"
        let parameters: [String: JSONValue] = [
            "method": .string(call.method), "uid": .int(Int64(call.peer?.uid ?? UInt32.max)),
            "message": .string("uid \(uid) is \(reason)"),
        ]
        // Each interface's own PermissionDenied, as its IDL declares it.
        switch call.interface {
        case ManagerMethod.interface: return ManagerError.permissionDenied(parameters)
        case DebugMethod.interface: return DebugError.permissionDenied(parameters)
        default: return AdsError.permissionDenied(parameters)
        }
    }

    /// The RateLimited error if the caller must wait before this call (`budget` is
    /// `.showRate`, `.loadRate`, `.listRate` or `.reportRate`), or nil if it may make it now.
    /// Root, the operator, is not rate limited, as it is not refused by [access].
    func rateRefusal(_ budget: Budget, _ call: VarlinkCall) -> VarlinkError? {
        let uid = call.peer?.uid
        guard uid != 0, let wait = rates.withLock({ $0[budget]?.take(uid ?? UInt32.max, now: .now) }) else { return nil }
        let who = uid.map(String.init) ?? "unknown"
        return refused(budget, call, AdsError.rateLimited([
            "retry_after_ms": .int(Int64(wait / .milliseconds(1)) + 1),
            "message": .string("uid \(who) called \(call.member) faster than [limits] \(budget.key) allows; try again in \(wait)"),
        ]), logging: "uid \(who) may \(call.member.lowercased()) again in \(wait)")
    }

    /// Counts a refusal for `budget`, logs it unless this uid's refusals of the kind were
    /// logged in the last minute, and hands `error` back for the caller.
    func refused(_ budget: Budget, _ call: VarlinkCall, _ error: VarlinkError, logging line: String) -> VarlinkError {
        refusals.withLock { $0.counts[budget, default: 0] += 1 }
        if let suppressed = note(budget.rawValue, call) {
            logger.notice("\(budget.rawValue): \(line)\(RefusalLog.suffix(suppressed))", metadata: [
                "peer_uid": "\(call.peer.map { String($0.uid) } ?? "")", "method": "\(call.method)",
            ])
        }
        return error
    }

    /// nil: do not log this refusal; otherwise how many of its kind went unlogged before it.
    private func note(_ kind: String, _ call: VarlinkCall) -> Int? {
        let key = RefusalLog.Key(uid: call.peer?.uid ?? UInt32.max, kind: kind)
        return refusals.withLock { $0.log.note(key) }
    }
}

/// A per-uid budget a call can be refused for (docs/rules.md, "Budgets per uid"): its
/// journal lines start with the name, and the status counts its refusals.
enum Budget: String, Sendable, CaseIterable {
    case showRate = "Show rate limit"
    case loadRate = "Load rate limit"
    case listRate = "List rate limit"
    /// Report, AckReward and the session controls (docs/rules.md, "Budgets per uid").
    case reportRate = "Report rate limit"
    case openAds = "open ads budget"
    case sessions = "sessions budget"
    /// Rewarded Shows of a uid whose rewards wait unacknowledged in the ledger
    /// (docs/rules.md, "A bound on unacknowledged rewards").
    case unacknowledgedRewards = "unacknowledged rewards budget"
    /// Not a count but a window: a Show that would take what the fair share holds for
    /// other uids (docs/rules.md, "Fair share").
    case fairShare = "fair share"
    /// SetPrivacy adding a record to a uid that holds its limit (docs/privacy.md, "Setting a
    /// viewer's state").
    case privacyRecords = "privacy records budget"

    /// The [limits] key that sets the budget.
    var key: String {
        switch self {
        case .showRate: "shows_per_second_per_uid"
        case .loadRate: "loads_per_second_per_uid"
        case .listRate: "lists_per_second_per_uid"
        case .reportRate: "reports_per_second_per_uid"
        case .openAds: "max_open_ads_per_uid"
        case .sessions: "max_sessions_per_uid"
        case .unacknowledgedRewards: "max_unacknowledged_rewards_per_uid"
        case .fairShare: "fair_share_window_s"
        case .privacyRecords: "max_privacy_records_per_uid"
        }
    }
}
