import Foundation

// PLACEHOLDER for the sandbox branch's Confinement.swift (issue 22, "Confinement"): the same
// API, so that the validator builds against it; apply() sets only RLIMIT_AS. The integrator
// replaces this file with the real one at merge.

/// What a confined process gets and what it cannot do.
public struct Confinement: Sendable, Equatable {
    /// Paths the confined process must not open (the state dir, the reward key file, the config file).
    public var hiddenPaths: [String]
    /// RLIMIT_AS in bytes; nil: no limit.
    public var addressSpaceBytes: UInt64?

    public init(hiddenPaths: [String], addressSpaceBytes: UInt64?) {
        self.hiddenPaths = hiddenPaths
        self.addressSpaceBytes = addressSpaceBytes
    }

    /// An argument `init(arguments:)` does not take.
    public struct ArgumentError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The command-line arguments that carry it to a child (`--hide P` ..., `--address-space-mb N`).
    public var arguments: [String] {
        hiddenPaths.flatMap { ["--hide", $0] } + (addressSpaceBytes.map { ["--address-space-mb", String($0 >> 20)] } ?? [])
    }

    /// Parses `arguments`; throws on anything else.
    public init(arguments: [String]) throws {
        var hidden: [String] = [], bytes: UInt64?
        var rest = arguments[...]
        while let name = rest.popFirst() {
            guard let value = rest.popFirst() else { throw ArgumentError(description: "\(name) needs a value") }
            switch name {
            case "--hide": hidden.append(value)
            case "--address-space-mb":
                guard let mb = UInt64(value) else { throw ArgumentError(description: "--address-space-mb: not a number: \(value)") }
                bytes = mb << 20
            default: throw ArgumentError(description: "unknown confinement argument \(name)")
            }
        }
        self.init(hiddenPaths: hidden, addressSpaceBytes: bytes)
    }

    /// Applies it to the calling process, irreversibly.
    public func apply() -> ConfinementReport {
        guard let bytes = addressSpaceBytes else { return ConfinementReport(text: "placeholder: no address-space limit") }
        var limit = rlimit(rlim_cur: rlim_t(bytes), rlim_max: rlim_t(bytes))
        let ok = setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit) == 0
        return ConfinementReport(text: "placeholder: RLIMIT_AS \(bytes >> 20) MB " + (ok ? "applied" : "refused (\(String(cString: strerror(errno))))"))
    }
}

/// What apply() did, in words.
public struct ConfinementReport: Sendable, CustomStringConvertible {
    public var text: String
    public var description: String { text }
}
