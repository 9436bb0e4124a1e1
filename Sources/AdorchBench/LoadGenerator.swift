import CAdorchLoad
import Foundation

/// The text of a NUL-terminated C buffer.
func text(of buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Requests/s and latency percentiles of one run, whoever served it.
public struct LatencyFigures: Sendable {
    public var name: String
    public var connections: Int
    public var requests: Int
    public var errors: Int
    public var requestsPerSecond: Double
    /// Milliseconds.
    public var p50: Double
    public var p99: Double
    public var p999: Double
    public var firstError: String?
}

/// The control API under load, through the C epoll client (one request in flight per
/// connection, pipelining off, like redis-benchmark's default).
public enum LoadGenerator {
    public enum Call: Sendable {
        case getInfo
        case showReport(slot: String)

        var name: String {
            switch self {
            case .getInfo: "adorch GetInfo"
            case .showReport: "adorch Show + Report"
            }
        }
    }

    public static func run(socket: String, connections: Int, requests: Int, call: Call) throws -> LatencyFigures {
        var result = adorch_load_result()
        var message = [CChar](repeating: 0, count: 512)
        let slot: String
        let kind: adorch_load_call
        switch call {
        case .getInfo: (slot, kind) = ("", ADORCH_LOAD_GET_INFO)
        case .showReport(let s): (slot, kind) = (s, ADORCH_LOAD_SHOW_REPORT)
        }
        let rc = adorch_load_run(socket, Int32(connections), UInt64(requests), kind, slot, "bench-user", &result, &message, message.count)
        guard rc == 0 else { throw BenchError("\(call.name) at \(connections) connections: \(text(of: message))") }
        defer { free(result.latencies_ns) }
        let latencies = UnsafeBufferPointer(start: result.latencies_ns, count: Int(result.answered)).sorted()
        func percentile(_ p: Double) -> Double {
            Double(latencies[min(latencies.count - 1, Int((p * Double(latencies.count)).rounded(.up)) - 1)]) / 1e6
        }
        let firstError = withUnsafeBytes(of: result.first_error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return LatencyFigures(name: call.name, connections: connections, requests: Int(result.answered), errors: Int(result.errors),
                              requestsPerSecond: Double(result.answered) / result.seconds,
                              p50: percentile(0.50), p99: percentile(0.99), p999: percentile(0.999),
                              firstError: firstError.isEmpty ? nil : firstError)
    }

    /// Subscribers attached to the daemon's event stream while something else is measured.
    public final class Subscribers {
        private let handle: OpaquePointer

        public init(socket: String, count: Int) throws {
            var message = [CChar](repeating: 0, count: 512)
            guard let handle = adorch_subscribers_start(socket, Int32(count), &message, message.count) else {
                throw BenchError("\(count) subscribers: \(text(of: message))")
            }
            self.handle = handle
        }

        public var events: Int { Int(adorch_subscribers_events(handle)) }

        /// Waits until the subscribers received at least `count` messages in all (each
        /// subscription's first says it is in place).
        public func wait(forEvents count: Int, timeout: Duration = .seconds(30)) throws {
            let deadline = ContinuousClock.now + timeout
            while events < count {
                guard ContinuousClock.now < deadline else { throw BenchError("subscribers: \(events) of \(count) messages within \(timeout)") }
                usleep(10_000)
            }
        }

        @discardableResult
        public func stop() -> Int { Int(adorch_subscribers_stop(handle)) }
    }
}
