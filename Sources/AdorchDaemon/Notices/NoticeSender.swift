import AdorchEngine
import AdorchLocking
import AdorchNoticeStore
import AdorchPaths
import AdorchHTTP
import Dispatch
import Foundation
import Logging

/// [its own queue] Sends the outbox's due notices (docs/bidding.md, "Notices"): two of each
/// plugin at a time, each GET on a thread of its own (libcurl blocks), bounded in time and
/// in the body read. A notice answered 2xx or 3xx is done and deleted; one refused for good (4xx but 408
/// and 429, a redirect loop) is deleted and logged; any other failure is tried again after a
/// backoff (1 s doubling to 5 minutes) for 24 hours. Row ids in flight are never sent twice.
final class NoticeSender: Sendable {
    /// Notices of one plugin in flight at once (its exchange's share, whatever the others'
    /// do), of all at once, and how long one may take.
    static let perPlugin = 2
    static let parallel = 64
    static let timeout: Duration = .seconds(10)
    /// The most of an answer read: a notice's body means nothing, and an endless one must not cost.
    static let maxBodyBytes = 64 << 10
    static let userAgent = "adorchd/\(AdorchVersion.current) (notices)"
    /// At most one line a minute about notices that failed and wait.
    private static let failureLogInterval: TimeInterval = 60

    struct Counters: Sendable, Equatable {
        var sent = 0
        var refused = 0
        var retried = 0
        var givenUp = 0
    }

    /// What `queue` owns.
    private struct State {
        var inFlight: [Int64: String] = [:]
        /// Answered, but their rows could not be deleted (a full disk): not sent again meanwhile.
        var answered: Set<Int64> = []
        var counters = Counters()
        var wakeArmedFor: Int64?
        var lastFailureLog: Date?
        /// Stopping: nothing more is sent; what is due waits in the outbox for the next start.
        var closed = false
    }

    let outbox: NoticeOutbox
    private let logger: Logger
    private let queue = DispatchQueue(label: "adorch.notices")
    /// The blocking transfers, one thread each while they last.
    private let transfers = DispatchQueue(label: "adorch.notices.transfers", attributes: .concurrent)
    private let state: QueueBound<State>
    /// Signalled as the last notice in flight ends, once closed.
    private let drained = DispatchSemaphore(value: 0)

    init(outbox: NoticeOutbox, logger: Logger) {
        self.outbox = outbox
        self.logger = logger
        state = QueueBound(State(), queue: queue)
    }

    private var inFlight: [Int64: String] {
        get { state.value.inFlight }
        _modify { yield &state.value.inFlight }
    }
    private var answered: Set<Int64> {
        get { state.value.answered }
        _modify { yield &state.value.answered }
    }
    private var counters: Counters {
        get { state.value.counters }
        _modify { yield &state.value.counters }
    }

    static func nowMS() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// New notices may be due: send what is.
    func wake() { queue.async { [self] in pump() } }

    /// What was sent and how it went, for the status.
    func snapshot() -> Counters { queue.sync { counters } }

    /// For a clean stop: sends nothing more, and waits up to `grace` for the notices in flight
    /// to be answered and deleted, so that the next start does not send them again. How many
    /// were still in flight (each may then arrive twice).
    func close(grace: Duration) -> Int {
        let waiting = queue.sync { () -> Int in
            state.value.closed = true
            return inFlight.count
        }
        guard waiting > 0 else { return 0 }
        _ = drained.wait(timeout: .now() + .milliseconds(Int(grace / .milliseconds(1))))
        return queue.sync { inFlight.count }
    }

    private func pump() {
        guard !state.value.closed else {
            if inFlight.isEmpty { drained.signal() }
            return
        }
        for id in answered where (try? outbox.remove(id)) != nil { answered.remove(id) }
        guard inFlight.count < Self.parallel else { return }
        let now = Self.nowMS()
        let busy = inFlight.values.reduce(into: [String: Int]()) { $0[$1, default: 0] += 1 }
        let due: [DueNotice]
        do {
            due = try outbox.due(nowMS: now, room: { Self.perPlugin - busy[$0, default: 0] }, excluding: Set(inFlight.keys).union(answered))
                .prefix(Self.parallel - inFlight.count).map { $0 }
        } catch {
            logFailure("notices: the outbox could not be read (\(error)); trying again in a second")
            return arm(at: now + 1000)
        }
        for notice in due { send(notice) }
        if inFlight.count < Self.parallel, let next = try? outbox.nextDueMS(), next > now { arm(at: next) }
    }

