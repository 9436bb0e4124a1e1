import AdorchEngine
import AdorchLocking
import CAdorchPlugin
import Foundation

/// A plugin file opened and its entry checked against this host's ABI, before any of its
/// functions runs: what the daemon and adorch-plugin-validate both do first.
///
/// @unchecked Sendable: it holds the dlopen handle and a pointer to the plugin's constant
/// entry, both immutable; calling through the entry is the owner's business.
public final class PluginLibrary: @unchecked Sendable {
    public let path: String
    public let handle: UnsafeMutableRawPointer
    /// The plugin's entry as this host knows it: copied up to the plugin's struct_size, so
    /// what an older minor's entry lacks reads as zero and NULL, and a newer minor's
    /// additions are not seen.
    public let entry: UnsafePointer<adorch_plugin_entry_t>
    /// Which symbol the entry came from: the data symbol, or the function returning it.
    public let entrySymbol: String

    /// The handles PluginLibraries of this process hold, with the path each was opened from.
    /// The config checks keep two plugin names off one file (PluginFileID); this catches what
    /// they cannot see: dlopen also matches the path a library was opened from, though the
    /// file there was replaced since, and a plugin removed by a reload that never returned
    /// from a call still holds its library.
    private static let held = LockedValue<[Int: String]>([:])

