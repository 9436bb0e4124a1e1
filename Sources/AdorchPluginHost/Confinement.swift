import Foundation

// PLACEHOLDER until the sandbox branch merges: only RLIMIT_AS.
public struct Confinement: Sendable, Equatable {
    public var hiddenPaths: [String]
    public var addressSpaceBytes: UInt64?
    public init(hiddenPaths: [String], addressSpaceBytes: UInt64?) {
        self.hiddenPaths = hiddenPaths
        self.addressSpaceBytes = addressSpaceBytes
    }
    public var arguments: [String] {
        hiddenPaths.flatMap { ["--hide", $0] } + (addressSpaceBytes.map { ["--address-space-mb", String($0 >> 20)] } ?? [])
    }
    public func apply() -> String {
        if let addressSpaceBytes {
            var limit = rlimit(rlim_cur: rlim_t(addressSpaceBytes), rlim_max: rlim_t(addressSpaceBytes))
            setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        }
        return "placeholder"
    }
}
