import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import CAdorchPlugin
import Foundation

/// Loads a plugin the way adorchd does and holds it to plugin.h's contract, one check at a time.
public final class Validator {
    let path: String
    let options: ValidatorOptions
    let report: (CheckResult) -> Void
    let watcher: RunWatcher
    var results: [CheckResult] = []
    var plugin: PluginUnderTest!
    /// The slowest completion seen: how long a load may still call back after a destroy.
    var slowestCompletion: Duration = .zero

    /// `report` hears each result as soon as its check ends; `watcher`, each check as it
    /// starts and that calls into the plugin return.
    public init(path: String, options: ValidatorOptions, watcher: RunWatcher = .crashNote, report: @escaping (CheckResult) -> Void = { _ in }) {
        self.path = path
        self.options = options
        self.watcher = watcher
        self.report = report
    }

    /// Runs every check; the results, in order.
    public func run() -> [CheckResult] {
        guard entryAndInit() else { return results }
        let claimed = plugin.library.info(name: "validated").formats
        let formats = options.formats.isEmpty ? claimed : options.formats
        for format in formats {
            guard claimed.contains(format) else {
                add("\(format.rawValue)", .fail, "asked for with --format, but the plugin does not claim it")
                continue
            }
            formatChecks(format)
        }
        if let format = formats.first(where: claimed.contains) {
            anyThreadShow(format)
            deadlineMargin(format)
            resources(format)
        }
        if let format = formats.first(where: { claimed.contains($0) && $0 != .interactive }) { selfTrackedImpressions(format) }
        plugin.deinitialize()
        Thread.sleep(forTimeInterval: seconds(options.grace))
        if claimed.contains(.rewarded), options.formats.isEmpty || options.formats.contains(.rewarded) { transIDAcrossRestart() }
        callbackRules()
        callTimes()
        return results
    }

    // MARK: Entry, init, deinit

    func entryAndInit() -> Bool {
        setCheck("entry")
        let library: PluginLibrary
        do {
            library = try PluginLibrary(path: path)
        } catch {
            add("entry", .fail, error.description)
            return false
        }
        plugin = PluginUnderTest(library: library, bound: options.callBound, returned: watcher.progressed)
        let info = library.info(name: "validated")
        let e = library.entry.pointee
        var notes: [String] = []
        if e.abi_minor > PluginABI.minor {
            notes.append("built for a newer minor than this validator's \(PluginABI.major).\(PluginABI.minor): only \(PluginABI.major).\(PluginABI.minor)'s contract is checked")
        }
        if library.unknownFormatBits != 0 {
            let bits = (0..<32).filter { library.unknownFormatBits & (1 << $0) != 0 }.map(String.init).joined(separator: ", ")
            notes.append("format bit\(bits.contains(",") ? "s" : "") \(bits) unknown here and ignored")
        }
        if info.formats.isEmpty {
            add("entry", .fail, "\(info.declaredName) claims no format this host knows (formats = \(e.formats))")
            return false
        }
        add("entry", .pass, "\(info.declaredName) \(info.version), ABI \(info.abiMajor).\(info.abiMinor), formats \(info.formats.map(\.rawValue).joined(separator: "/")), via \(library.entrySymbol)" + notes.map { "; \($0)" }.joined())

        setCheck("init")
        let code = plugin.initialize(configJSON: options.configJSON)
        guard code == 0 else {
            add("init", .fail, "init returned \(code) for config \(options.configJSON)\(lastLog)")
            return false
        }
        add("init", .pass, "returned 0")

        setCheck("deinit, then init again")
        plugin.deinitialize()
        Thread.sleep(forTimeInterval: seconds(options.grace))
        let again = plugin.initialize(configJSON: options.configJSON)
        let afterDeinit = plugin.ledger.violationCounts(check: "deinit, then init again")[.reportedAfterDeinit] ?? 0
        if again != 0 {
            add("deinit, then init again", .fail, "init after deinit returned \(again)\(lastLog)")
            return false
        }
        add("deinit, then init again", afterDeinit == 0 ? .pass : .fail,
            afterDeinit == 0 ? "init returned 0 again" : "\(afterDeinit) callbacks after deinit returned")

        setCheck("stats_json")
        if let stats = plugin.stats() {
            let isObject = (try? JSONSerialization.jsonObject(with: Data(stats.utf8))) as? [String: Any] != nil
            add("stats_json", isObject ? .pass : .fail, isObject ? "a JSON object" : "not a JSON object: \(stats.prefix(120))")
        } else {
            add("stats_json", .skip, "the plugin has no stats_json (it is optional)")
        }
        return true
    }

