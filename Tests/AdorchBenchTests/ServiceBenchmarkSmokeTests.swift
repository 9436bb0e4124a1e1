import AdorchBench
import Foundation
import XCTest

/// The daemon benchmarks in their smoke size, against the debug adorchd and sim plugin
/// beside this test bundle: every part runs end to end and gives sane figures, so `make
/// bench` cannot rot. Only the shape of the figures is checked, never their speed.
final class ServiceBenchmarkSmokeTests: XCTestCase {
    private let products = Bundle.main.bundleURL
    private var benchmarks: ServiceBenchmarks {
        ServiceBenchmarks(adorchd: products.appendingPathComponent("adorchd").path, pluginDir: products.path, scale: .smoke)
    }

    func testTheControlAPIPartMeasuresAdorchAndRedisSideBySide() throws {
        let section = try benchmarks.controlAPI()
        let names = Set(section.rows.map(\.name))
        XCTAssertEqual(names, ["redis PING", "redis GET", "adorch GetInfo", "adorch Show + Report"])
        XCTAssertEqual(section.rows.count, 4 * ServiceScale.smoke.connections.count)
        for row in section.rows {
            XCTAssertEqual(row.requests, ServiceScale.smoke.requests, row.name)
            XCTAssertEqual(row.errors, 0, "\(row.name) at \(row.connections): \(row.firstError ?? "")")
            XCTAssertGreaterThan(row.requestsPerSecond, 0, row.name)
            XCTAssertTrue(0 < row.p50 && row.p50 <= row.p99 && row.p99 <= row.p999, "\(row.name): \(row.p50) \(row.p99) \(row.p999)")
        }
        XCTAssertEqual(section.targets.count, 0, "the targets are at 64 connections, not in the smoke run")
        XCTAssertTrue(section.markdown.contains("| adorch Show + Report | 16"), section.markdown)
    }

    func testTheFootprintPartReadsMemoryStartAndIdleCPU() throws {
        let section = try benchmarks.footprint()
        let m = section.measures
        print("ServiceBenchmarkSmokeTests: RSS \(m["rss_one_per_slot"] ?? 0) at one ad per slot, \(m["rss_full"] ?? 0) full, \(m["bytes_per_ad"] ?? 0) bytes per ad")
        XCTAssertGreaterThan(m["idle_peak_rss"] ?? 0, 1_000_000)
        XCTAssertGreaterThan(m["rss_full"] ?? 0, m["rss_one_per_slot"] ?? .infinity, "more ready ads, more memory")
        XCTAssertGreaterThan(m["bytes_per_ad"] ?? 0, 0)
        XCTAssertGreaterThan(m["ready_ms"] ?? 0, 0)
        XCTAssertTrue((0..<1).contains(m["idle_cpu_share"] ?? -1))
        XCTAssertEqual(section.targets.count, 3)
    }

    func testTheScalePartComparesFewAndManySlotsAndSubscribers() throws {
        let section = try benchmarks.scaling()
        XCTAssertEqual(section.rows.map(\.name), ["10 slots, 0 subscribers", "200 slots, 0 subscribers", "10 slots, 1 subscribers", "10 slots, 20 subscribers"])
        for row in section.rows {
            XCTAssertEqual(row.requests, ServiceScale.smoke.scaleRequests, row.name)
            XCTAssertEqual(row.errors, 0, "\(row.name): \(row.firstError ?? "")")
        }
        XCTAssertEqual(section.targets.count, 1)
    }

    func testTheIsolationPartComparesBothModesAndTimesKilledHosts() throws {
        let section = try benchmarks.isolation()
        XCTAssertEqual(section.rows.map { "\($0.name) \($0.connections)" },
                       ["sim in-process 1", "sim process 1", "sim in-process 64", "sim process 64"])
        for row in section.rows {
            XCTAssertEqual(row.requests, ServiceScale.smoke.requests, row.name)
            XCTAssertEqual(row.errors, 0, "\(row.name) at \(row.connections): \(row.firstError ?? "")")
        }
        XCTAssertEqual(section.targets.count, 3, "the cost at 1 and 64 connections, the recovery")
        XCTAssertGreaterThan(section.measures["recovery_median_ms"] ?? 0, 0)
        XCTAssertTrue(section.markdown.contains("| a new ad shown "), section.markdown)
    }
}
