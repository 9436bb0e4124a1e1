import AdorchHTTP
import Dispatch
import Foundation

/// HTTP for the bidder: a BidRequest POSTed, a markup or notice URL fetched, each on a thread
/// of its own (AdorchHTTP blocks it), and ended exactly once, by its answer, its time limit or
/// its body passing the size limit: the transfer is stopped at either limit, so an exchange
/// that answers late or without end costs its time limit and no more. Redirects are not
/// followed: an exchange's endpoint answers itself, and a redirect loop must cost one
/// request, not a chain of them.
final class BidExchange: Sendable {
    enum Outcome: Sendable {
        case response(status: Int, body: [UInt8])
        case timeout
        case tooLarge(bytes: Int)
        case failed(String)
    }

    let userAgent: String
    private let transfers = DispatchQueue(label: "adorch.plugin.openrtb.http", attributes: .concurrent)

    init(userAgent: String) { self.userAgent = userAgent }

    /// POSTs `body` as JSON (OpenRTB 2.6 §3.1: the version header says which OpenRTB it is).
    func post(_ url: URL, json body: Data, timeout: Duration, limit: Int, completion: @escaping @Sendable (Outcome) -> Void) {
        var transfer = HTTPTransfer(method: "POST", url: url.absoluteString, userAgent: userAgent, timeout: timeout, maxBytes: limit)
        transfer.headers = ["Content-Type: application/json", "x-openrtb-version: 2.6"]
        transfer.body = Array(body)
        start(transfer, completion)
    }

    func get(_ url: URL, timeout: Duration, limit: Int, completion: @escaping @Sendable (Outcome) -> Void) {
        start(HTTPTransfer(method: "GET", url: url.absoluteString, userAgent: userAgent, timeout: timeout, maxBytes: limit), completion)
    }

    private func start(_ transfer: HTTPTransfer, _ completion: @escaping @Sendable (Outcome) -> Void) {
        transfers.async {
            switch transfer.perform() {
            case .answered(let status, let body): completion(.response(status: status, body: body))
            case .cut(_, let bytes): completion(.tooLarge(bytes: max(bytes, transfer.maxBytes + 1)))
            case .timeout: completion(.timeout)
            case .failed(let failure): completion(.failed(failure.description))
            }
        }
    }
}
