import CAdorchPlugin

/// The ABI version this host was built with, from adorch/plugin.h, and the minor version
/// that brought each value the host sends a plugin: one built against an older minor never
/// receives what it cannot know (plugin.h's evolution rule).
public enum PluginABI {
    public static let major = UInt32(ADORCH_PLUGIN_ABI_MAJOR)
    public static let minor = UInt32(ADORCH_PLUGIN_ABI_MINOR)

    /// 1.1 added the interactive format.
    public static func minor(introducingFormat format: UInt32) -> UInt32 {
        format >= UInt32(ADORCH_FORMAT_INTERACTIVE.rawValue) ? 1 : 0
    }

    /// 1.1 added events 14 to 30 (interactive sessions, video progress).
    public static func minor(introducingEvent event: UInt32) -> UInt32 {
        event >= UInt32(ADORCH_EVENT_ADS_AVAILABLE.rawValue) ? 1 : 0
    }
}
