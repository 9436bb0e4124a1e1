/// Why a plugin file was refused. Each case reads as one log line naming the file.
public enum PluginLoadError: Error, CustomStringConvertible, Sendable {
    case cannotOpen(path: String, reason: String)
    case noEntrySymbol(path: String)
    case abiMismatch(path: String, pluginMajor: UInt32, pluginMinor: UInt32)
    case malformedEntry(path: String, reason: String)
    case initFailed(path: String, name: String, code: Int32)
    /// The file could have been replaced by someone the daemon does not trust (PluginFileTrust).
    case untrusted(path: String, reason: String)
    /// dlopen gave the library another PluginLibrary of this process still holds (PluginFileID).
    case alreadyHeld(path: String, heldFrom: String)
    /// An isolated plugin's host refused it (with the loader's own words) or did not start.
    case refusedByHost(path: String, name: String, reason: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason):
            "plugin \(path) refused: dlopen failed: \(reason)"
        case .noEntrySymbol(let path):
            "plugin \(path) refused: it exports neither adorch_plugin_entry nor adorch_plugin_get_entry"
        case .abiMismatch(let path, let major, let minor):
            "plugin \(path) refused: built for plugin ABI \(major).\(minor), this daemon speaks ABI \(PluginABI.major).\(PluginABI.minor) (major versions must match)"
        case .malformedEntry(let path, let reason):
            "plugin \(path) refused: its adorch_plugin_entry is malformed: \(reason)"
        case .initFailed(let path, let name, let code):
            "plugin \(path) refused: \(name)'s init returned \(code)"
        case .untrusted(let path, let reason):
            "plugin \(path) refused: \(reason) (adorchd --insecure-plugins skips this check, for development only)"
        case .alreadyHeld(let path, let heldFrom):
            "plugin \(path) refused: it is the library a loaded plugin holds, opened from \(heldFrom): \(PluginFileID.sharedGlobals)"
        case .refusedByHost(let path, let name, let reason):
            // The host's refusals are the loader's own descriptions, which already name the file.
            reason.hasPrefix("plugin ") ? reason : "plugin \(path) refused: \(name)'s host: \(reason)"
        }
    }

    public var path: String {
        switch self {
        case .cannotOpen(let path, _), .noEntrySymbol(let path), .abiMismatch(let path, _, _),
            .malformedEntry(let path, _), .initFailed(let path, _, _), .untrusted(let path, _), .alreadyHeld(let path, _),
            .refusedByHost(let path, _, _):
            path
        }
    }
}
