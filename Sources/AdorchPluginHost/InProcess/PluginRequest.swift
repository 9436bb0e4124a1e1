import AdorchEngine
import CAdorchPlugin
import Glibc

extension LoadOrder {
    /// The order as plugin.h's `adorch_request`, its strings alive while `body` runs: the one
    /// place a request is built, for the loader and for adorch-plugin-validate alike. Per
    /// plugin.h's rule 3 the deadline is the one clock, and `timeout_ms` is what is left of it now.
    public func withCRequest<T>(_ body: (UnsafePointer<adorch_request>) -> T) -> T {
        let strings = CStringArena()
        let timeout = deadline - Moment.monotonicNow()
        var reward = adorch_reward(
            user_id: strings.dup(""), reward_name: strings.dup(reward?.name ?? ""),
            reward_amount: reward?.amount ?? 0, extra: strings.dup(reward?.extra ?? "")
        )
        return withUnsafePointer(to: &reward) { rewardPointer in
            var request = adorch_request(
                struct_size: UInt32(MemoryLayout<adorch_request>.size), format: format.abi.rawValue,
                slot_id: strings.dup(slotID), ad_unit_id: strings.dup(entry.adUnitID),
                server_parameter: strings.dup(entry.serverParameter),
                targeting_json: strings.dup(targetingJSON), width: UInt32(clamping: width), height: UInt32(clamping: height),
                count: UInt32(clamping: count), timeout_ms: max(timeout, .zero).millisecondsUInt32,
                deadline_monotonic_ns: deadline.nanoseconds, test_mode: testMode ? 1 : 0,
                reward: self.reward == nil ? nil : rewardPointer, variant: strings.dup(variant),
                image_options_json: strings.dup(imageOptionsJSON),
                creative_url: strings.dup(interactive?.creativeURL ?? ""),
                ad_parameters_json: strings.dup(interactive?.adParametersJSON ?? "{}"),
                slot_type: strings.dup(interactive?.slotType.rawValue ?? ""),
                load_uid: strings.dup(newLoadUID())
            )
            return withExtendedLifetime(strings) { body(&request) }
        }
    }
}

/// C strings for one call into a plugin, freed together when the call is done.
private final class CStringArena {
    private var pointers: [UnsafeMutablePointer<CChar>] = []

    func dup(_ s: String) -> UnsafePointer<CChar> {
        let p = strdup(s)!
        pointers.append(p)
        return UnsafePointer(p)
    }

    deinit { pointers.forEach { free($0) } }
}
