import CAdorchHTTP
import Glibc

/// One HTTP transfer, blocking its thread (CAdorchHTTP, through libcurl): bounded in time and
/// in the body read, and stopped at either bound. Foundation's URLSession on Linux could not
/// stop a transfer still receiving (an endless body read on at a full core), so the daemon's
/// notices and the openrtb plugin's exchanges go through this instead.
public struct HTTPTransfer: Sendable {
    public var method: String
    public var url: String
    public var userAgent: String
    /// "Name: value" lines.
    public var headers: [String] = []
    public var body: [UInt8] = []
    public var timeout: Duration
    public var maxBytes: Int
    /// Up to 5 redirects within http and https; else a 3xx is the answer.
    public var followsRedirects = false
    /// Whether the body comes back; else it is read and dropped.
    public var keepsBody = true

    public init(method: String, url: String, userAgent: String, timeout: Duration, maxBytes: Int) {
        (self.method, self.url, self.userAgent, self.timeout, self.maxBytes) = (method, url, userAgent, timeout, maxBytes)
    }

    public enum Outcome: Sendable, Equatable {
        /// The answer came whole (its body empty unless kept).
        case answered(status: Int, body: [UInt8])
        /// Its body passed `maxBytes` (read to there, or refused by its Content-Length): stopped.
        case cut(status: Int, bytes: Int)
        case timeout
        /// No answer: the connection, TLS, a redirect loop, a bad URL; libcurl's words.
        case failed(Failure)
    }

    public struct Failure: Sendable, Equatable, CustomStringConvertible {
        public var words: String
        public var isTLS: Bool
        /// No retry mends it: a redirect loop, a redirect to another scheme, a URL libcurl cannot use.
        public var isForGood: Bool
        public var description: String { isTLS ? "TLS: \(words)" : words }
    }

    /// Performs it on the calling thread.
    public func perform() -> Outcome {
        var answer = adorch_http_answer()
        defer { adorch_http_free(&answer) }
        let timeoutMS = Int(timeout / .milliseconds(1))
        let code: Int32 = headers.withCStrings { lines in
            body.withUnsafeBytes { bytes in
                method.withCString { method in
                    url.withCString { url in
                        userAgent.withCString { agent in
                            var request = adorch_http_request(
                                method: method, url: url, user_agent: agent, headers: lines.baseAddress, header_count: lines.count,
                                body: bytes.baseAddress, body_len: bytes.count, timeout_ms: timeoutMS, max_bytes: maxBytes,
                                follow_redirects: followsRedirects ? 1 : 0, keep_body: keepsBody ? 1 : 0)
                            return adorch_http_perform(&request, &answer)
                        }
                    }
                }
            }
        }
        let status = Int(answer.status)
        switch code {
        case 0: return .answered(status: status, body: answer.body.map { Array(UnsafeBufferPointer(start: $0, count: answer.body_len)) } ?? [])
        case ADORCH_HTTP_CUT: return .cut(status: status, bytes: answer.body_len)
        case _ where adorch_http_timed_out(code) != 0: return .timeout
        default:
            let words = withUnsafeBytes(of: answer.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            return .failed(Failure(words: words, isTLS: adorch_http_tls_failed(code) != 0, isForGood: adorch_http_failed_for_good(code) != 0))
        }
    }
}

private extension Array where Element == String {
    /// The strings as C strings, alive for `body`.
    func withCStrings<R>(_ body: (UnsafeBufferPointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return copies.map { UnsafePointer($0) }.withUnsafeBufferPointer(body)
    }
}
