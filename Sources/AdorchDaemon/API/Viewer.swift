import AdorchEngine
import AdorchRewards
import AdorchVarlink

/// [any queue] A caller, as what it may see of events and rewards (docs/rules.md, "Who sees
/// what"): the Manager side (root, [access] manager users and groups) sees everything; an Ads
/// caller sees the events and rewards of the ads held by its uid, and the events of no app's
/// ads in the slots it may use. The rules are read from the gate at each look, so a reload
/// narrows open subscriptions.
struct Viewer: Sendable {
    let peer: PeerCredentials?
    let gate: CallGate

    /// `sees(heldBy:in:)` for rewards, as the ledger's query, so that a read's limit counts only rows
    /// this caller may see.
    var rewardReader: RewardReader {
        let policy = gate.policy
        if policy.manager.admits(peer) { return .everyone }
        let closed = Set(policy.slots.filter { !$0.value.admits(peer) }.keys)
        return .holder(Int64(peer?.uid ?? UInt32.max), unheldHiddenIn: policy.ads.admits(peer) ? closed : nil)
    }

    /// An event as it is published: one about an ad a uid holds (its `holder`) is that uid's.
    func sees(_ event: EngineEvent) -> Bool {
        guard let slot = event.slot else { return sees(slot: nil) }
        return sees(heldBy: event.holder.map(Int64.init), in: slot)
    }

    /// An event or a reward of an ad of `slot` held by `holder`: that uid's alone, since it
    /// tells who watched what (an `ad_shown` names the app's user) and, by the networks it
    /// names, under which privacy class. With no holder (an ad no app holds yet, a reward
    /// granted before the ledger recorded holders) it goes to those who may use the slot.
    func sees(heldBy holder: Int64?, in slot: String) -> Bool {
        let policy = gate.policy
        if policy.manager.admits(peer) { return true }
        guard let holder else { return policy.mayUse(slot, peer) }
        return peer.map { Int64($0.uid) == holder } ?? false
    }

    /// The events of a slot go to those who may use it. An event of no slot (a plugin's
    /// report on an ad it does not own) is the operator's business alone.
    func sees(slot: String?) -> Bool {
        let policy = gate.policy
        if policy.manager.admits(peer) { return true }
        return slot.map { policy.mayUse($0, peer) } ?? false
    }
}

extension AccessPolicy {
    /// Whether `peer` may call Show, Load or InitInteractive on `slot` under these rules.
    func mayUse(_ slot: String, _ peer: PeerCredentials?) -> Bool {
        ads.admits(peer) && (slots[slot]?.admits(peer) ?? true)
    }
}
