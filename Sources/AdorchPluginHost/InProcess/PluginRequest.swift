import AdorchEngine
import CAdorchPlugin
import Glibc

extension LoadOrder {
    /// The order as plugin.h's `adorch_request`, its strings alive while `body` runs: the one
    /// place a request is built, for the loader and for adorch-plugin-validate alike. Per
    /// plugin.h's rule 3 the deadline is the one clock, and `timeout_ms` is what is left of it now.
    /// `pluginMinor` is the ABI minor the plugin was built for: only one of 1.4 or later is
    /// given the load's privacy (`PluginABI.privacyMinor`); an older one gets NULL there.
    public func withCRequest<T>(pluginMinor: UInt32, _ body: (UnsafePointer<adorch_request>) -> T) -> T {
        let strings = CStringArena()
        let timeout = deadline - Moment.monotonicNow()
        var reward = adorch_reward(
            user_id: strings.dup(""), reward_name: strings.dup(reward?.name ?? ""),
            reward_amount: reward?.amount ?? 0, extra: strings.dup(reward?.extra ?? "")
        )
        // A GPP header's ids, checked against it when the app set them: none comes near 2^32.
        let sectionIDs = privacy.signals.gppSid.map { UInt32(clamping: $0) }
        return withUnsafePointer(to: &reward) { rewardPointer in
            sectionIDs.withUnsafeBufferPointer { sids in
                var cPrivacy = privacy.cPrivacy(strings, sids: sids)
                return withUnsafePointer(to: &cPrivacy) { privacyPointer in
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
                        load_uid: strings.dup(newLoadUID()),
                        privacy: pluginMinor >= PluginABI.privacyMinor ? privacyPointer : nil,
                        bid_floor: floor
                    )
                    return withExtendedLifetime(strings) { body(&request) }
                }
            }
        }
    }
}

extension LoadPrivacy {
    /// plugin.h's `adorch_privacy`: "" for a string the app did not give, -1 for a GDPR it did
    /// not say, NULL ids when there are none.
    fileprivate func cPrivacy(_ strings: CStringArena, sids: UnsafeBufferPointer<UInt32>) -> adorch_privacy {
        let gdpr: Int32 = switch signals.gdprApplies {
        case .yes: 1
        case .no: 0
        case .unknown: -1
        }
        return adorch_privacy(
            struct_size: UInt32(MemoryLayout<adorch_privacy>.size), privacy_class: privacyClass.abi.rawValue, gdpr: gdpr,
            coppa: signals.childDirected ? 1 : 0, under_age_of_consent: signals.underAgeOfConsent ? 1 : 0,
            non_personalized: signals.nonPersonalized ? 1 : 0, tc_string: strings.dup(signals.tcString ?? ""),
            gpp: strings.dup(signals.gpp ?? ""), gpp_sid: sids.isEmpty ? nil : sids.baseAddress, gpp_sid_count: UInt32(sids.count),
            us_privacy: strings.dup(signals.usPrivacy ?? ""), max_content_rating: strings.dup(signals.maxContentRating?.rawValue ?? "")
        )
    }
}

extension PrivacyClass {
    /// The value in plugin.h: a switch, so a class added to the engine does not build until
    /// the header has it.
    public var abi: adorch_privacy_class {
        switch self {
        case .personalized: .ADORCH_PRIVACY_PERSONALIZED
        case .nonPersonalized: .ADORCH_PRIVACY_NON_PERSONALIZED
        case .childDirected: .ADORCH_PRIVACY_CHILD_DIRECTED
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
