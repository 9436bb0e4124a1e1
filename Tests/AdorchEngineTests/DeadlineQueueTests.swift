import XCTest

@testable import AdorchEngine

/// The engine's timer queue against the obvious model: a dictionary scanned in full.
final class DeadlineQueueTests: XCTestCase {
    func testItAgreesWithAFullScanThroughRandomSetsMovesAndRemovals() {
        var queue = DeadlineQueue<Int>()
        var model: [Int: UInt64] = [:]
        var random = SplitMix64(seed: 7)
        var now: UInt64 = 0
        for step in 0..<20_000 {
            let key = Int(random.next() % 300)
            switch random.next() % 4 {
            case 0, 1:
                let at = now + random.next() % 1_000
                queue.set(key, at: Moment(nanoseconds: at))
                model[key] = at
            case 2:
                queue.remove(key)
                model[key] = nil
            default:
                now += random.next() % 50
                let expected = model.filter { $0.value <= now }.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.map(\.key)
                XCTAssertEqual(queue.popDue(at: Moment(nanoseconds: now)), expected, "step \(step)")
                for key in expected { model[key] = nil }
            }
            XCTAssertEqual(queue.count, model.count)
            XCTAssertEqual(queue.first?.at.nanoseconds, model.values.min(), "step \(step)")
            XCTAssertEqual(queue.moment(of: key)?.nanoseconds, model[key])
        }
    }
}
