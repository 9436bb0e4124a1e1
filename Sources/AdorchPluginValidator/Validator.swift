import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import CAdorchPlugin
import Foundation

/// One line of the validator's report.
public struct CheckResult: Sendable, Codable, Equatable {
    public enum Outcome: String, Sendable, Codable { case pass, fail, skip }
    public var name: String
    public var outcome: Outcome
    public var detail: String

    public var line: String { "\(outcome.rawValue.uppercased().padding(toLength: 5, withPad: " ", startingAt: 0)) \(name): \(detail)" }
}

/// What to run the plugin with.
public struct ValidatorOptions: Sendable {
    public var configJSON = "{}"
    /// Only these formats (all the plugin claims when empty).
    public var formats: [AdFormat] = []
    public var serverParameter = ""
    /// Load → show → destroy cycles of the resource check.
    public var iterations = 10_000
    /// No call into the plugin may take longer (plugin.h: [plugin queue] calls return quickly).
    public var callBound: Duration = .milliseconds(50)
    /// Each request's deadline.
    public var timeout: Duration = .seconds(2)
    /// How long to keep listening after a destroy or deinit for a report that must not come.
    public var grace: Duration = .milliseconds(200)
    public var threads = 4
    /// Memory (RSS, or the heap in use under a sanitizer) may grow this much over the
    /// measured cycles, after a warm-up.
    public var memorySlack = 4 << 20

    public init() {}
}

/// Loads a plugin the way adorchd does and holds it to plugin.h's contract, one check at a time.
public final class Validator {
    private let path: String
    private let options: ValidatorOptions
    private let report: (CheckResult) -> Void
    private var results: [CheckResult] = []
    private var plugin: PluginUnderTest!
    /// The slowest completion seen: how long a load may still call back after a destroy.
    private var slowestCompletion: Duration = .zero

    /// `report` hears each result as soon as its check ends.
    public init(path: String, options: ValidatorOptions, report: @escaping (CheckResult) -> Void = { _ in }) {
        self.path = path
        self.options = options
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
        if let format = formats.first(where: claimed.contains) { resources(format) }
        plugin.deinitialize()
        Thread.sleep(forTimeInterval: seconds(options.grace))
        callbackRules()
        callTimes()
        return results
    }

    // MARK: Entry, init, deinit

