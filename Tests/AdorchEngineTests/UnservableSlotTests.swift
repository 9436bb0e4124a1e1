import XCTest

@testable import AdorchEngine

/// A slot whose waterfall names no available plugin cannot fill, and says so: in its
/// status and to Show, instead of "being refilled" forever.
final class UnservableSlotTests: XCTestCase {
    private let slots = [
        SlotConfig(id: "ok", format: .interstitial, waterfall: [WaterfallEntry(plugin: "a"), WaterfallEntry(plugin: "ghost")]),
        SlotConfig(id: "dead", format: .interstitial, waterfall: [WaterfallEntry(plugin: "ghost"), WaterfallEntry(plugin: "gone"),
                                                                  WaterfallEntry(plugin: "ghost")]),
    ]

    func testASlotWithNoAvailablePluginIsUnservableUntilOneComes() {
        var engine = Engine(slots: slots, plugins: ["a"], settings: .init(backoffJitter: 0), seed: 1)
        let now = Moment(nanoseconds: 1_000_000_000)
        _ = engine.advance(to: now)
        XCTAssertNil(engine.missingPlugins(of: "ok"), "one of its plugins is there")
        XCTAssertEqual(engine.missingPlugins(of: "dead"), ["ghost", "gone"])
        XCTAssertNil(engine.missingPlugins(of: "nowhere"))
        XCTAssertEqual(engine.slotStatuses(at: now).map(\.missingPlugins), [nil, ["ghost", "gone"]])
        XCTAssertEqual(engine.show(slot: "dead", userID: nil, privacy: nil, now: now).0, .failure(.unservable(slot: "dead", missingPlugins: ["ghost", "gone"])))
        XCTAssertEqual(engine.show(slot: "ok", userID: nil, privacy: nil, now: now).0, .failure(.noAdReady(slot: "ok")), "loading: only not ready yet")

        _ = engine.setAvailablePlugins(["a", "gone"], now: now)
        XCTAssertNil(engine.missingPlugins(of: "dead"))
        XCTAssertEqual(engine.show(slot: "dead", userID: nil, privacy: nil, now: now).0, .failure(.noAdReady(slot: "dead")))
    }
}
