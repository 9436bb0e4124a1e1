import AdorchEngine
import CAdorchPlugin
import Foundation

/// A broken rule of the contract, named as plugin.h states it.
public enum Rule: String, CaseIterable, Sendable, Codable {
    case completedTwice = "completion exactly once: a second loaded/failed for one load"
    case completedWithoutLoad = "completion exactly once: loaded/failed for an object never loaded, or after ad_load returned an error"
    case reportedAfterDestroy = "no report after ad_destroy returned"
    case reportedForUnknownAd = "no report for an ad the host never created"
    case reportedAfterDeinit = "no host callback after deinit returned"
    case eventDetailNotObject = "an event's detail is a JSON object or NULL"
    case unknownEvent = "events are the ones plugin.h defines for plugin->host"
    case unknownError = "failed reports an adorch_error"
    case unknownLogLevel = "log levels are adorch_log_level values"
}

/// What the plugin reported for one ad.
struct AdRecord {
    var check: String
    var loadCalled = false
    /// ad_load returned an error: the host reports the failure, the plugin must not.
    var loadRefused = false
    var completions: [Completion] = []
    var events: [UInt32] = []
    /// Each event's latest detail, for the checks that read one (a reward's trans_id).
    var details: [UInt32: String] = [:]
}

enum Completion {
    case loaded(payload: String)
    case failed(error: Int32, networkCode: Int64, message: String)

    var summary: String {
        switch self {
        case .loaded: "loaded"
        case .failed(let error, let code, let message): "failed \(error) (network code \(code)\(message.isEmpty ? "" : ": \(message)"))"
        }
    }
}

/// Every callback the plugin makes, checked against what the host has asked of it.
///
/// @unchecked Sendable: the plugin reaches it through host_data from any thread; every
/// field is guarded by `condition`, which also wakes checks waiting for a completion.
final class CallbackLedger: @unchecked Sendable {
    private let condition = NSCondition()
    private var nextID: UInt64 = 1
    /// Created and not yet destroyed. Ids below nextID and not here have been destroyed:
    /// the ledger stays small over any number of cycles.
    private var live: [UInt64: AdRecord] = [:]
    private var violations: [Rule: (count: Int, first: String)] = [:]
    private var violationsByCheck: [String: [Rule: Int]] = [:]
    private var deinitReturned = false
    private var logLines: [String] = []
    private var currentCheck = "init"
    /// The first id each check created, in order: a late report is blamed on its ad's check.
    private var checkStarts: [(id: UInt64, check: String)] = []

    // MARK: The host's side

    func setCheck(_ name: String) {
        locked {
            currentCheck = name
            checkStarts.append((nextID, name))
        }
    }

    func create(check: String) -> UInt64 {
        locked {
            defer { nextID += 1 }
            live[nextID] = AdRecord(check: check)
            return nextID
        }
    }

    func loadCalled(_ id: UInt64, refused: Bool) {
        locked {
            live[id]?.loadCalled = true
            live[id]?.loadRefused = refused
        }
    }

    /// The record of an ad the host is done with (destroy returned); later reports are violations.
    @discardableResult
    func destroyed(_ id: UInt64) -> AdRecord? { locked { live.removeValue(forKey: id) } }

    func record(_ id: UInt64) -> AdRecord? { locked { live[id] } }

    func setDeinitReturned(_ value: Bool) { locked { deinitReturned = value } }

    /// Waits until `id` has a completion or `deadline` passes; returns its record.
    func waitForCompletion(_ id: UInt64, until deadline: Date) -> AdRecord? {
        condition.lock()
        defer { condition.unlock() }
        while live[id].map({ $0.completions.isEmpty }) ?? false {
            if !condition.wait(until: deadline) { break }
        }
        return live[id]
    }

    /// Waits until `id`'s record is `satisfied`, or `deadline` passes; returns its record.
    func waitFor(_ id: UInt64, until deadline: Date, _ satisfied: (AdRecord) -> Bool) -> AdRecord? {
        condition.lock()
        defer { condition.unlock() }
        while let record = live[id], !satisfied(record) {
            if !condition.wait(until: deadline) { break }
        }
        return live[id]
    }

