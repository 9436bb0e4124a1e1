import AdorchEngine
import AdorchLocking
import Foundation

/// The checks run for each format the plugin claims: loads and their completions, payloads,
/// destroys, loads from several threads, shows and notifies.
extension Validator {
    func formatChecks(_ format: AdFormat) {
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
    func nativeBatch(_ base: Request) {
        let check = "native: payload of 3 ads"
        setCheck(check)
        var request = base
        request.order.count = 3
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
    func concurrentLoads(_ format: AdFormat, _ request: Request) {
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
}
