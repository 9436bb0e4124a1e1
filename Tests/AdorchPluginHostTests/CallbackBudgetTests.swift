@testable import AdorchPluginHost
import Logging
import XCTest

/// plugin.h: callbacks a host's calls earned pass even when the second's bound is spent, so a
/// busy plugin's answers are never dropped; what is earned is kept up to one slice's worth.
final class CallbackBudgetTests: XCTestCase {
    private let logger = Logger(label: "callback-budget-test")

    /// Admits until the window refuses (within its slice of the second: 1,000 calls take
    /// microseconds; a slice that ends between them only makes the loop longer).
    private func exhaust(_ budget: CallbackBudget) throws {
        for _ in 0..<1_000_000 where !budget.admit(warning: logger) { return }
        XCTFail("the window never refused")
    }

    func testEarnedCallbacksPassWhenTheWindowIsSpent() throws {
        let budget = CallbackBudget()
        try exhaust(budget)
        budget.earn(CallbackBounds.callbacksPerLoad)
        for i in 0..<CallbackBounds.callbacksPerLoad {
            XCTAssertTrue(budget.admit(warning: logger), "earned callback \(i + 1) of a load")
        }
        XCTAssertEqual(budget.balance, 0)
        budget.earn(CallbackBounds.callbacksPerShow)
        XCTAssertEqual(budget.balance, CallbackBounds.callbacksPerShow)
        XCTAssertTrue(budget.admit(warning: logger))
        XCTAssertEqual(budget.balance, CallbackBounds.callbacksPerShow - 1, "an admitted callback spends what was earned first")
    }

    func testWhatIsEarnedIsKeptUpToOneSlice() {
        let budget = CallbackBudget()
        for _ in 0..<(CallbackBounds.mostCallbacksEarned) { budget.earn(CallbackBounds.callbacksPerShow) }
        XCTAssertEqual(budget.balance, CallbackBounds.mostCallbacksEarned)
        XCTAssertEqual(CallbackBounds.mostCallbacksEarned, CallbackBounds.callbacksPerSecond / CallbackBounds.callbackSlicesPerSecond)
    }

    /// Event details are bounded by their bytes in a second: the detail that would pass the
    /// bound is refused, a smaller one that fits is still admitted.
    func testDetailsAreBoundedByTheirBytesInASecond() {
        let details = SecondWindow(perSecond: CallbackBounds.detailBytesPerSecond)
        let full = CallbackBounds.textBytes
        let fitting = CallbackBounds.detailBytesPerSecond / full
        for i in 0..<fitting { XCTAssertTrue(details.admit(cost: full).admitted, "detail \(i)") }
        XCTAssertFalse(details.admit(cost: full).admitted, "a full detail past the second's bytes")
        XCTAssertFalse(details.admit(cost: 1).admitted, "the second's bytes are all spent")
    }
}
