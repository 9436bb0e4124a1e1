import AdorchLocking
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import VAST

/// HTTP for the bidder: a BidRequest POSTed, a markup or notice URL fetched. Each exchange
/// ends exactly once, by the first of: its answer, its time limit (the answer is then given
/// up on), or its body passing the size limit. Redirects are not followed: an exchange's
/// endpoint answers itself, and a redirect loop must cost one request, not a chain of them.
///
/// @unchecked Sendable: it is its session's delegate; its state is behind `exchanges`' lock.
final class BidExchange: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Outcome: Sendable {
        case response(status: Int, body: [UInt8])
        case timeout
        case tooLarge(bytes: Int)
        case failed(String)
    }

    private struct Exchange {
        var limit: Int
        var body: [UInt8] = []
        var status = 0
        var completion: @Sendable (Outcome) -> Void
    }

    private let exchanges = LockedValue<[Int: Exchange]>([:])
    private var session: URLSession!
    let userAgent: String

    init(userAgent: String) {
        self.userAgent = userAgent
        super.init()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 8
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    /// POSTs `body` as JSON (OpenRTB 2.6 §3.1: the version header says which OpenRTB it is).
    func post(_ url: URL, json body: Data, timeout: Duration, limit: Int, completion: @escaping @Sendable (Outcome) -> Void) {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("2.6", forHTTPHeaderField: "x-openrtb-version")
        start(request, timeout: timeout, limit: limit, completion: completion)
    }

    func get(_ url: URL, timeout: Duration, limit: Int, completion: @escaping @Sendable (Outcome) -> Void) {
        start(URLRequest(url: url), timeout: timeout, limit: limit, completion: completion)
    }

    private func start(_ request: URLRequest, timeout: Duration, limit: Int, completion: @escaping @Sendable (Outcome) -> Void) {
        var request = request
        request.setValue(userAgent, forHTTPHeaderField: "User-Agent")
        request.timeoutInterval = requestTimeoutInterval(for: timeout)  // the limit itself is the timer below
        let task = session.dataTask(with: request)
        exchanges.withLock { $0[task.taskIdentifier] = Exchange(limit: limit, completion: completion) }
        task.resume()
        // The answer is given up on at the limit, but the task is not cancelled: Foundation's
        // URLSession on Linux can crash the process when a cancel races the task's own end
        // (swift-corelibs-foundation #3296), and a cancel of a transfer still receiving (an
        // endless body) neither stopped it nor let the session start another, when tried. Its
        // timeoutInterval ends a silent transfer soon after; an endless one is read on and
        // dropped until the daemon's CPU bound restarts the host (docs/bidding.md).
        let id = task.taskIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout / .milliseconds(1)))) { [self] in
            finish(id, .timeout)
        }
    }

    /// Ends an exchange once: the first outcome wins, later ones are dropped.
    private func finish(_ id: Int, _ outcome: Outcome) {
        guard let exchange = exchanges.withLock({ $0.removeValue(forKey: id) }) else { return }
        exchange.completion(outcome)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)  // the 3xx itself completes the task, as any other status
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let declared = response.expectedContentLength
        let tooLarge = exchanges.withLock { all -> Int? in
            all[dataTask.taskIdentifier]?.status = status
            guard let limit = all[dataTask.taskIdentifier]?.limit, declared > Int64(limit) else { return nil }
            return Int(declared)
        }
        if let bytes = tooLarge {
            finish(dataTask.taskIdentifier, .tooLarge(bytes: bytes))
            return completionHandler(.cancel)
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let over = exchanges.withLock { all -> Int? in
            guard var exchange = all[dataTask.taskIdentifier] else { return nil }
            exchange.body += data
            all[dataTask.taskIdentifier] = exchange
            return exchange.body.count > exchange.limit ? exchange.body.count : nil
        }
        // Past the limit what was read is dropped; the rest is left to the task's timeout
        // rather than a cancel (see start).
        if let bytes = over { finish(dataTask.taskIdentifier, .tooLarge(bytes: bytes)) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let (status, body) = exchanges.withLock { all in (all[task.taskIdentifier]?.status ?? 0, all[task.taskIdentifier]?.body ?? []) }
        if let error {
            let urlError = error as? URLError
            if urlError?.code == .timedOut { return finish(task.taskIdentifier, .timeout) }
            let code = urlError.map { " (URLError \($0.code.rawValue))" } ?? ""
            return finish(task.taskIdentifier, .failed(error.localizedDescription + code))
        }
        finish(task.taskIdentifier, .response(status: status, body: body))
    }

    /// Lets the tasks in flight end, then frees the session (not invalidateAndCancel: see start).
    func close() { session.finishTasksAndInvalidate() }
}
