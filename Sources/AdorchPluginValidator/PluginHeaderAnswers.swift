import AdorchEngine
import AdorchPluginHost
import CAdorchPlugin
import Foundation

/// What plugin.h promises beyond the call rules, held to the plugin: it answers before its
/// deadline (rule 3), a self-tracking plugin reports each impression once
/// (ADORCH_EVENT_IMPRESSION), and a network's trans_id does not repeat when the host
/// restarts (ADORCH_EVENT_REWARD, request.load_uid).
extension Validator {
    /// Three loads with a deadline short enough that a slow network's plugin must give up:
    /// each must be answered (loaded, or failed, ADORCH_ERROR_TIMEOUT for one that gave up)
    /// by the deadline less the margin.
    func deadlineMargin(_ format: AdFormat) {
        let check = "deadline: answered \(ms(PluginABI.deadlineMargin)) before it"
        setCheck(check)
        var request = self.request(format)
        request.timeout = min(request.timeout, options.shortTimeout)
        let answerBy = request.timeout - PluginABI.deadlineMargin
        var problems: [String] = [], answers: [String] = []
        for _ in 0..<3 {
            // Taken before ad_create makes the request: its deadline is no earlier than this plus its timeout.
            let started = ContinuousClock.now
            guard let ad = create(request, check: check, problems: &problems) else { break }
            _ = plugin.load(ad.id, ad.object)
            let record = plugin.ledger.waitFor(ad.id, until: Date() + seconds(answerBy - (ContinuousClock.now - started))) {
                !$0.completions.isEmpty || $0.loadRefused
            }
            let took = ContinuousClock.now - started
            plugin.destroy(ad.id, ad.object)
            if record?.loadRefused == true {
                answers.append("ad_load refused")
            } else if let first = record?.completions.first {
                answers.append("\(first.summary) after \(ms(took))")
            } else {
                problems.append("ad \(ad.id): no loaded or failed by \(ms(answerBy)), its \(ms(request.timeout)) deadline less the margin "
                                + "(a plugin that gives up reports ADORCH_ERROR_TIMEOUT by then)")
            }
        }
        Thread.sleep(forTimeInterval: seconds(options.grace))
        problems += violations(check, Rule.allCases)
        add(check, problems.isEmpty && !answers.isEmpty ? .pass : .fail,
            problems.isEmpty ? "deadline \(ms(request.timeout)): \(answers.joined(separator: "; "))" : summary(problems))
    }

    /// A plugin whose payload says "tracks_impressions": true reports ADORCH_EVENT_IMPRESSION
    /// for a shown ad exactly once, and none before ad_show: the host counts what it hears.
    func selfTrackedImpressions(_ format: AdFormat) {
        let check = "impressions: a self-tracking plugin reports each once"
        setCheck(check)
        let request = self.request(format)
        let impression = adorch_event.ADORCH_EVENT_IMPRESSION.rawValue
        var problems: [String] = []
        var filled: (id: UInt64, object: UnsafeMutableRawPointer, tracksItself: Bool)?
        for _ in 0..<5 where filled == nil {
            guard let ad = create(request, check: check, problems: &problems) else { break }
            let (record, _) = loadAndWait(ad, request)
            if case .loaded(let text)? = record?.completions.first, case .loaded(_, _, _, let tracksItself, _, _, _) = decodePayload(text) {
                filled = (ad.id, ad.object, tracksItself)
            } else {
                plugin.destroy(ad.id, ad.object)
            }
        }
        guard let ad = filled else { return add(check, problems.isEmpty ? .skip : .fail, problems.isEmpty ? "no load filled" : summary(problems)) }
        guard ad.tracksItself else {
            plugin.destroy(ad.id, ad.object)
            return add(check, .skip, "the payload leaves impressions to the host (no \"tracks_impressions\": true)")
        }
        func impressions() -> Int { plugin.ledger.record(ad.id)?.events.filter { $0 == impression }.count ?? 0 }
        if impressions() > 0 { problems.append("IMPRESSION before ad_show: an ad not yet shown was not seen") }
        let before = impressions()
        let code = plugin.show(ad.object)
        let shown = ContinuousClock.now
        if code != 0 { problems.append("ad_show returned \(code)") }
        _ = plugin.ledger.waitFor(ad.id, until: Date() + seconds(request.timeout)) { $0.events.filter { $0 == impression }.count > before }
        let after = ContinuousClock.now - shown
        Thread.sleep(forTimeInterval: seconds(options.grace))  // for a second one
        let count = impressions() - before
        plugin.destroy(ad.id, ad.object)
        if code == 0, count == 0 {
            problems.append("no IMPRESSION within \(ms(request.timeout)) of ad_show: with \"tracks_impressions\": true the host counts only the plugin's")
        }
        if count > 1 { problems.append("IMPRESSION \(count) times for one ad: the host counts one") }
        problems += violations(check, Rule.allCases)
        add(check, problems.isEmpty ? .pass : .fail,
            problems.isEmpty ? "one IMPRESSION, \(ms(after)) after ad_show returned, none before: counted once" : summary(problems))
    }

