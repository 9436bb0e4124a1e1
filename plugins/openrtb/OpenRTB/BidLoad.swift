import Foundation

/// One load as the bidder sees it: the plugin's copy of `adorch_request`, without pointers.
public struct BidLoad: Sendable, Equatable {
    public enum Format: String, Sendable, CaseIterable {
        case rewarded, fullscreen, interstitial, banner, splash, native

        /// What the impression offers, and so what a bid's `mtype` may be.
        public var media: Set<MediaType> {
            switch self {
            case .rewarded, .fullscreen: [.video]
            case .interstitial: [.banner, .video]
            case .banner, .splash: [.banner]
            case .native: [.native]
            }
        }
    }

    public var format: Format
    /// This load's id (the request's `load_uid`, 32 hex digits): the BidRequest's `id` and `source.tid`.
    public var loadUID: String
    public var slot: String
    /// The network's ad unit id, sent as `imp.tagid`.
    public var adUnit: String
    public var width: Int
    public var height: Int
    /// Native ads asked at once; 1 for other formats.
    public var count: Int
    public var testMode: Bool
    /// Time left before the load's deadline: `tmax` is never more.
    public var timeLeft: Duration
    /// The entry's own floor (its `server_parameter`), over the bidder's when higher.
    public var floor: Double
    public var privacy: LoadPrivacy

    public init(format: Format, loadUID: String, slot: String = "", adUnit: String = "", width: Int = 0, height: Int = 0,
                count: Int = 1, testMode: Bool = false, timeLeft: Duration = .seconds(5), floor: Double = 0,
                privacy: LoadPrivacy = LoadPrivacy()) {
        (self.format, self.loadUID, self.slot, self.adUnit, self.width, self.height) = (format, loadUID, slot, adUnit, width, height)
        (self.count, self.testMode, self.timeLeft, self.floor, self.privacy) = (count, testMode, timeLeft, floor, privacy)
    }
}

/// OpenRTB 2.6 `mtype`: the kind of markup a bid carries.
public enum MediaType: Int, Sendable, CaseIterable {
    case banner = 1, video = 2, audio = 3, native = 4
}

/// The load's privacy (plugin ABI 1.4, `adorch_privacy`), as OpenRTB 2.6 carries it.
public struct LoadPrivacy: Sendable, Equatable {
    public enum Class: Int, Sendable { case personalized = 1, nonPersonalized = 2, childDirected = 3 }

    public var privacyClass: Class = .personalized
    /// 1 applies, 0 does not, nil the app did not say.
    public var gdpr: Int?
    public var coppa = false
    public var underAgeOfConsent = false
    public var nonPersonalized = false
    public var tcString = ""
    public var gpp = ""
    public var gppSectionIDs: [Int] = []
    public var usPrivacy = ""

    public init() {}

    /// `text` with this load's consent strings cut out: an exchange may echo them back (in a bid
    /// id, an error), and they are personal data that no log line may hold in full.
    public func redacting(_ text: String) -> String {
        [tcString, gpp, usPrivacy].filter { !$0.isEmpty }.reduce(text) { $0.replacingOccurrences(of: $1, with: "[redacted]") }
    }

    /// Tracking must be limited: anything but a personalised ad.
    var limitsTracking: Bool { privacyClass != .personalized || nonPersonalized || coppa || underAgeOfConsent }
}