    private func entryAndInit() -> Bool {
        setCheck("entry")
        let library: PluginLibrary
        do {
            library = try PluginLibrary(path: path)
        } catch {
            add("entry", .fail, error.description)
            return false
        }
        plugin = PluginUnderTest(library: library, bound: options.callBound)
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

    // MARK: Per format

    private func formatChecks(_ format: AdFormat) {
        let f = format.rawValue
        let request = self.request(format)
        let interactive = format == .interactive

        // create → load → exactly one completion within the deadline.
        var check = "\(f): load completes exactly once"
        setCheck(check)
        var loaded: (id: UInt64, object: UnsafeMutableRawPointer)?
        var payload: String?
        var outcomes: [String] = []
        var problems: [String] = []
        for _ in 0..<8 {
            guard let ad = create(request, check: check, problems: &problems) else { break }
            let (record, took) = loadAndWait(ad, request)
            guard let record else { problems.append("ad \(ad.id): no record"); break }
            if record.loadRefused {
                outcomes.append("refused")
            } else if record.completions.isEmpty {
                problems.append("ad \(ad.id): no loaded or failed within its \(ms(request.timeout)) deadline")
                // Each costs a whole deadline; three make the point.
                if problems.count >= 3 { plugin.destroy(ad.id, ad.object); break }
            } else {
                outcomes.append(record.completions[0].summary)
                if case .loaded(let text) = record.completions[0] {
                    payload = payload ?? text
                    if loaded == nil { loaded = (ad.id, ad.object); slowestCompletion = max(slowestCompletion, took); continue }
                }
                slowestCompletion = max(slowestCompletion, took)
            }
            plugin.destroy(ad.id, ad.object)
            if loaded != nil && outcomes.count >= 3 { break }
        }
        Thread.sleep(forTimeInterval: seconds(options.grace))
        problems += violations(check, Rule.allCases)
        let tally = Dictionary(grouping: outcomes, by: { $0 }).map { "\($0.value.count) \($0.key)" }.sorted().joined(separator: ", ")
        add(check, problems.isEmpty && !outcomes.isEmpty ? .pass : .fail,
            problems.isEmpty ? "\(tally); slowest \(ms(slowestCompletion))" : summary(problems))

        // The payload.
        check = "\(f): payload"
        if let payload {
            let problem = PayloadRules.problem(payload, format: format, count: 1)
            add(check, problem == nil ? .pass : .fail, problem ?? (format == .native ? "a JSON object with the canonical native assets" : "a JSON object"))
        } else {
            add(check, .skip, "no load filled (\(outcomes.isEmpty ? "none completed" : tally))")
        }
        if format == .native { nativeBatch(request) }

        // create → destroy without a load: nothing may follow.
        check = "\(f): create, destroy without load"
        setCheck(check)
        problems = []
        if let ad = create(request, check: check, problems: &problems) { plugin.destroy(ad.id, ad.object) }
        Thread.sleep(forTimeInterval: seconds(options.grace))
        problems += violations(check, Rule.allCases)
        add(check, problems.isEmpty ? .pass : .fail, problems.isEmpty ? "nothing reported" : summary(problems))

        // destroy while the load runs: nothing may follow the destroy.
        check = "\(f): destroy during a load"
        setCheck(check)
        problems = []
        for _ in 0..<3 {
            guard let ad = create(request, check: check, problems: &problems) else { break }
            _ = plugin.load(ad.id, ad.object)
            plugin.destroy(ad.id, ad.object)
        }
        Thread.sleep(forTimeInterval: seconds(slowestCompletion + options.grace))
        problems += violations(check, Rule.allCases)
        add(check, problems.isEmpty ? .pass : .fail,
            problems.isEmpty ? "3 loads destroyed at once; nothing reported in the \(ms(slowestCompletion + options.grace)) after" : summary(problems))

        concurrentLoads(format, request)

        // show on a loaded object.
        check = "\(f): show a loaded ad"
        setCheck(check)
        if let loaded {
            let code = plugin.show(loaded.object)
            add(check, code == 0 ? .pass : .fail, code == 0 ? "ad_show returned 0" : "ad_show on a loaded ad returned \(code)\(lastLog)")
            // ad_notify with every event the host sends.
            check = "\(f): ad_notify with every event"
            setCheck(check)
            // The events the host sends, as far as the plugin's minor version has them.
            let events = (interactive ? [SessionControl.pause, .resume, .pause, .resume].map(\.abi)
                : [ViewerEvent.impression, .click, .start, .firstQuartile, .midpoint, .thirdQuartile, .complete, .skip, .close].map(\.abi))
                .filter(plugin.library.knows(event:))
            for (i, event) in events.enumerated() { plugin.notify(loaded.object, event.rawValue, detail: i % 2 == 0 ? nil : "{}") }
            plugin.notify(loaded.object, 1000, detail: nil)  // from a newer host: must be ignored
            Thread.sleep(forTimeInterval: seconds(options.grace))
            plugin.destroy(loaded.id, loaded.object)
            Thread.sleep(forTimeInterval: seconds(options.grace))
            problems = violations(check, Rule.allCases)
            add(check, problems.isEmpty ? .pass : .fail,
                problems.isEmpty ? "events \(events.map { String($0.rawValue) }.joined(separator: ",")) and an unknown 1000 taken in stride" : summary(problems))
        } else {
            add(check, .skip, "no load filled")
            add("\(f): ad_notify with every event", .skip, "no load filled")
        }

        // show on an unloaded object must fail cleanly.
        check = "\(f): show an unloaded ad"
        setCheck(check)
        if interactive {
            add(check, .skip, "the host starts a session only once its fetch completed")
        } else {
            problems = []
            if let ad = create(request, check: check, problems: &problems) {
                let code = plugin.show(ad.object)
                plugin.destroy(ad.id, ad.object)
                if code == 0 { problems.append("ad_show on an ad never loaded returned 0 (it must return ADORCH_ERROR_NOT_READY)") }
            }
            Thread.sleep(forTimeInterval: seconds(options.grace))
            problems += violations(check, Rule.allCases)
            add(check, problems.isEmpty ? .pass : .fail, problems.isEmpty ? "ad_show returned an error, nothing reported" : summary(problems))
        }
    }

    /// Several native ads in one load: {"ads": [...]}, each with the canonical assets.
    private func nativeBatch(_ base: Request) {
        let check = "native: payload of 3 ads"
        setCheck(check)
        var request = base
        request.count = 3
        var problems: [String] = []
        for _ in 0..<5 {
            guard let ad = create(request, check: check, problems: &problems) else { break }
            let (record, _) = loadAndWait(ad, request)
            plugin.destroy(ad.id, ad.object)
            if case .loaded(let text)? = record?.completions.first {
                let problem = PayloadRules.problem(text, format: .native, count: 3)
                return add(check, problem == nil ? .pass : .fail, problem ?? "{\"ads\": [...]} with the canonical assets")
            }
        }
        add(check, problems.isEmpty ? .skip : .fail, problems.isEmpty ? "no load of 3 filled" : summary(problems))
    }

    /// Many objects loading at once, created and loaded from several threads, one call at a time.
    private func concurrentLoads(_ format: AdFormat, _ request: Request) {
        let check = "\(format.rawValue): loads from \(options.threads) threads"
        setCheck(check)
        let perThread = 25
        let made = LockedValue<[(id: UInt64, object: UInt)]>([])
        let group = DispatchGroup()
        for _ in 0..<options.threads {
            group.enter()
            Thread.detachNewThread { [plugin] in
                for _ in 0..<perThread {
                    let ad = plugin!.create(request, check: check)
                    if let object = ad.object { _ = plugin!.load(ad.id, object) }
                    made.withLock { $0.append((ad.id, UInt(bitPattern: ad.object))) }
                }
                group.leave()
            }
        }
        group.wait()
        let ads = made.withLock { $0 }.map { (id: $0.id, object: UnsafeMutableRawPointer(bitPattern: $0.object)) }
        plugin.ledger.waitForCompletions(ads.map(\.id), until: Date() + seconds(request.timeout))
        var missing = 0, nulls = 0
        for ad in ads {
            guard let object = ad.object else { nulls += 1; continue }
            if let record = plugin.ledger.record(ad.id), !record.loadRefused, record.completions.isEmpty { missing += 1 }
            plugin.destroy(ad.id, object)
        }
        Thread.sleep(forTimeInterval: seconds(options.grace))
        var problems = violations(check, Rule.allCases)
        if missing > 0 { problems.append("\(missing) of \(ads.count) loads never completed within \(ms(request.timeout))") }
        if nulls > 0 { problems.append("ad_create returned NULL \(nulls) times") }
        add(check, problems.isEmpty ? .pass : .fail, problems.isEmpty ? "\(ads.count) loads, each completed exactly once" : summary(problems))
    }

    // MARK: Resources

    private func resources(_ format: AdFormat) {
        let check = "resources after \(options.iterations) cycles"
        guard options.iterations > 0 else { return add(check, .skip, "asked for no cycles (--iterations 0)") }
        setCheck(check)
        let request = self.request(format)
        let warmUp = max(100, options.iterations / 10)
        var start: (memory: Int, fds: Int)?
        // Each ad waits for its completion until its own deadline, counted from its load: a
        // plugin that never completes costs one deadline for all in flight, not one each.
        var inFlight: [(id: UInt64, object: UnsafeMutableRawPointer, due: Date)] = []
        var nulls = 0, stuck = 0
        func retire(_ ad: (id: UInt64, object: UnsafeMutableRawPointer, due: Date)) {
            guard let record = plugin.ledger.waitForCompletion(ad.id, until: ad.due) else { return }
            if !record.loadRefused, record.completions.isEmpty { stuck += 1 }
            if case .loaded? = record.completions.first { _ = plugin.show(ad.object) }
            plugin.destroy(ad.id, ad.object)
        }
        for cycle in 0..<(warmUp + options.iterations) {
            if cycle == warmUp {
                inFlight.forEach(retire)
                inFlight.removeAll()
                Thread.sleep(forTimeInterval: seconds(options.grace))
                start = Self.usage()
            }
            let ad = plugin.create(request, check: check)
            guard let object = ad.object else { nulls += 1; continue }
            _ = plugin.load(ad.id, object)
            inFlight.append((ad.id, object, Date() + seconds(request.timeout)))
            if inFlight.count >= 32 { retire(inFlight.removeFirst()) }
            if stuck > 10 { break }
        }
        inFlight.forEach(retire)
        Thread.sleep(forTimeInterval: seconds(options.grace))
        var end = Self.usage()
        // A network client may hold an idle keep-alive connection for a moment after its
        // last request (vast's URLSession did, under load): a leak is a descriptor that
        // stays, so look again for up to 2 s before calling it one.
        for _ in 0..<20 where end.fds > (start?.fds ?? .max) {
            Thread.sleep(forTimeInterval: 0.1)
            end = Self.usage()
        }
        guard let start else {
            return add(check, .fail, "\(stuck) loads never completed within \(ms(request.timeout)): the cycles stopped in the warm-up")
        }
        var problems = violations(check, Rule.allCases)
        if stuck > 0 { problems.append("\(stuck) loads never completed") }
        if nulls > 0 { problems.append("ad_create returned NULL \(nulls) times") }
        if end.fds > start.fds { problems.append("open fds grew from \(start.fds) to \(end.fds)") }
        let memory = Self.memoryMeasure.name
        if end.memory - start.memory > options.memorySlack {
            problems.append(String(format: "%@ grew %.1f MB (from %.1f to %.1f MB), more than the %.0f MB allowed",
                                   memory, mb(end.memory - start.memory), mb(start.memory), mb(end.memory), mb(options.memorySlack)))
        }
        let numbers = String(format: "%@ load, show, destroy: %@ %.1f → %.1f MB, fds %d → %d (after %d to warm up)",
                             format.rawValue, memory, mb(start.memory), mb(end.memory), start.fds, end.fds, warmUp)
        add(check, problems.isEmpty ? .pass : .fail, problems.isEmpty ? numbers : summary(problems) + "; " + numbers)
    }

    static func usage() -> (memory: Int, fds: Int) {
        let fds = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count
        return (memoryMeasure.bytes(), fds)
    }

    /// RSS, unless the validator runs under AddressSanitizer or ThreadSanitizer: their
    /// quarantine and shadow memory grow RSS with no leak at all, so there it is the heap in
    /// use as their allocator counts it (bytes allocated and not yet freed).
    static let memoryMeasure: (name: String, bytes: @Sendable () -> Int) = {
        typealias AllocatedBytes = @convention(c) () -> Int
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__sanitizer_get_current_allocated_bytes") {
            let allocated = unsafeBitCast(symbol, to: AllocatedBytes.self)
            return ("heap in use", { allocated() })
        }
        return ("RSS", {
            let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
            let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        })
    }()

