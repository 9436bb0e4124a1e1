import AdorchLocking
import Foundation
import Synchronization

/// Elements handed to any number of consumers, each from the first: an AsyncStream may be
/// iterated by one task only, so each consumer gets a stream of its own. All are kept: they
/// are few (one ad's callbacks, one session's events, each ending with a last one).
final class Replay<Element: Sendable>: Sendable {
    private struct Consumer {
        let yield: @Sendable (Element) -> Void
        let finish: @Sendable ((any Error)?) -> Void
    }
    private struct State {
        var elements: [Element] = []
        var end: (any Error)??
        var consumers: [UUID: Consumer] = [:]
    }
    private let state = LockedValue(State())

    func yield(_ element: Element) {
        // Under the lock, so that a consumer joining meanwhile gets each element once, in order.
        state.withLock { state in
            guard state.end == nil else { return }
            state.elements.append(element)
            for consumer in state.consumers.values { consumer.yield(element) }
        }
    }

    func finish(throwing error: (any Error)? = nil) {
        // Outside the lock: a finished stream's onTermination takes it to forget its consumer.
        let consumers = state.withLock { state -> [Consumer] in
            guard state.end == nil else { return [] }
            state.end = .some(error)
            defer { state.consumers = [:] }
            return Array(state.consumers.values)
        }
        for consumer in consumers { consumer.finish(error) }
    }

    func throwingStream() -> AsyncThrowingStream<Element, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Element.self)
        join(Consumer(yield: { continuation.yield($0) }, finish: { continuation.finish(throwing: $0) })) { continuation.onTermination = $0 }
        return stream
    }

    func stream() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        join(Consumer(yield: { continuation.yield($0) }, finish: { _ in continuation.finish() })) { continuation.onTermination = $0 }
        return stream
    }

    private func join(_ consumer: Consumer, onTermination: (@escaping @Sendable (Any) -> Void) -> Void) {
        let key = UUID()
        state.withLock { state in
            for element in state.elements { consumer.yield(element) }
            if let end = state.end {
                consumer.finish(end)
            } else {
                state.consumers[key] = consumer
            }
        }
        onTermination { [weak self] _ in _ = self?.state.withLock { $0.consumers.removeValue(forKey: key) } }
    }
}
