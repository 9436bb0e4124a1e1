import CAdorchSandbox
import Glibc

/// What a plugin host takes away from itself before it loads its plugin (docs/confinement.md):
/// the daemon builds one per plugin and hands it to the host's command line as `arguments`;
/// the host reads it back with `init(arguments:)` and calls `apply()` before `dlopen`.
public struct Confinement: Sendable, Equatable {
    /// Paths the confined process must not open (the state dir, the reward key file, the config file).
    /// Absolute: `init(arguments:)` refuses a relative one, which the host would resolve against its own working folder.
    public var hiddenPaths: [String]
    /// RLIMIT_AS in bytes; nil: no limit. `arguments` carries it in whole MiB, rounded up.
    public var addressSpaceBytes: UInt64?

    public init(hiddenPaths: [String], addressSpaceBytes: UInt64?) {
        self.hiddenPaths = hiddenPaths
        self.addressSpaceBytes = addressSpaceBytes
    }

    /// The options of `arguments`, for a host whose own command-line parser must know them.
    public static let hideOption = "--hide"
    public static let addressSpaceOption = "--address-space-mb"
    static let mebibyte: UInt64 = 1 << 20

    /// The command-line arguments that carry it to a child (`--hide P` ..., `--address-space-mb N`).
    public var arguments: [String] {
        let limit = addressSpaceBytes.map { bytes in
            [Self.addressSpaceOption, String(bytes / Self.mebibyte + (bytes % Self.mebibyte == 0 ? 0 : 1))]
        }
        return hiddenPaths.flatMap { [Self.hideOption, $0] } + (limit ?? [])
    }

    /// Reads `arguments` back. Every argument must be one of them: an unknown one is
    /// `ConfinementArgumentError.unknownArgument` (`split(_:)` leaves other arguments to the caller).
    public init(arguments: [String]) throws(ConfinementArgumentError) {
        let (confinement, rest) = try Self.split(arguments)
        if let unknown = rest.first { throw .unknownArgument(unknown) }
        self = confinement
    }

    /// Takes the confinement's options out of a longer command line: the confinement, and the
    /// other arguments in their order, for the caller to parse.
    public static func split(_ arguments: [String]) throws(ConfinementArgumentError) -> (confinement: Confinement, rest: [String]) {
        var confinement = Confinement(hiddenPaths: [], addressSpaceBytes: nil)
        var rest: [String] = []
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            switch argument {
            case hideOption:
                guard let path = remaining.popFirst() else { throw .missingValue(option: argument) }
                guard path.hasPrefix("/") else { throw .relativePath(path) }
                confinement.hiddenPaths.append(path)
            case addressSpaceOption:
                guard let value = remaining.popFirst() else { throw .missingValue(option: argument) }
                guard confinement.addressSpaceBytes == nil else { throw .repeatedOption(argument) }
                guard let mebibytes = UInt64(value), mebibytes > 0 else { throw .badAddressSpace(value) }
                let (bytes, overflow) = mebibytes.multipliedReportingOverflow(by: mebibyte)
                guard !overflow else { throw .badAddressSpace(value) }
                confinement.addressSpaceBytes = bytes
            default:
                rest.append(argument)
            }
        }
        return (confinement, rest)
    }

    /// The report's room: a line per layer and a few notes fit many times over.
    private static let reportBytes = 8192

    /// Applies it to the calling process, irreversibly (call it before dlopen of the plugin, and
    /// before the process starts threads: Landlock confines only the threads started after it);
    /// what was applied and what the kernel refused, in words, for the log. `boxed`: the
    /// process runs in a box of its own (`ChildSpawn.spawnBoxed`), whose tasks are then bounded
    /// by `boxTasks`; outside one, the filter keeps it from naming other processes by pid.
    public func apply(boxed: Bool = false) -> ConfinementReport {
        let paths = hiddenPaths.map { path in
            let bytes = path.utf8CString
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
            copy.initialize(from: Array(bytes), count: bytes.count)
            return copy
        }
        defer { paths.forEach { $0.deallocate() } }
        var report = [CChar](repeating: 0, count: Self.reportBytes)
        let applied = adorch_sandbox_apply(paths.map { UnsafePointer<CChar>?($0) }, paths.count, addressSpaceBytes ?? 0,
                                           boxed ? Self.boxTasks : 0, &report, report.count)
        let text = String(decoding: report.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return ConfinementReport(applied: ConfinementReport.Layers(rawValue: applied),
                                 lines: text.split(separator: "\n").map(String.init))
    }
}

/// What `Confinement.apply()` did, layer by layer.
public struct ConfinementReport: Sendable, Equatable, CustomStringConvertible {
    public struct Layers: OptionSet, Sendable, Hashable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        public static let noNewPrivileges = Layers(rawValue: UInt32(ADORCH_SANDBOX_NO_NEW_PRIVS))
        public static let resourceLimits = Layers(rawValue: UInt32(ADORCH_SANDBOX_RLIMITS))
        public static let landlock = Layers(rawValue: UInt32(ADORCH_SANDBOX_LANDLOCK))
        public static let seccomp = Layers(rawValue: UInt32(ADORCH_SANDBOX_SECCOMP))
        public static let all: Layers = [.noNewPrivileges, .resourceLimits, .landlock, .seccomp]
    }

    /// The layers that applied in full.
    public var applied: Layers
    /// The layers the kernel refused or that applied only in part (the lines say which and why).
    public var refused: Layers { Layers.all.subtracting(applied) }
    /// One line per layer: what applied, what was refused and why.
    public var lines: [String]

    public init(applied: Layers, lines: [String]) {
        self.applied = applied
        self.lines = lines
    }

    public var description: String { lines.joined(separator: "; ") }
}

/// Why a host's confinement arguments were refused; each reads as one line.
public enum ConfinementArgumentError: Error, Equatable, CustomStringConvertible {
    case missingValue(option: String)
    case relativePath(String)
    case badAddressSpace(String)
    case repeatedOption(String)
    case unknownArgument(String)

    public var description: String {
        switch self {
        case .missingValue(let option): "confinement: \(option) needs a value"
        case .relativePath(let path): "confinement: hidden path \(path) is not absolute"
        case .badAddressSpace(let value):
            "confinement: \(Confinement.addressSpaceOption) \(value) is not a whole number of MiB from 1 to \(UInt64.max / Confinement.mebibyte)"
        case .repeatedOption(let option): "confinement: \(option) is given twice"
        case .unknownArgument(let argument): "confinement: unknown argument \(argument)"
        }
    }
}