    // MARK: Over the whole run

    private func callbackRules() {
        let counts = plugin.ledger.violationCounts()
        for rule in Rule.allCases {
            let count = counts[rule] ?? 0
            add("callbacks: \(rule.rawValue)", count == 0 ? .pass : .fail,
                count == 0 ? "no violation" : "\(count) violation\(count == 1 ? "" : "s"), the first: \(plugin.ledger.firstViolation(rule) ?? "?")")
        }
    }

    private func callTimes() {
        let (slowest, over) = plugin.timings
        let list = slowest.sorted { $0.key < $1.key }.map { "\($0.key) \(ms($0.value))" }.joined(separator: ", ")
        let check = "time: no call blocks longer than \(ms(options.callBound))"
        if over.isEmpty { return add(check, .pass, "slowest: \(list)") }
        let worst = Dictionary(grouping: over, by: \.function).map { function, calls in
            "\(function) \(calls.count) time\(calls.count == 1 ? "" : "s") (up to \(ms(calls.map(\.took).max()!)))"
        }.sorted()
        add(check, .fail, "over the bound: \(worst.joined(separator: ", ")); slow work belongs on the plugin's own threads")
    }

    // MARK: Helpers

    private func request(_ format: AdFormat) -> Request {
        var request = Request(format: format.abi.rawValue, serverParameter: options.serverParameter, timeout: options.timeout)
        switch format {
        case .banner: (request.width, request.height) = (320, 50)
        case .native: request.variant = "feed"
        case .interactive:
            request.creativeURL = "https://validator.invalid/creative.js"
            request.slotType = "preroll"
        default: break
        }
        return request
    }