    /// One wake-up at `ms`, unless one comes sooner.
    private func arm(at ms: Int64) {
        if let armed = state.value.wakeArmedFor, armed <= ms, armed > Self.nowMS() { return }
        state.value.wakeArmedFor = ms
        queue.asyncAfter(deadline: .now() + .milliseconds(Int(max(0, ms - Self.nowMS())))) { [self] in
            if state.value.wakeArmedFor == ms { state.value.wakeArmedFor = nil }
            pump()
        }
    }

    private func send(_ notice: DueNotice) {
        inFlight[notice.id] = notice.plugin
        transfers.async { [self] in
            var transfer = HTTPTransfer(method: "GET", url: notice.url, userAgent: Self.userAgent, timeout: Self.timeout, maxBytes: Self.maxBodyBytes)
            (transfer.followsRedirects, transfer.keepsBody) = (true, false)
            let outcome = transfer.perform()
            queue.async { [self] in
                inFlight[notice.id] = nil
                ended(notice, outcome)
                pump()
            }
        }
    }

    /// Where a notice goes, for the journal: the host only (its query may carry ids), as
    /// written, escapes kept, so that no byte of it can break the line.
    private static func place(_ notice: DueNotice) -> String {
        "a \(notice.kind.rawValue) notice of \(notice.plugin) to \(URLComponents(string: notice.url)?.percentEncodedHost ?? "its host")"
    }

    private func ended(_ notice: DueNotice, _ outcome: HTTPTransfer.Outcome) {
        // An answer cut for its size still said its status: the body of a notice means nothing.
        let (status, error): (Int, String?)
        var permanent = false
        switch outcome {
        case .answered(let s, _), .cut(let s, _): (status, error) = (s, nil)
        case .timeout: (status, error) = (0, "no answer within \(Self.timeout)")
        case .failed(let failure): (status, error, permanent) = (0, failure.description, failure.isForGood)
        }
        permanent = permanent || (400..<500).contains(status) && status != 408 && status != 429
        if error == nil, (200..<400).contains(status) {
            counters.sent += 1
            done(notice)
            return
        }
        if permanent {
            counters.refused += 1
            logger.warning("notices: \(Self.place(notice)) was refused (\(error ?? "HTTP \(status)")); it is not sent again")
            done(notice)
            return
        }
        let attempts = notice.attempts + 1
        let now = Self.nowMS()
        if now - notice.createdMS >= Int64(NoticeOutbox.givenUpAfter / .milliseconds(1)) {
            counters.givenUp += 1
            logger.error("notices: \(Self.place(notice)) failed for \(NoticeOutbox.givenUpAfter) over \(attempts) attempts (last: \(error ?? "HTTP \(status)")); given up")
            done(notice)
            return
        }
        counters.retried += 1
        let next = now + Int64(NoticeOutbox.backoff(afterAttempts: attempts) / .milliseconds(1))
        logFailure("notices: \(Self.place(notice)) failed (\(error ?? "HTTP \(status)")); tried again in \(NoticeOutbox.backoff(afterAttempts: attempts)), as every failed notice is, for 24 hours")
        do { try outbox.retry(notice.id, attempts: attempts, nextMS: next) } catch {
            logFailure("notices: a notice's next attempt could not be written (\(error)); it is tried again at once")
        }
    }

    /// Answered or given up: deleted, or kept from sending until it can be.
    private func done(_ notice: DueNotice) {
        do { try outbox.remove(notice.id) } catch {
            answered.insert(notice.id)
            logFailure("notices: a notice answered could not be deleted from the outbox (\(error)); it is not sent again while the daemon runs")
        }
    }

    private func logFailure(_ line: String) {
        if let last = state.value.lastFailureLog, Date().timeIntervalSince(last) < Self.failureLogInterval { return }
        state.value.lastFailureLog = Date()
        logger.warning("\(line)")
    }
}
