import AdorchDaemon
import AdorchFuzzSupport
import Foundation

/// A config file and its drop-ins: the input is split at lines `#---`; the first part is
/// the main file, the rest drop-ins merged over it in order.
func fuzzConfig(_ data: Data) {
    let parts = String(decoding: data, as: UTF8.self).components(separatedBy: "\n#---\n")
    let dropIns = parts.dropFirst().enumerated().map { (source: "fuzz.toml.d/\($0.offset).toml", text: $0.element) }
    _ = try? DaemonConfig.parse(toml: parts[0], source: "fuzz.toml", dropIns: Array(dropIns), mergedSource: "fuzz.toml (with drop-ins)")
}

@main enum Main { static func main() { FuzzTarget.main(fuzzConfig) } }