    private func create(_ request: Request, check: String, problems: inout [String]) -> (id: UInt64, object: UnsafeMutableRawPointer)? {
        let ad = plugin.create(request, check: check)
        guard let object = ad.object else {
            problems.append("ad_create returned NULL")
            return nil
        }
        return (ad.id, object)
    }

    /// ad_load, then waits for its completion up to the deadline; the record and how long it took.
    private func loadAndWait(_ ad: (id: UInt64, object: UnsafeMutableRawPointer), _ request: Request) -> (AdRecord?, Duration) {
        let started = ContinuousClock.now
        _ = plugin.load(ad.id, ad.object)
        let record = plugin.ledger.waitForCompletion(ad.id, until: Date() + seconds(request.timeout))
        return (record, ContinuousClock.now - started)
    }

    private func violations(_ check: String, _ rules: [Rule]) -> [String] {
        let counts = plugin.ledger.violationCounts(check: check)
        return rules.compactMap { rule in counts[rule].map { "\($0) × \(rule.rawValue)" } }
    }

    /// The first problems and how many more: one line stays readable.
    private func summary(_ problems: [String]) -> String {
        problems.count <= 3 ? problems.joined(separator: "; ") : problems.prefix(3).joined(separator: "; ") + "; and \(problems.count - 3) more"
    }

    private var lastLog: String { plugin.ledger.log.last.map { " (its log: \($0))" } ?? "" }

    private func setCheck(_ name: String) {
        plugin?.ledger.setCheck(name)
        CrashNote.set(name)
    }

    private func add(_ name: String, _ outcome: CheckResult.Outcome, _ detail: String) {
        let result = CheckResult(name: name, outcome: outcome, detail: detail)
        results.append(result)
        report(result)
    }
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
func ms(_ d: Duration) -> String { String(format: "%.0f ms", seconds(d) * 1000) }
private func mb(_ bytes: Int) -> Double { Double(bytes) / 1_048_576 }
