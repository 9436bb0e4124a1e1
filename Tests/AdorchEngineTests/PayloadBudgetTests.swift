import XCTest

@testable import AdorchEngine

/// Engine.payloadBytesPerPlugin on a manual clock: a plugin's ready and shown ads hold at
/// most that many payload bytes; a load past it fails as the plugin's fault, and other
/// plugins are not held back by it.
final class PayloadBudgetTests: XCTestCase {
    private var engine = Engine(slots: [], plugins: [])
    private var now = Moment(nanoseconds: 1_000_000_000)
    private var effects: [Effect] = []
    /// Eight payloads of this size fill a plugin's budget exactly.
    private let eighth = Engine.payloadBytesPerPlugin / 8

    /// A JSON object of exactly `bytes` bytes (made from bytes: a debug build's String(repeating:) takes a second).
    private func payload(_ bytes: Int) -> String {
        String(decoding: Array(#"{"p":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: bytes - 8) + Array(#""}"#.utf8), as: UTF8.self)
    }

    private func start(_ slots: [SlotConfig], plugins: Set<String>) {
        engine = Engine(slots: slots, plugins: plugins, settings: SchedulerSettings(backoffJitter: 0, maxLoadsInFlightPerNetwork: 100), seed: 5)
        effects = engine.advance(to: now)
    }

    private func slot(_ id: String, _ format: AdFormat = .interstitial, buffer: Int = 1, plugin: String) -> SlotConfig {
        SlotConfig(id: id, format: format, buffer: buffer, ttl: .seconds(600),
                   waterfall: [WaterfallEntry(plugin: plugin, adUnitID: "u", timeout: .seconds(2))], count: format == .native ? 10 : 1)
    }

    /// Load orders not answered yet, oldest first.
    private var unanswered: [LoadOrder] = []

    /// Answers `plugin`'s oldest unanswered load with a payload of `bytes`; the events it made.
    private func fillNext(_ plugin: String = "a", bytes: Int) throws -> [EngineEvent] {
        unanswered += effects.compactMap { if case .load(let o) = $0 { o } else { nil } }
        effects = []
        let order = unanswered.remove(at: try XCTUnwrap(unanswered.firstIndex { $0.plugin == plugin }, "no load to \(plugin)"))
        let out = engine.pluginReported(.loaded(payloadJSON: payload(bytes), expiresIn: nil, price: 1), for: order.adID, from: plugin, now: now)
        effects += out
        return out.compactMap { if case .emit(let e) = $0 { e } else { nil } }
    }

    private func ready(_ slot: String) -> Int { engine.slotStatuses(at: now).first { $0.config.id == slot }!.ready }

    func testAPluginsPayloadsStopAtItsBudgetUntilOneOfItsAdsEnds() throws {
        start([slot("s", buffer: 10, plugin: "a"), slot("t", plugin: "b")], plugins: ["a", "b"])
        for _ in 0..<8 { XCTAssertTrue(try fillNext(bytes: eighth).contains { $0.kind == .adLoaded }) }
        XCTAssertEqual(engine.ads.payloadBytes(of: "a"), Engine.payloadBytesPerPlugin)
        // The ninth and tenth would take plugin a past its budget: each load fails as its fault, named.
        for _ in 0..<2 {
            let failed = try XCTUnwrap(try fillNext(bytes: eighth).first { $0.kind == .adFailed })
            XCTAssertEqual(failed.errorCode, .pluginFault)
            XCTAssertEqual(failed.network, "a")
            XCTAssertTrue(failed.message?.contains("Engine.payloadBytesPerPlugin") == true, failed.message ?? "")
        }
        XCTAssertEqual(ready("s"), 8)
        XCTAssertEqual(engine.ads.payloadBytes(of: "a"), Engine.payloadBytesPerPlugin, "a refused payload is not kept")
        XCTAssertEqual(engine.slotStatuses(at: now).first { $0.config.id == "s" }!.entries[0].lastError, .pluginFault)
        // Plugin b's budget is its own.
        XCTAssertTrue(try fillNext("b", bytes: eighth).contains { $0.kind == .adLoaded })
        XCTAssertEqual(engine.ads.payloadBytes(of: "b"), eighth)

        // A shown ad still open holds its payload; once it ends, its bytes are free again.
        let shown = try engine.show(slot: "s", userID: nil, privacy: nil, now: now).0.get()
        XCTAssertEqual(engine.ads.payloadBytes(of: "a"), Engine.payloadBytesPerPlugin)
        effects += engine.report(.close, for: shown.id, now: now).1
        XCTAssertEqual(engine.ads.payloadBytes(of: "a"), Engine.payloadBytesPerPlugin - eighth)
        now = now + .seconds(10)  // past the entry's backoff
        effects += engine.advance(to: now)
        XCTAssertTrue(try fillNext(bytes: eighth).contains { $0.kind == .adLoaded })
        XCTAssertEqual(engine.ads.payloadBytes(of: "a"), Engine.payloadBytesPerPlugin)
    }

    func testALoadWhoseAdsTogetherPassTheBudgetFailsAsThePluginsFault() throws {
        start([slot("n", .native, plugin: "a")], plugins: ["a"])
        let (accepted, out) = engine.load(slot: "n", LoadParameters(), privacy: nil, request: 1, now: now)
        XCTAssertNoThrow(try accepted.get())
        guard case .load(let order) = out.first else { return XCTFail("no load started") }
        let items = (0..<9).map { _ in PayloadItem(json: payload(eighth), hasHeadline: true) }
        let answer = engine.pluginReported(.loaded(payloadJSON: "{}", expiresIn: nil, price: 1, items: items), for: order.adID, from: "a", now: now)
        let completion = answer.compactMap { if case .completeLoad(1, let result) = $0 { result } else { nil } }.first
        guard case .failure(let failure) = completion else { return XCTFail("the Load was not refused: \(answer)") }
        XCTAssertEqual(failure.attempts.map(\.code), [.pluginFault])
        XCTAssertEqual(engine.ads.payloadBytes(of: "a"), 0)
    }
}