    /// Waits until every one of `ids` has a completion or `deadline` passes.
    func waitForCompletions(_ ids: [UInt64], until deadline: Date) {
        condition.lock()
        defer { condition.unlock() }
        while ids.contains(where: { live[$0].map { $0.completions.isEmpty } ?? false }) {
            if !condition.wait(until: deadline) { break }
        }
    }

    /// Violations so far: over the whole run, or of one check.
    func violationCounts(check: String? = nil) -> [Rule: Int] {
        locked { check.map { violationsByCheck[$0] ?? [:] } ?? violations.mapValues(\.count) }
    }

    func firstViolation(_ rule: Rule) -> String? { locked { violations[rule]?.first } }

    var log: [String] { locked { logLines } }

    // MARK: The plugin's side (from the C callbacks, any thread)

    func loaded(_ id: UInt64, payload: String) { complete(id, .loaded(payload: payload)) }

    func failed(_ id: UInt64, error: Int32, networkCode: Int64, message: String) {
        if adorch_error(abiValue: error) == nil { violate(.unknownError, "failed with error \(error) for ad \(id)", ad: id) }
        complete(id, .failed(error: error, networkCode: networkCode, message: message))
    }

    func event(_ id: UInt64, _ event: UInt32, detail: String?) {
        if let detail, (try? JSONSerialization.jsonObject(with: Data(detail.utf8))) as? [String: Any] == nil {
            violate(.eventDetailNotObject, "event \(event) for ad \(id) with detail \(detail.prefix(80))", ad: id)
        }
        if adorch_event(abiValue: event)?.isReportedByPlugins != true { violate(.unknownEvent, "event \(event) for ad \(id)", ad: id) }
        condition.lock()
        defer { condition.unlock() }
        if let problem = misdirected(id, what: "event \(event)") { return violateLocked(problem.0, problem.1, ad: id) }
        live[id]?.events.append(event)
        if let detail { live[id]?.details[event] = detail }
        condition.broadcast()
    }

    func logged(level: UInt32, _ message: String) {
        if !(3...7).contains(level) { violate(.unknownLogLevel, "log level \(level): \(message.prefix(80))") }
        locked {
            if deinitReturned { violateLocked(.reportedAfterDeinit, "log after deinit: \(message.prefix(80))") }
            logLines.append(message)
            if logLines.count > 200 { logLines.removeFirst(100) }
        }
    }

    private func complete(_ id: UInt64, _ completion: Completion) {
        condition.lock()
        defer { condition.unlock() }
        if let problem = misdirected(id, what: completion.summary) { return violateLocked(problem.0, problem.1, ad: id) }
        guard var record = live[id] else { return }
        if !record.loadCalled || record.loadRefused {
            violateLocked(.completedWithoutLoad, "ad \(id) (\(record.check)): \(completion.summary) \(record.loadRefused ? "after ad_load returned an error" : "without ad_load")", ad: id)
        } else if !record.completions.isEmpty {
            violateLocked(.completedTwice, "ad \(id) (\(record.check)): \(record.completions[0].summary), then \(completion.summary)", ad: id)
        }
        record.completions.append(completion)
        live[id] = record
        condition.broadcast()
    }

    /// Whether a report for `id` has no ad to go to, and which rule that breaks. Locked.
    private func misdirected(_ id: UInt64, what: String) -> (Rule, String)? {
        if deinitReturned { return (.reportedAfterDeinit, "\(what) for ad \(id) after deinit") }
        if id == 0 || id >= nextID { return (.reportedForUnknownAd, "\(what) for ad \(id), which the host never created") }
        if live[id] == nil { return (.reportedAfterDestroy, "\(what) for ad \(id) after its ad_destroy returned") }
        return nil
    }

    private func violate(_ rule: Rule, _ detail: String, ad: UInt64? = nil) { locked { violateLocked(rule, detail, ad: ad) } }

    private func violateLocked(_ rule: Rule, _ detail: String, ad: UInt64? = nil) {
        let check = ad.flatMap { id in checkStarts.last { $0.id <= id && id < nextID }?.check } ?? currentCheck
        violations[rule, default: (0, "\(detail) [in \(check)]")].count += 1
        violationsByCheck[check, default: [:]][rule, default: 0] += 1
    }

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }
}