    // MARK: Over the whole run

    func callbackRules() {
        let counts = plugin.ledger.violationCounts()
        for rule in Rule.allCases {
            let count = counts[rule] ?? 0
            add("callbacks: \(rule.rawValue)", count == 0 ? .pass : .fail,
                count == 0 ? "no violation" : "\(count) violation\(count == 1 ? "" : "s"), the first: \(plugin.ledger.firstViolation(rule) ?? "?")")
        }
    }

    func callTimes() {
        let (slowest, over) = plugin.timings
        let list = slowest.sorted { $0.key < $1.key }.map { "\($0.key) \(ms($0.value))" }.joined(separator: ", ")
        let check = "time: no call blocks longer than \(ms(options.callBound))"
        // One call over the bound can be the scheduler's doing on a busy host, as for the
        // daemon's any-thread shows (AnyThreadShowRecord): a function fails with that many
        // calls over it, or with one over ten times it. A plugin that blocks does so again.
        let failing = Dictionary(grouping: over, by: \.function).filter { _, calls in
            calls.count >= AnyThreadShowRecord.strikes || calls.contains { $0.took > options.callBound * 10 }
        }
        if failing.isEmpty {
            let spared = over.isEmpty ? "" : "; \(over.count) call\(over.count == 1 ? "" : "s") over the bound, too few to be the plugin's (a busy host)"
            return add(check, .pass, "slowest: \(list)\(spared)")
        }
        let worst = failing.map { function, calls in
            "\(function) \(calls.count) time\(calls.count == 1 ? "" : "s") (up to \(ms(calls.map(\.took).max()!)))"
        }.sorted()
        add(check, .fail, "over the bound: \(worst.joined(separator: ", ")); slow work belongs on the plugin's own threads")
    }

    // MARK: Helpers

    func request(_ format: AdFormat) -> Request {
        var request = Request(format: format, serverParameter: options.serverParameter, timeout: options.timeout)
        switch format {
        case .banner: (request.order.width, request.order.height) = (320, 50)
        case .native: request.order.variant = "feed"
        case .interactive:
            request.order.interactive = InteractiveRequest(creativeURL: "https://validator.invalid/creative.js", adParametersJSON: "{}", slotType: .preroll)
        default: break
        }
        return request
    }

    func create(_ request: Request, check: String, problems: inout [String]) -> (id: UInt64, object: UnsafeMutableRawPointer)? {
        let ad = plugin.create(request, check: check)
        guard let object = ad.object else {
            problems.append("ad_create returned NULL")
            return nil
        }
        return (ad.id, object)
    }

    /// ad_load, then waits for its completion up to the deadline; the record and how long it took.
    func loadAndWait(_ ad: (id: UInt64, object: UnsafeMutableRawPointer), _ request: Request) -> (AdRecord?, Duration) {
        let started = ContinuousClock.now
        _ = plugin.load(ad.id, ad.object)
        let record = plugin.ledger.waitForCompletion(ad.id, until: Date() + seconds(request.timeout))
        return (record, ContinuousClock.now - started)
    }

    func violations(_ check: String, _ rules: [Rule]) -> [String] {
        let counts = plugin.ledger.violationCounts(check: check)
        return rules.compactMap { rule in counts[rule].map { "\($0) × \(rule.rawValue)" } }
    }

    /// The first problems and how many more: one line stays readable.
    func summary(_ problems: [String]) -> String {
        problems.count <= 3 ? problems.joined(separator: "; ") : problems.prefix(3).joined(separator: "; ") + "; and \(problems.count - 3) more"
    }

    var lastLog: String { plugin.ledger.log.last.map { " (its log: \($0))" } ?? "" }

    func setCheck(_ name: String) {
        plugin?.ledger.setCheck(name)
        watcher.checkStarted(name)
    }

    func add(_ name: String, _ outcome: CheckResult.Outcome, _ detail: String) {
        let result = CheckResult(name: name, outcome: outcome, detail: detail)
        results.append(result)
        report(result)
    }
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
func ms(_ d: Duration) -> String { String(format: "%.0f ms", seconds(d) * 1000) }
