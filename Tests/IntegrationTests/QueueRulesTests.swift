import Foundation
import XCTest

/// The queue rules of docs/architecture.md, read off the source as CI runs it: the engine never
/// waits on the Varlink queue, and what the engine queue owns has one way in.
final class QueueRulesTests: XCTestCase {
    private func sources(_ folder: String) throws -> [(path: String, text: String)] {
        let root = packageRoot.appendingPathComponent(folder)
        let files = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        XCTAssertFalse(files.isEmpty, "no Swift files in \(folder)")
        return try files.sorted().map { ("\(folder)/\($0)", try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8)) }
    }

    /// The Varlink server waits on its own queue only in the entry points the main thread calls
    /// to start and stop it, and in `sweepNow`, a test's (its epoll thread is not a queue anyone
    /// waits on); the engine's side never calls those.
    func testNothingOnTheEngineQueueWaitsForTheVarlinkQueue() throws {
        let startAndStop = ["listen", "stopAccepting", "stop"]
        let waits = startAndStop + ["sweepNow"]
        for file in try sources("Sources/AdorchVarlink") where file.path.hasSuffix("VarlinkServer.swift") {
            var function = ""
            for line in file.text.split(separator: "\n") {
                if let name = line.firstMatch(of: /(?:func|var) (\w+)\b/)?.1 { function = String(name) }
                if line.contains("queue.sync") {
                    XCTAssertTrue(waits.contains(function), "\(file.path): \(function) waits on the Varlink queue: \(line)")
                }
            }
        }
        let engineSide = try sources("Sources/AdorchDaemon/Runtime") + sources("Sources/AdorchDaemon/State") + sources("Sources/AdorchDaemon/Metrics")
        for file in engineSide {
            for call in waits.map({ "server?.\($0)(" }) + waits.map({ "server.\($0)(" }) {
                XCTAssertFalse(file.text.contains(call), "\(file.path) calls \(call): a wait on the Varlink queue from the engine's side")
            }
        }
    }

    /// RuntimeState is made once, inside EngineRuntime, and held only by its QueueBound; nothing
    /// on the engine's side opts out of Sendable checking.
    func testTheEngineQueuesStateHasOneWayIn() throws {
        let daemon = try sources("Sources/AdorchDaemon")
        let makers = daemon.filter { $0.text.contains("RuntimeState(") }.map(\.path)
        XCTAssertEqual(makers, ["Sources/AdorchDaemon/Runtime/EngineRuntime.swift"])
        let runtime = try XCTUnwrap(daemon.first { $0.path.hasSuffix("Runtime/EngineRuntime.swift") }?.text)
        XCTAssertTrue(runtime.contains("private let state: QueueBound<RuntimeState>"), "the state is private to EngineRuntime, inside its QueueBound")
        XCTAssertEqual(runtime.components(separatedBy: "RuntimeState(").count, 2, "made once")
        for file in daemon where file.path.contains("/Runtime/") || file.path.contains("/State/") {
            XCTAssertFalse(file.text.contains("@unchecked Sendable"), "\(file.path) opts out of Sendable checking")
        }
    }
}
