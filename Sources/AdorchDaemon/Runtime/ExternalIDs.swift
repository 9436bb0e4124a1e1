import AdorchEngine
import Foundation

/// The ids apps and operators see: `<bootTag>-<n>`, so an id from an earlier run of the
/// daemon is never mistaken for one of this run's.
struct ExternalIDs: Sendable {
    let bootTag = String(UInt32.random(in: 0x1000_0000...UInt32.max), radix: 16)

    func external(_ id: AdID) -> String { "\(bootTag)-\(id)" }

    /// The engine's id, or nil for an id of another run or not an id at all.
    func `internal`(_ external: String) -> AdID? {
        let parts = external.split(separator: "-")
        guard parts.count == 2, parts[0] == bootTag else { return nil }
        return AdID(parts[1])
    }
}
