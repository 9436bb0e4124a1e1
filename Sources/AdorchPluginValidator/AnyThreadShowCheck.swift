import AdorchEngine
import AdorchLocking
import AdorchPluginHost
import Foundation

/// ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD (ABI 1.2): a plugin that declares it has its ad_show
/// called on the daemon's engine thread, while its queue runs other calls. Held to what the
/// daemon holds it to: every call succeeds, and the calls keep the flag by the daemon's own
/// AnyThreadShowRecord (too many over its bound, and the daemon withdraws the flag).
extension Validator {
    static let anyThreadShows = 200

    func anyThreadShow(_ format: AdFormat) {
        let check = "show from any thread"
        // Only for a plugin that declares it: for the others there is nothing to check.
        guard plugin.library.showsOnAnyThread else { return }
        setCheck(check)
        let request = self.request(format)
        var problems: [String] = []
        // The ads to show, loaded on the queue: up to 200, as many as one deadline allows.
        var ads: [(id: UInt64, object: UnsafeMutableRawPointer)] = []
        let preparing = Date() + seconds(request.timeout)
        while ads.count < Self.anyThreadShows, Date() < preparing {
            guard let ad = create(request, check: check, problems: &problems) else { break }
            _ = plugin.load(ad.id, ad.object)
            ads.append(ad)
        }
        plugin.ledger.waitForCompletions(ads.map(\.id), until: Date() + seconds(request.timeout))
        let loaded = ads.filter { ad in
            if case .loaded? = plugin.ledger.record(ad.id)?.completions.first { true } else { false }
        }
        guard !loaded.isEmpty else {
            ads.forEach { plugin.destroy($0.id, $0.object) }
            return add(check, problems.isEmpty ? .skip : .fail, problems.isEmpty ? "no load filled" : summary(problems))
        }

        // Loads of other objects keep the queue busy for as long as the shows run.
        let background = LockedValue<(stop: Bool, ads: [(id: UInt64, object: UInt)])>((false, []))
        let started = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [plugin] in
            while !background.withLock({ $0.stop }) {
                let ad = plugin!.create(request, check: check)
                if let object = ad.object { _ = plugin!.load(ad.id, object) }
                let first = background.withLock { state in
                    state.ads.append((ad.id, UInt(bitPattern: ad.object)))
                    return state.ads.count == 1
                }
                if first { started.signal() }
            }
            finished.signal()
        }
        started.wait()
        var refused: [String] = [], record = AnyThreadShowRecord()
        for ad in loaded {
            let (code, took) = plugin.showOffQueue(ad.object)
            if code != 0 { refused.append("ad \(ad.id): ad_show returned \(code)") }
            // Once the flag is withdrawn, or three refusals in, the point is made.
            if record.note(took) || refused.count >= 3 { break }
        }
        background.withLock { $0.stop = true }
        finished.wait()
        let others = background.withLock { $0.ads }
        for ad in ads { plugin.destroy(ad.id, ad.object) }
        for ad in others {
            if let object = UnsafeMutableRawPointer(bitPattern: ad.object) { plugin.destroy(ad.id, object) }
        }
        Thread.sleep(forTimeInterval: seconds(options.grace))

        if record.withdrawn {
            problems.append("ad_show took up to \(ms(record.slowest)) off the queue, over the \(ms(AnyThreadShowRecord.bound)) bound "
                + "\(record.slowCalls) times in \(record.calls): with ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD it must return within 1 ms and "
                + "never block (the daemon withdraws the flag after \(AnyThreadShowRecord.strikes) such calls among \(AnyThreadShowRecord.window))")
        }
        problems += refused + violations(check, Rule.allCases)
        add(check, problems.isEmpty ? .pass : .fail, problems.isEmpty
            ? "\(record.calls) ad_show calls on a thread of their own while \(others.count) loads ran on the queue: each returned 0, slowest \(String(format: "%.2f ms", seconds(record.slowest) * 1000))"
                + (record.slowCalls > 0 ? ", \(record.slowCalls) over the \(ms(AnyThreadShowRecord.bound)) bound (the daemon allows \(AnyThreadShowRecord.strikes - 1) in \(AnyThreadShowRecord.window))" : "")
            : summary(problems))
    }
}
