import CAdorchPlugin

/// The ABI version this host was built with, from adorch/plugin.h.
public enum PluginABI {
    public static let major = UInt32(ADORCH_PLUGIN_ABI_MAJOR)
    public static let minor = UInt32(ADORCH_PLUGIN_ABI_MINOR)
}
