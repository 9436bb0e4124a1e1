import AdorchVarlink
import Foundation

/// Users and groups, by number: who a rule admits. Root is always admitted.
public struct Audience: Sendable, Equatable {
    public var users: Set<UInt32>
    public var groups: Set<UInt32>
    /// No list was configured: everyone may call.
    public var everyone: Bool

    public static let anyone = Audience(users: [], groups: [], everyone: true)

    public init(users: Set<UInt32>, groups: Set<UInt32>, everyone: Bool = false) {
        self.users = users
        self.groups = groups
        self.everyone = everyone
    }

    /// A caller without credentials (never the case on a Unix socket) is admitted only by `everyone`.
    public func admits(_ peer: PeerCredentials?) -> Bool {
        if everyone { return true }
        guard let peer else { return false }
        return peer.uid == 0 || users.contains(peer.uid) || groups.contains(peer.gid) || peer.groups.contains(where: groups.contains)
    }
}

/// Who may call what, from the config's [access] table and each slot's users/groups.
public struct AccessPolicy: Sendable, Equatable {
    /// io.adorch.Ads, every method.
    public var ads: Audience = .anyone
    /// io.adorch.Manager: root and the admin group by default.
    public var manager: Audience
    /// Show, Load and InitInteractive on these slots, on top of `ads`.
    public var slots: [String: Audience] = [:]

    /// The group that may use io.adorch.Manager when the config names none; if it does not
    /// exist on this host, only root may.
    public static let defaultAdminGroup = "adorch-admin"

    public init(ads: Audience = .anyone, manager: Audience? = nil, slots: [String: Audience] = [:]) {
        self.ads = ads
        self.manager = manager ?? Audience(users: [], groups: Set([Self.defaultAdminGroup].compactMap(groupID)))
        self.slots = slots
    }

    /// Why `peer` may not make `call`, or nil if it may.
    func refusal(of call: VarlinkCall, slot: String?) -> String? {
        let audience: Audience
        switch call.interface {
        case "io.adorch.Ads": audience = ads
        case "io.adorch.Manager": audience = manager
        default: return nil  // org.varlink.service is public; io.adorch.Debug is only served when asked for
        }
        guard audience.admits(call.peer) else { return "not allowed to use \(call.interface)" }
        if let slot, let rule = slots[slot], !rule.admits(call.peer) { return "not allowed to use slot \(slot)" }
        return nil
    }
}

/// A user name or number, as /etc/passwd knows it.
func userID(_ name: String) -> UInt32? {
    if let number = UInt32(name) { return number }
    guard let entry = getpwnam(name) else { return nil }
    return entry.pointee.pw_uid
}

/// A group name or number, as /etc/group knows it.
func groupID(_ name: String) -> UInt32? {
    if let number = UInt32(name) { return number }
    guard let entry = getgrnam(name) else { return nil }
    return entry.pointee.gr_gid
}
