import AdorchLocking
import AdorchVarlink
import Logging

/// [Varlink queue, any thread] Who may call what, and how often: the config's [access]
/// rules and the per-uid Show rate, checked for every call before it reaches the engine.
/// A refusal is logged with the caller's uid, pid and the method.
final class CallGate: Sendable {
    private let access: LockedValue<AccessPolicy>
    private let shows: LockedValue<ShowRateLimiter>
    private let logger: Logger

    init(_ config: DaemonConfig, logger: Logger) {
        access = LockedValue(config.access)
        shows = LockedValue(ShowRateLimiter(rate: config.showRate))
        self.logger = logger
    }

    /// A reload's rules apply from the next call on.
    func update(_ config: DaemonConfig) {
        access.withLock { $0 = config.access }
        shows.withLock { $0.rate = config.showRate }
    }

    /// The [access] rules in force now, for what a caller may see (`Viewer`).
    var policy: AccessPolicy { access.withLock { $0 } }

    /// Shows refused for the rate limit since start.
    var showsRateLimited: Int { shows.withLock { $0.refused } }

    /// The refusal of `call` (on `slot`) as the caller sees it, or nil if it may make it.
    func refusal(of call: VarlinkCall, slot: String?) -> VarlinkError? {
        guard let reason = access.withLock({ $0.refusal(of: call, slot: slot) }) else { return nil }
        return denied(call, reason)
    }

    /// Logs a refusal and names it for the caller (also for refusals the engine side finds,
    /// such as an ad handed to another uid).
    func denied(_ call: VarlinkCall, _ reason: String) -> VarlinkError {
        let uid = call.peer.map { "\($0.uid)" } ?? "unknown"
        logger.warning("permission denied: uid \(uid) (pid \(call.peer.map { "\($0.pid)" } ?? "unknown")) called \(call.method): \(reason)", metadata: [
            "peer_uid": "\(uid)", "peer_pid": "\(call.peer.map { "\($0.pid)" } ?? "")", "method": "\(call.method)",
        ].merging(MessageID.permissionDenied.metadata) { $1 })
        return VarlinkError("\(call.interface).PermissionDenied", [
            "method": .string(call.method), "uid": .int(Int64(call.peer?.uid ?? UInt32.max)),
            "message": .string("uid \(uid) is \(reason)"),
        ])
    }

    /// The RateLimited error if `uid` must wait before its next Show, or nil if it may show
    /// now. Root, the operator, is not rate limited, as it is not refused by [access].
    func showRefusal(_ uid: UInt32?) -> VarlinkError? {
        guard uid != 0, let wait = shows.withLock({ $0.take(uid ?? UInt32.max, now: .now) }) else { return nil }
        let who = uid.map(String.init) ?? "unknown"
        logger.notice("Show rate limit: uid \(who) may show again in \(wait)", metadata: ["peer_uid": "\(uid.map(String.init) ?? "")"])
        return VarlinkError("io.adorch.Ads.RateLimited", [
            "retry_after_ms": .int(Int64(wait / .milliseconds(1)) + 1),
            "message": .string("uid \(who) called Show faster than the [limits] allow; try again in \(wait)"),
        ])
    }
}
