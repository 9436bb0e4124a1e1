import CAdorchPlugin

/// The ABI version this host was built with, from adorch/plugin.h, and the minor version
/// that brought each value the host sends a plugin: one built against an older minor never
/// receives what it cannot know (plugin.h's evolution rule). Each is a switch over the
/// header's enum, so a value added there does not build until its minor is written here.
public enum PluginABI {
    public static let major = UInt32(ADORCH_PLUGIN_ABI_MAJOR)
    public static let minor = UInt32(ADORCH_PLUGIN_ABI_MINOR)
    /// How long before its deadline a plugin answers at the latest (rule 3, 1.3).
    public static let deadlineMargin = Duration.milliseconds(Int64(ADORCH_DEADLINE_MARGIN_MS))
    /// The minor that brought the request's privacy (1.4): a plugin built for an older one
    /// cannot receive a load's signals, and its networks are marked so (NetworkPrivacy.receivesSignals).
    public static let privacyMinor: UInt32 = 4

    public static func minor(introducing format: adorch_format) -> UInt32 {
        switch format {
        case .ADORCH_FORMAT_REWARDED, .ADORCH_FORMAT_FULLSCREEN, .ADORCH_FORMAT_INTERSTITIAL, .ADORCH_FORMAT_BANNER,
             .ADORCH_FORMAT_SPLASH, .ADORCH_FORMAT_NATIVE:
            0
        case .ADORCH_FORMAT_INTERACTIVE:
            1
        }
    }

    public static func minor(introducing event: adorch_event) -> UInt32 {
        switch event {
        case .ADORCH_EVENT_MEDIA_CACHED, .ADORCH_EVENT_IMPRESSION, .ADORCH_EVENT_CLICK, .ADORCH_EVENT_CLOSE,
             .ADORCH_EVENT_COMPLETE, .ADORCH_EVENT_SKIP, .ADORCH_EVENT_REWARD, .ADORCH_EVENT_SHOW_FAILED,
             .ADORCH_EVENT_WILL_PRESENT, .ADORCH_EVENT_PRESENTED, .ADORCH_EVENT_LEFT_APPLICATION,
             .ADORCH_EVENT_WILL_CLOSE, .ADORCH_EVENT_DISLIKE:
            0
        // Interactive sessions and video progress.
        case .ADORCH_EVENT_ADS_AVAILABLE, .ADORCH_EVENT_STARTED, .ADORCH_EVENT_OPT_IN, .ADORCH_EVENT_OPT_OUT,
             .ADORCH_EVENT_SKIP_CARD_SHOWN, .ADORCH_EVENT_USER_CANCEL, .ADORCH_EVENT_POPUP_WEBSITE,
             .ADORCH_EVENT_AD_FREE_POD, .ADORCH_EVENT_COMPLETED, .ADORCH_EVENT_NO_ADS_AVAILABLE, .ADORCH_EVENT_ERROR,
             .ADORCH_EVENT_PAUSE, .ADORCH_EVENT_RESUME, .ADORCH_EVENT_START, .ADORCH_EVENT_FIRST_QUARTILE,
             .ADORCH_EVENT_MIDPOINT, .ADORCH_EVENT_THIRD_QUARTILE:
            1
        case .ADORCH_EVENT_LOSS:
            4
        }
    }
}

extension PluginInfo {
    /// Whether the plugin can be given a load's privacy signals: built for ABI 1.4 or later.
    public var receivesPrivacySignals: Bool { abiMinor >= PluginABI.privacyMinor }
}