    /// Opens `path` (RTLD_NOW | RTLD_LOCAL) and checks the entry. Any refusal closes the
    /// library again and says why; so does a library another PluginLibrary still holds.
    public init(path: String) throws(PluginLoadError) {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw .cannotOpen(path: path, reason: dlerror().map { String(cString: $0) } ?? "unknown error")
        }
        let symbol: UnsafeMutableRawPointer
        if let data = dlsym(handle, ADORCH_PLUGIN_ENTRY_SYMBOL) {
            symbol = data
            entrySymbol = ADORCH_PLUGIN_ENTRY_SYMBOL
        } else if let function = dlsym(handle, ADORCH_PLUGIN_GET_ENTRY_SYMBOL),
                  let entry = unsafeBitCast(function, to: adorch_plugin_get_entry_fn.self)()
        {
            symbol = UnsafeMutableRawPointer(mutating: entry)
            entrySymbol = ADORCH_PLUGIN_GET_ENTRY_SYMBOL
        } else {
            dlclose(handle)
            throw .noEntrySymbol(path: path)
        }
        // Only the two version fields are read before the major version is known to match.
        let versions = symbol.assumingMemoryBound(to: UInt32.self)
        guard versions[0] == PluginABI.major else {
            let (major, minor) = (versions[0], versions[1])
            dlclose(handle)
            throw .abiMismatch(path: path, pluginMajor: major, pluginMinor: minor)
        }
        let declaredSize = Int(symbol.load(fromByteOffset: MemoryLayout<adorch_plugin_entry_t>.offset(of: \.struct_size)!, as: UInt32.self))
        let copy = UnsafeMutablePointer<adorch_plugin_entry_t>.allocate(capacity: 1)
        UnsafeMutableRawPointer(copy).initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<adorch_plugin_entry_t>.size)
        UnsafeMutableRawPointer(copy).copyMemory(from: symbol, byteCount: min(declaredSize, MemoryLayout<adorch_plugin_entry_t>.size))
        if let problem = Self.problem(with: copy.pointee) {
            copy.deallocate()
            dlclose(handle)
            throw .malformedEntry(path: path, reason: problem)
        }
        let heldFrom = Self.held.withLock { held -> String? in
            let key = Int(bitPattern: handle)
            if let other = held[key] { return other }
            held[key] = path
            return nil
        }
        if let heldFrom {
            copy.deallocate()
            dlclose(handle)  // only this open's reference: the holder's keeps it mapped
            throw .alreadyHeld(path: path, heldFrom: heldFrom)
        }
        let entry = UnsafePointer(copy)
        self.path = path
        self.handle = handle
        self.entry = entry
    }

    // The library itself stays mapped: a plugin thread that outlived deinit must not jump
    // into unmapped code. Its globals are free for the next PluginLibrary of the file.
    deinit {
        entry.deallocate()
        _ = Self.held.withLock { $0.removeValue(forKey: Int(bitPattern: handle)) }
    }

    /// What the entry says of the plugin, under the name the host gives it.
    public func info(name: String) -> PluginInfo {
        let e = entry.pointee
        return PluginInfo(
            name: name, path: path, declaredName: String(cString: e.name), version: String(cString: e.version),
            description: e.description.map { String(cString: $0) } ?? "",
            abiMajor: e.abi_major, abiMinor: e.abi_minor,
            formats: (0..<UInt32(32)).compactMap { bit in e.formats & 1 << bit != 0 ? adorch_format(abiValue: bit) : nil }
                .filter { PluginABI.minor(introducing: $0) <= e.abi_minor }.map(AdFormat.init(abi:))
        )
    }

    /// Whether the plugin was built against a minor version that has this event.
    public func knows(event: adorch_event) -> Bool { PluginABI.minor(introducing: event) <= entry.pointee.abi_minor }

    /// The entry's flags (ABI 1.2): 0 for an entry whose struct_size stops before them, as
    /// plugin.h's ADORCH_STRUCT_HAS would say.
    public var flags: UInt32 {
        let end = MemoryLayout<adorch_plugin_entry_t>.offset(of: \.flags)! + MemoryLayout<UInt32>.size
        return Int(entry.pointee.struct_size) >= end ? entry.pointee.flags : 0
    }

    /// Whether the plugin declared ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD.
    public var showsOnAnyThread: Bool { flags & ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD != 0 }

    /// Formats the mask claims that this host does not know (a newer minor's): ignored.
    public var unknownFormatBits: UInt32 {
        entry.pointee.formats & ~(0..<UInt32(32)).reduce(UInt32(0)) { adorch_format(abiValue: $1) == nil ? $0 : $0 | 1 << $1 }
    }

    private static func problem(with e: adorch_plugin_entry_t) -> String? {
        // The host reads only the fields both sides know: an older minor's shorter entry is
        // fine down to 1.0's, a newer minor's longer one is read up to this host's.
        if e.struct_size < UInt32(MemoryLayout<adorch_plugin_entry_t>.offset(of: \.stats_json)!) {
            return "struct_size \(e.struct_size) is smaller than ABI 1.0's entry"
        }
        // Any sizeof is; the copy then never ends inside a pointer.
        if Int(e.struct_size) % MemoryLayout<adorch_plugin_entry_t>.alignment != 0 {
            return "struct_size \(e.struct_size) is not a multiple of the entry's alignment (\(MemoryLayout<adorch_plugin_entry_t>.alignment)), so not a sizeof"
        }
        guard let name = e.name else { return "name is NULL" }
        let declared = String(cString: name)
        if declared.isEmpty || !declared.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "_" || $0 == "-" }) || !declared.allSatisfy(\.isASCII) {
            return "name '\(declared)' is not [a-z0-9_-]+"
        }
        if e.version == nil { return "version is NULL" }
        // They go into log lines as they are: a newline there would make a line of its own.
        for (field, text) in [("version", e.version), ("description", e.description)] {
            if let text, String(cString: text).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                return "\(field) holds a control character"
            }
        }
        let missing = [
            ("init", e.`init` == nil), ("deinit", e.deinit == nil), ("ad_create", e.ad_create == nil),
            ("ad_load", e.ad_load == nil), ("ad_show", e.ad_show == nil), ("ad_notify", e.ad_notify == nil),
            ("ad_destroy", e.ad_destroy == nil),
        ].filter(\.1).map(\.0)
        return missing.isEmpty ? nil : "required functions are NULL: \(missing.joined(separator: ", "))"
    }
}
