import AdorchEngine
import AdorchPluginHost
import CAdorchPlugin
import XCTest

/// plugin.h's enums are the one source of the ABI's numbers: the engine's and the host's
/// names for them agree both ways, and a number the header does not have is nil rather than
/// an enum value a switch would trap on.
final class PluginABINumbersTests: XCTestCase {
    func testFormatsMapBothWays() {
        for format in AdFormat.allCases { XCTAssertEqual(AdFormat(abi: format.abi), format) }
        XCTAssertEqual(AdFormat.allCases.map(\.abi.rawValue), Array(1...7))
    }

    func testNumbersTheHeaderDoesNotHaveAreNil() {
        // Swift's own init(rawValue:) accepts them: that is why abiValue: exists.
        XCTAssertNotNil(adorch_format(rawValue: 20))
        for n: UInt32 in [0, 8, 20] { XCTAssertNil(adorch_format(abiValue: n), "\(n)") }
        for n: UInt32 in [0, 32, 1000] { XCTAssertNil(adorch_event(abiValue: n), "\(n)") }
        for n: Int32 in [-2, 0, 9] { XCTAssertNil(adorch_error(abiValue: n), "\(n)") }
        XCTAssertEqual(adorch_event(abiValue: 30), .ADORCH_EVENT_THIRD_QUARTILE)
        XCTAssertEqual(adorch_event(abiValue: 31), .ADORCH_EVENT_LOSS)
        XCTAssertEqual(AdErrorCode(abiValue: 3), .noFill)
        XCTAssertEqual(AdErrorCode(abiValue: 8), .pluginFault)
        XCTAssertEqual(AdErrorCode(abiValue: -40020), .pluginFault)
    }

    func testEventsKeepTheirNamesAndDirections() {
        let fromPlugins = (0...40).compactMap { adorch_event(abiValue: $0) }.filter(\.isReportedByPlugins).map(\.rawValue)
        XCTAssertEqual(fromPlugins, Array(1...24))
        XCTAssertEqual(ViewerEvent.allCases.map(\.abi.rawValue), [2, 3, 4, 5, 6, 27, 28, 29, 30])
        XCTAssertEqual(ViewerEvent.allCases.map(\.vocabularyName),
                       ["impression", "click", "closed", "play_finished", "skipped", "play_started", "first_quartile", "midpoint", "third_quartile"])
        XCTAssertEqual([SessionControl.pause.abi.rawValue, SessionControl.resume.abi.rawValue], [25, 26])
        XCTAssertEqual(adorch_event.ADORCH_EVENT_SHOW_FAILED.vocabularyName, "failed_to_display")
        XCTAssertEqual(PluginABI.minor(introducing: .ADORCH_EVENT_DISLIKE), 0)
        XCTAssertEqual(PluginABI.minor(introducing: .ADORCH_EVENT_ADS_AVAILABLE), 1)
        XCTAssertEqual(PluginABI.minor(introducing: .ADORCH_FORMAT_INTERACTIVE), 1)
        XCTAssertEqual(PluginABI.minor(introducing: .ADORCH_EVENT_LOSS), 4)
        XCTAssertFalse(adorch_event.ADORCH_EVENT_LOSS.isReportedByPlugins, "the host tells it; a plugin never sends it")
    }

    /// The loss reasons are OpenRTB's codes, so a bidder puts them in its lurl as they are.
    func testLossReasonsAreOpenRTBsCodesBothWays() {
        let losses: [AuctionLoss] = [.expired, .belowFloor, .lostToHigherBid]
        XCTAssertEqual(losses.map(\.abi.rawValue), [2, 100, 102])
        for loss in losses { XCTAssertEqual(AuctionLoss(abiValue: UInt64(loss.abi.rawValue)), loss) }
        for n: UInt64 in [0, 1, 101, 103] { XCTAssertNil(AuctionLoss(abiValue: n), "\(n)") }
    }

    /// 1.3 grew the request at its end (the evolution rule), and its margin is the one the
    /// guide and the validator name.
    func testOneThreeAddedLoadUIDAtTheRequestsEndAndTheDeadlineMargin() {
        XCTAssertGreaterThanOrEqual(PluginABI.minor, 3)
        XCTAssertEqual(MemoryLayout<adorch_request>.offset(of: \.load_uid)! + MemoryLayout<UnsafePointer<CChar>>.size,
                       MemoryLayout<adorch_request>.offset(of: \.privacy), "1.4's privacy comes right after it")
        XCTAssertGreaterThan(MemoryLayout<adorch_request>.offset(of: \.load_uid)!, MemoryLayout<adorch_request>.offset(of: \.slot_type)!)
        XCTAssertEqual(PluginABI.deadlineMargin, .milliseconds(50))
        let uids = (0..<1000).map { _ in newLoadUID() }
        XCTAssertEqual(Set(uids).count, 1000)
        XCTAssertTrue(uids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) && $0 == $0.lowercased() }, "\(uids.prefix(3))")
    }

    /// 1.4 grew the request at its end again, with the privacy its minor brought and the slot's floor.
    func testOneFourAddedPrivacyAndTheFloorAtTheRequestsEnd() {
        XCTAssertGreaterThanOrEqual(PluginABI.minor, PluginABI.privacyMinor)
        XCTAssertEqual(PluginABI.privacyMinor, 4)
        XCTAssertEqual(MemoryLayout<adorch_request>.offset(of: \.privacy)! + MemoryLayout<UnsafeRawPointer>.size,
                       MemoryLayout<adorch_request>.offset(of: \.bid_floor))
        XCTAssertEqual(MemoryLayout<adorch_request>.offset(of: \.bid_floor), MemoryLayout<adorch_request>.size - MemoryLayout<Double>.size)
        XCTAssertEqual(MemoryLayout<adorch_privacy>.offset(of: \.struct_size), 0)
    }
}
