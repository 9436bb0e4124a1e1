import AdorchEngine
import AdorchRewards
import AdorchVarlink
import Logging
import XCTest

@testable import AdorchDaemon

final class ViewerTests: XCTestCase {
    private func config(privateSlotUsers: Set<UInt32>) -> DaemonConfig {
        var config = DaemonConfig.embeddedDefault()
        config.access = AccessPolicy(manager: Audience(users: [4330], groups: [7100]),
                                     slots: ["private": Audience(users: privateSlotUsers, groups: [])])
        return config
    }

    private func viewer(_ uid: UInt32, groups: [UInt32] = [], _ gate: CallGate) -> Viewer {
        Viewer(peer: PeerCredentials(pid: 1, uid: uid, gid: uid, groups: groups), gate: gate)
    }

    func testAnAppSeesTheSlotsItMayUseAndTheManagerSideSeesAll() {
        let gate = CallGate(config(privateSlotUsers: [4322]), logger: Logger(label: "test"))
        let app = viewer(4321, gate), privateUser = viewer(4322, gate)
        XCTAssertTrue(app.sees(slot: "r"))
        XCTAssertFalse(app.sees(slot: "private"))
        XCTAssertTrue(privateUser.sees(slot: "private"))
        XCTAssertFalse(app.sees(slot: nil), "an event of no slot is the operator's")
        for manager in [viewer(0, gate), viewer(4330, gate), viewer(5000, groups: [7100], gate)] {
            XCTAssertTrue(manager.sees(slot: "private"))
            XCTAssertTrue(manager.sees(slot: nil))
            XCTAssertEqual(manager.rewardReader, .everyone)
        }
        // The ledger is asked for what sees(heldBy:in:) admits: its own, and those with no
        // holder recorded outside the slots it may not use.
        XCTAssertEqual(app.rewardReader, .holder(4321, unheldHiddenIn: ["private"]))
        XCTAssertEqual(privateUser.rewardReader, .holder(4322, unheldHiddenIn: []))
        XCTAssertFalse(Viewer(peer: nil, gate: gate).sees(slot: nil))
        XCTAssertEqual(Viewer(peer: nil, gate: gate).rewardReader.holder, Int64(UInt32.max), "no credentials: no one's rewards")
        var closed = config(privateSlotUsers: [])
        closed.access.ads = Audience(users: [4322], groups: [])
        XCTAssertEqual(viewer(4321, CallGate(closed, logger: Logger(label: "test"))).rewardReader, .holder(4321, unheldHiddenIn: nil),
                       "a uid io.adorch.Ads does not admit may use no slot: no row without a holder is its")
    }

    func testARewardIsItsHoldersAndOneWithNoHolderGoesToTheSlotsUsers() {
        let gate = CallGate(config(privateSlotUsers: [4322]), logger: Logger(label: "test"))
        XCTAssertTrue(viewer(4321, gate).sees(EngineEvent(.rewardGranted, slot: "r", userID: "u", holder: 4321)))
        XCTAssertFalse(viewer(4322, gate).sees(EngineEvent(.rewardGranted, slot: "r", userID: "u", holder: 4321)))
        XCTAssertTrue(viewer(0, gate).sees(EngineEvent(.rewardGranted, slot: "r", userID: "u", holder: 4321)))
        XCTAssertTrue(viewer(4322, gate).sees(EngineEvent(.rewardGranted, slot: "r", userID: "u")))
        XCTAssertFalse(viewer(4321, gate).sees(heldBy: nil, in: "private"))
        XCTAssertTrue(viewer(4322, gate).sees(heldBy: nil, in: "private"))
    }

    /// Issue 32: an event about an ad a uid holds tells who watched what (its user id, and by
    /// its network the viewer's privacy class): another app sharing the slot never sees it.
    func testAnEventAboutAHeldAdIsItsHoldersAndTheManagerSidesAlone() {
        let gate = CallGate(config(privateSlotUsers: [4322]), logger: Logger(label: "test"))
        let held = [
            EngineEvent(.adShown, slot: "r", adID: 1, network: "kids", userID: "viewer-secret-1", holder: 4321),
            EngineEvent(.adEvent, slot: "r", adID: 1, network: "kids", viewerEvent: .click, holder: 4321),
            EngineEvent(.adLoaded, slot: "r", adID: 2, network: "kids", holder: 4321),
            EngineEvent(.session, slot: "r", adID: 3, network: "kids", holder: 4321),
        ]
        for event in held {
            XCTAssertTrue(viewer(4321, gate).sees(event), "\(event.kind)")
            XCTAssertFalse(viewer(4322, gate).sees(event), "\(event.kind)")
            XCTAssertFalse(viewer(4323, gate).sees(event), "\(event.kind)")
            XCTAssertFalse(Viewer(peer: nil, gate: gate).sees(event), "no credentials: no one's ads")
            for manager in [viewer(0, gate), viewer(4330, gate), viewer(5000, groups: [7100], gate)] {
                XCTAssertTrue(manager.sees(event), "\(event.kind)")
            }
        }
        // Events of ads no app holds yet go to every user of the slot, as before.
        let preload = EngineEvent(.adLoaded, slot: "r", adID: 4, network: "kids")
        XCTAssertTrue(viewer(4321, gate).sees(preload))
        XCTAssertTrue(viewer(4322, gate).sees(preload))
        XCTAssertFalse(viewer(4321, gate).sees(EngineEvent(.adLoaded, slot: "private", adID: 5, network: "kids")))
    }

    func testAReloadNarrowsWhatAnOpenViewerSees() {
        let gate = CallGate(config(privateSlotUsers: [4321]), logger: Logger(label: "test"))
        let app = viewer(4321, gate)
        XCTAssertTrue(app.sees(slot: "private"))
        XCTAssertEqual(app.rewardReader, .holder(4321, unheldHiddenIn: []))
        gate.update(config(privateSlotUsers: []))
        XCTAssertFalse(app.sees(slot: "private"))
        XCTAssertEqual(app.rewardReader, .holder(4321, unheldHiddenIn: ["private"]))
    }
}
