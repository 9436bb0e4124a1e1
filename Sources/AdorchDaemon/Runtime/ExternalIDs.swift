import AdorchEngine
import AdorchLocking
import Foundation

/// The ids apps and operators see: `<bootTag>-<n>`, so an id from an earlier run of the
/// daemon is never mistaken for one of this run's; except the ids of rewarded ads an earlier
/// run showed whose reward is still promised, which keep the name their app was given.
final class ExternalIDs: Sendable {
    let bootTag = String(UInt32.random(in: 0x1000_0000...UInt32.max), radix: 16)
    /// Promised ads of earlier runs: their names, and this run's ids of them. Adopted at start only.
    private let adopted = LockedValue<(names: [AdID: String], ids: [String: AdID])>(([:], [:]))

    func external(_ id: AdID) -> String {
        adopted.withLock { $0.names[id] } ?? "\(bootTag)-\(id)"
    }

    /// The engine's id, or nil for an id of another run (unless adopted) or not an id at all.
    func `internal`(_ external: String) -> AdID? {
        let parts = external.split(separator: "-")
        guard parts.count == 2 else { return nil }
        guard parts[0] == bootTag else { return adopted.withLock { $0.ids[external] } }
        return AdID(parts[1])
    }

    /// An earlier run's ad, known from now on as `id` in this run, under its old name.
    func adopt(_ name: String, as id: AdID) {
        adopted.withLock {
            $0.names[id] = name
            $0.ids[name] = id
        }
    }
}
