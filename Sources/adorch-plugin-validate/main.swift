import AdorchEngine
import AdorchPluginValidator
import ArgumentParser
import Foundation

@main
struct AdorchPluginValidate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adorch-plugin-validate",
        abstract: "Load an adorch plugin the way adorchd does and check that it keeps plugin.h's contract.",
        discussion: """
            Prints one line per check (PASS, FAIL or SKIP with the reason) and exits 1 if any \
            check failed, 64 (EX_USAGE) if the arguments are wrong. A plugin that crashes the \
            validator is named with the check that was running and the signal.

            Examples:
              adorch-plugin-validate .build/debug/libadorch-plugin-sim.so
              adorch-plugin-validate ./libmynet.so --config '{"api_key":"test"}' --format rewarded
              adorch-plugin-validate ./libadorch-plugin-sim.so --server-parameter 'latency_ms=0' --json
            """
    )

    @Argument(help: "The plugin's shared object (.so).")
    var plugin: String

    @Option(help: "The plugin's config, the JSON object init receives (as a [plugins.NAME] config would give it).")
    var config = "{}"

    @Option(name: .customLong("format"), help: "Check only this format (repeatable): \(AdFormat.allCases.map(\.rawValue).joined(separator: ", ")). Default: every format the plugin claims.")
    var formats: [String] = []

    @Option(help: "Load → show → destroy cycles of the resource check.")
    var iterations = 10_000

    @Option(help: "The waterfall entry's server_parameter every request carries.")
    var serverParameter = ""

    @Option(help: "No call into the plugin may take longer, in ms.")
    var callBoundMs = 50

    @Option(help: "Each request's deadline (timeout_ms), in ms.")
    var timeoutMs = 2000

    @Flag(help: "Print the results as one JSON document instead of lines.")
    var json = false

    mutating func validate() throws {
        for format in formats where AdFormat(rawValue: format) == nil {
            throw ValidationError("unknown format '\(format)'; the formats are \(AdFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard (try? JSONSerialization.jsonObject(with: Data(config.utf8))) as? [String: Any] != nil else {
            throw ValidationError("--config must be a JSON object, got: \(config)")
        }
        guard iterations >= 0, callBoundMs > 0, timeoutMs > 0 else { throw ValidationError("--iterations, --call-bound-ms and --timeout-ms must be positive") }
        guard FileManager.default.fileExists(atPath: plugin) else { throw ValidationError("no such file: \(plugin)") }
    }

    func run() throws {
        CrashNote.install()
        var options = ValidatorOptions()
        options.configJSON = config
        options.formats = formats.compactMap(AdFormat.init(rawValue:))
        options.iterations = iterations
        options.serverParameter = serverParameter
        options.callBound = .milliseconds(callBoundMs)
        options.timeout = .milliseconds(timeoutMs)
        // dlopen resolves a bare name through the library path, not the current folder.
        let path = plugin.contains("/") ? plugin : "./\(plugin)"
        let json = json
        let results = Validator(path: path, options: options) { result in
            guard !json else { return }
            // Unbuffered, so that a crash's line follows the last check that ended.
            FileHandle.standardOutput.write(Data((result.line + "\n").utf8))
        }.run()
        let failed = results.filter { $0.outcome == .fail }.count
        let skipped = results.filter { $0.outcome == .skip }.count
        if json {
            let document = ValidationReport(plugin: plugin, passed: failed == 0, checks: results)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(document), as: UTF8.self))
        } else {
            print("\(results.count) checks: \(results.count - failed - skipped) passed, \(failed) failed, \(skipped) skipped")
        }
        if failed > 0 { throw ExitCode(1) }
    }
}

struct ValidationReport: Encodable {
    var plugin: String
    var passed: Bool
    var checks: [CheckResult]
}
