import AdorchEngine
import AdorchPluginHost
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
            check failed, 64 (EX_USAGE) if the arguments are wrong.

            --isolation process (the default, as in adorchd): the checks run in a child process \
            of their own, confined as adorchd confines a plugin's host, with --address-space-mb \
            as its address-space limit. A plugin that crashes it fails the check that was \
            running, naming the signal (FAIL  CHECK: the plugin crashed its host (SIGSEGV)); \
            one that stops answering (nothing for its request deadline and \
            \(IsolatedRun.stallMargin.components.seconds) s more) is killed and fails it the same \
            way; the summary and exit status follow as for any failure. \
            --isolation in-process: the plugin is loaded into the validator itself, as adorchd \
            does with isolation = "in-process"; a crash ends the validator, after a line naming \
            the check that was running and the signal.

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

    @Option(help: "Where the plugin runs: in a confined child (\(PluginIsolation.process.rawValue); the default, as in adorchd, so that a crash is a failed check, not the validator's end) or in the validator (\(PluginIsolation.inProcess.rawValue)).")
    var isolation = PluginIsolation.default

    @Option(help: "With --isolation process, the confined child's address-space limit (RLIMIT_AS) in MiB; 0: none.")
    var addressSpaceMb = Confinement.defaultAddressSpaceMB

    /// Set by the parent of an isolated run: this process is its confined child.
    @Flag(name: .customLong(IsolatedRun.childFlag), help: .private)
    var confinedChild = false

    /// The confined child's confinement, as Confinement.arguments gives it.
    @Argument(parsing: .postTerminator, help: .private)
    var confinement: [String] = []

    mutating func validate() throws {
        for format in formats where AdFormat(rawValue: format) == nil {
            throw ValidationError("unknown format '\(format)'; the formats are \(AdFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard (try? JSONSerialization.jsonObject(with: Data(config.utf8))) as? [String: Any] != nil else {
            throw ValidationError("--config must be a JSON object, got: \(config)")
        }
        guard iterations >= 0, callBoundMs > 0, timeoutMs > 0 else { throw ValidationError("--iterations, --call-bound-ms and --timeout-ms must be positive") }
        guard FileManager.default.fileExists(atPath: plugin) else { throw ValidationError("no such file: \(plugin)") }
        guard (addressSpaceMb << 20) >> 20 == addressSpaceMb else { throw ValidationError("--address-space-mb \(addressSpaceMb) is more than any address space") }
    }

    func run() throws {
        // dlopen resolves a bare name through the library path, not the current folder.
        let path = plugin.contains("/") ? plugin : "./\(plugin)"
        if confinedChild { return try runConfined(path) }
        let json = json
        let report: (CheckResult) -> Void = { result in
            guard !json else { return }
            // Unbuffered, so that a crash's line follows the last check that ended.
            FileHandle.standardOutput.write(Data((result.line + "\n").utf8))
        }
        let results: [CheckResult]
        switch isolation {
        case .inProcess:
            CrashNote.install()
            results = Validator(path: path, options: options, report: report).run()
        case .process:
            results = try IsolatedRun(checkArguments: checkArguments(path), confinement: IsolatedRun.confinement(addressSpaceMB: addressSpaceMb), options: options).run(report: report)
        }
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

    var options: ValidatorOptions {
        var options = ValidatorOptions()
        options.configJSON = config
        options.formats = formats.compactMap(AdFormat.init(rawValue:))
        options.iterations = iterations
        options.serverParameter = serverParameter
        options.callBound = .milliseconds(callBoundMs)
        options.timeout = .milliseconds(timeoutMs)
        return options
    }

    /// What the confined child is given to run the same checks: name=value, so that no value
    /// is taken for an option (an empty value is refused that way: the default is empty).
    func checkArguments(_ path: String) -> [String] {
        [path, "--config=\(config)", "--iterations=\(iterations)", "--call-bound-ms=\(callBoundMs)", "--timeout-ms=\(timeoutMs)"]
            + (serverParameter.isEmpty ? [] : ["--server-parameter=\(serverParameter)"]) + formats.map { "--format=\($0)" }
    }

    /// The confined child: confines itself before the plugin is loaded, runs the checks and
    /// tells the parent everything on its channel; the parent prints.
    func runConfined(_ path: String) throws {
        let applied = try Confinement(arguments: confinement).apply()
        FileHandle.standardError.write(Data("adorch-plugin-validate: the checks run confined: \(applied)\n".utf8))
        let channel = ChildChannel()
        _ = Validator(path: path, options: options, watcher: channel.watcher, report: channel.report).run()
        channel.finished()
    }
}

extension PluginIsolation: ExpressibleByArgument {}

struct ValidationReport: Encodable {
    var plugin: String
    var passed: Bool
    var checks: [CheckResult]
}
