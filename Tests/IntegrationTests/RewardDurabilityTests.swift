import AdorchVarlink
import Foundation
import XCTest

/// Nothing a viewer earned is lost, and no app is told of a reward that is not on disk
/// (docs/rules.md, "Ledger first"): a real daemon whose state directory is a small tmpfs
/// filled to the last byte.
final class RewardDurabilityTests: XCTestCase {
    func testAFullDiskMakesCompleteANamedErrorAndTheRewardIsGrantedOnceSpaceReturns() throws {
        let disk = try smallDisk(megabytes: 4)
        let state = disk.appendingPathComponent("state")
        let daemon = try DaemonProcess(stateDir: state)
        defer { daemon.stop() }
        try daemon.waitFor("rewarded_main ready") { try daemon.slotStatus("rewarded_main")["ready"]?.intValue ?? 0 > 0 }
        let ad = try XCTUnwrap(try daemon.call("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": "u-full"])["ad"]?["id"]?.stringValue)
        let filler = disk.appendingPathComponent("filler").path
        fillDisk(filler)

        let (error, parameters) = try daemon.callExpectingError("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"])
        XCTAssertEqual(error, "io.adorch.Ads.LedgerFailed", "\(parameters)")
        XCTAssertTrue(parameters["message"]?.stringValue?.contains("written again every second") == true, "\(parameters)")
        XCTAssertTrue(daemon.log.contains("could not be written to the ledger yet"), daemon.log)
        XCTAssertEqual(try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-full"])["rewards"]?.arrayValue?.count, 0,
                       "nothing is announced that is not on disk")
        let (again, _) = try daemon.callExpectingError("io.adorch.Ads.Report", ["ad_id": .string(ad), "event": "complete"])
        XCTAssertEqual(again, "io.adorch.Ads.AdNotValid", "the completion is counted once: a second one is refused as ever")
        // A new rewarded ad is not handed out while its reward cannot be promised across a restart.
        try daemon.waitFor("rewarded_main refilled") { try daemon.slotStatus("rewarded_main")["ready"]?.intValue ?? 0 > 0 }
        let (unpromised, why) = try daemon.callExpectingError("io.adorch.Ads.Show", ["slot": "rewarded_main", "user_id": "u-full"])
        XCTAssertEqual(unpromised, "io.adorch.Ads.LedgerFailed", "\(why)")
        XCTAssertTrue(why["message"]?.stringValue?.contains("could not be promised in the ledger") == true, "\(why)")

        try FileManager.default.removeItem(atPath: filler)
        try daemon.waitForLog(["waiting rewards written to the ledger and announced"], timeout: .seconds(10))
        let rows = try daemon.call("io.adorch.Ads.ListRewards", ["user_id": "u-full"])["rewards"]?.arrayValue ?? []
        XCTAssertEqual(rows.count, 1, "the reward is granted once space returns, exactly once: \(rows)")
        XCTAssertEqual(rows.first?["ad_id"]?.stringValue, ad)
    }
}