    /// Two runs of the plugin, as two daemon runs: each numbers its ads from 1, so the one
    /// rewarded ad of each run has the same ad id, and the network's trans_id must differ.
    func transIDAcrossRestart() {
        let check = "rewards: trans_id unique across a host restart"
        setCheck(check)
        let request = self.request(.rewarded)
        let reward = adorch_event.ADORCH_EVENT_REWARD.rawValue
        var problems: [String] = [], transIDs: [(ad: UInt64, transID: String)] = []
        for run in 1...2 {
            let host = PluginUnderTest(library: plugin.library, bound: options.callBound, returned: watcher.progressed)
            host.ledger.setCheck(check)
            guard host.initialize(configJSON: options.configJSON) == 0 else {
                problems.append("run \(run): init failed")
                break
            }
            defer {
                host.deinitialize()
                for (rule, count) in host.ledger.violationCounts() {
                    problems.append("run \(run): \(count) × \(rule.rawValue), the first: \(host.ledger.firstViolation(rule) ?? "?")")
                }
            }
            let ad = host.create(request, check: check)
            guard let object = ad.object else {
                problems.append("run \(run): ad_create returned NULL")
                continue
            }
            _ = host.load(ad.id, object)
            guard case .loaded(let text)? = host.ledger.waitForCompletion(ad.id, until: Date() + seconds(request.timeout))?.completions.first else {
                host.destroy(ad.id, object)
                problems.append("run \(run): the rewarded load did not fill")
                continue
            }
            guard case .loaded(_, _, _, _, _, let rewardByNetwork, _) = decodePayload(text), rewardByNetwork else {
                host.destroy(ad.id, object)
                return add(check, .skip, "rewards are the host's (the payload has no \"reward_by\": \"network\")")
            }
            _ = host.show(object)
            host.notify(object, adorch_event.ADORCH_EVENT_COMPLETE.rawValue, detail: nil)
            let record = host.ledger.waitFor(ad.id, until: Date() + seconds(request.timeout)) { $0.events.contains(reward) }
            host.destroy(ad.id, object)
            guard record?.events.contains(reward) == true else {
                problems.append("run \(run): no REWARD within \(ms(request.timeout)) of the video's complete, with \"reward_by\": \"network\"")
                continue
            }
            let detail = record?.details[reward].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) } as? [String: Any]
            guard let transID = detail?["trans_id"] as? String else {
                return add(check, .skip, "the network's REWARD carries no trans_id")
            }
            transIDs.append((ad.id, transID))
        }
        if transIDs.count == 2, transIDs[0].transID == transIDs[1].transID {
            problems.append("ad \(transIDs[0].ad) got trans_id \(transIDs[0].transID) in both runs: the daemon would refuse the second run's "
                            + "reward; build it from request.load_uid, never from the ad id alone")
        }
        add(check, problems.isEmpty && transIDs.count == 2 ? .pass : .fail,
            problems.isEmpty ? transIDs.map { "run's ad \($0.ad): \($0.transID)" }.joined(separator: ", then ") : summary(problems))
    }
}
