import AdorchVarlink
import Foundation
import Logging
import XCTest

@testable import AdorchDaemon

/// The io.adorch.* vocabulary is declared once (AdsInterface.swift, ManagerInterface.swift,
/// ConnectionErrors.swift): every route has its IDL method and every IDL method its route, and
/// each error an IDL declares builds a reply of exactly its declared parameters.
final class InterfaceDeclarationTests: XCTestCase {
    func testEveryRouteHasItsIDLMethodAndEveryIDLMethodARoute() {
        let config = DaemonConfig.embeddedDefault()
        let logger = Logger(label: "test")
        let runtime = EngineRuntime(config: config, options: DaemonOptions(), stateDir: NSTemporaryDirectory(),
                                    gate: CallGate(config, logger: logger), logger: logger)
        let routed = MethodTable(runtime: runtime, serving: LockedServer()).routed
        for interface in MethodTable.interfaces {
            XCTAssertFalse(interface.methods.isEmpty, "\(interface.name) declares methods")
            for method in interface.methods {
                XCTAssertTrue(routed.contains("\(interface.name).\(method)"), "\(interface.name).\(method) is declared and has no route")
            }
        }
        let declared = Set(MethodTable.interfaces.flatMap { interface in interface.methods.map { "\(interface.name).\($0)" } })
        XCTAssertEqual(routed.subtracting(declared), [], "routes without an IDL method")
        XCTAssertEqual(routed.count, AdsMethod.allCases.count + ManagerMethod.allCases.count + DebugMethod.allCases.count)
    }

    /// The text served is the declarations': each method and error once, under its interface.
    func testEachInterfaceTextListsItsDeclaredMembersOnce() {
        func members(_ text: String, _ kind: String) -> [String] {
            text.split(separator: "\n").filter { $0.hasPrefix(kind + " ") }.map { String($0.dropFirst(kind.count + 1).prefix { $0.isLetter || $0.isNumber }) }
        }
        let cases: [(VarlinkInterface, [String], [String])] = [
            (.ads, AdsMethod.allCases.map(\.rawValue), AdsError.allCases.map(\.rawValue)),
            (.manager, ManagerMethod.allCases.map(\.rawValue), ManagerError.allCases.map(\.rawValue)),
            (.debug, DebugMethod.allCases.map(\.rawValue), DebugError.allCases.map(\.rawValue)),
            (.connection, [], ConnectionError.allCases.map(\.rawValue)),
        ]
        for (interface, methods, errors) in cases {
            XCTAssertTrue(interface.description.contains("\ninterface \(interface.name)\n"), interface.description)
            XCTAssertEqual(members(interface.description, "method").sorted(), methods.sorted(), interface.name)
            XCTAssertEqual(members(interface.description, "error").sorted(), errors.sorted(), interface.name)
            XCTAssertEqual(interface.methods, Set(methods))
        }
        XCTAssertEqual(AdsError.noAdReady.qualifiedName, "io.adorch.Ads.NoAdReady")
        XCTAssertEqual(ConnectionError.readerTooSlow.qualifiedName, "io.adorch.ReaderTooSlow")
    }

    /// An error reply carries its declared parameters; `?type` ones may be left out.
    func testAnErrorReplyIsBuiltFromItsDeclaration() {
        let error = AdsError.capped(["slot": "s", "rule": "pacing 1m per user", "retry_after_ms": 5, "message": "m"])
        XCTAssertEqual(error.name, "io.adorch.Ads.Capped")
        XCTAssertEqual(error.parameters["retry_after_ms"], 5)
        XCTAssertTrue(AdsError.capped.conforms(["slot": "s", "rule": "r", "retry_after_ms": 1, "message": "m"]))
        XCTAssertFalse(AdsError.capped.conforms(["slot": "s", "message": "m"]), "required parameters left out")
        XCTAssertFalse(AdsError.noAdReady.conforms(["slot": "s", "message": "m", "extra": 1]), "a parameter the IDL does not declare")
        XCTAssertTrue(AdsError.shuttingDown.conforms([:]))
        XCTAssertEqual(AdsError.loadFailed.declaration.fields.map(\.name), ["slot", "error", "message", "attempts"])
        XCTAssertEqual(AdsMethod.listSlots.declaration.fields.map(\.name), ["user_id"], "comments inside a signature are skipped")
        XCTAssertEqual(AdsMethod.listSlots.declaration.fields.map(\.optional), [true])
    }
}
