@testable import AdorchDaemon
import AdorchEngine
import XCTest

/// The renderer's two formats, the histogram's buckets, the [metrics] address.
final class MetricsTextTests: XCTestCase {
    private func families() -> [MetricFamily] {
        var shows = MetricFamily("adorch_shows", .counter, help: "Shows.")
        shows.add(3, [("slot", "a")])
        var build = MetricFamily("adorch_build", .info, help: "Version.")
        build.add(1, [("version", "1.2")])
        var latency = MetricFamily("adorch_show_duration_seconds", .histogram, unit: "seconds", help: "Show time.")
        var histogram = LatencyHistogram()
        histogram.observe(.microseconds(200))
        histogram.observe(.milliseconds(3))
        histogram.observe(.seconds(120))
        latency.histograms.append(([("slot", "a")], histogram))
        let empty = MetricFamily("adorch_empty", .gauge, help: "Nothing.")
        return [shows, build, latency, empty]
    }

    func testTheTextFormatNamesCounterFamiliesWithTotalAndHasNoEOF() {
        let text = MetricsText.render(families(), as: .text)
        XCTAssertTrue(text.hasPrefix("# HELP adorch_shows_total Shows.\n# TYPE adorch_shows_total counter\nadorch_shows_total{slot=\"a\"} 3\n"), text)
        XCTAssertTrue(text.contains("# TYPE adorch_build_info gauge\nadorch_build_info{version=\"1.2\"} 1\n"), text)
        XCTAssertFalse(text.contains("# UNIT"))
        XCTAssertFalse(text.contains("# EOF"))
        XCTAssertFalse(text.contains("adorch_empty"), "a family without samples is left out")
    }

    func testOpenMetricsHasUnitsInfoAndEOF() {
        let text = MetricsText.render(families(), as: .openmetrics)
        XCTAssertTrue(text.hasPrefix("# HELP adorch_shows Shows.\n# TYPE adorch_shows counter\nadorch_shows_total{slot=\"a\"} 3\n"), text)
        XCTAssertTrue(text.contains("# TYPE adorch_build info\nadorch_build_info{version=\"1.2\"} 1\n"), text)
        XCTAssertTrue(text.contains("# TYPE adorch_show_duration_seconds histogram\n# UNIT adorch_show_duration_seconds seconds\n"), text)
        XCTAssertTrue(text.hasSuffix("# EOF\n"))
    }

    func testHistogramBucketsAreCumulativeWithInfSumAndCount() {
        let text = MetricsText.render(families(), as: .text)
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_bucket{slot=\"a\",le=\"0.0005\"} 1\n"), text)
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_bucket{slot=\"a\",le=\"0.001\"} 1\n"), text)
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_bucket{slot=\"a\",le=\"0.005\"} 2\n"), text)
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_bucket{slot=\"a\",le=\"1.0\"} 2\n"), "le as a float: \(text)")
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_bucket{slot=\"a\",le=\"60.0\"} 2\n"), text)
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_bucket{slot=\"a\",le=\"+Inf\"} 3\n"), text)
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_sum{slot=\"a\"} 120.0032\n"), text)
        XCTAssertTrue(text.contains("adorch_show_duration_seconds_count{slot=\"a\"} 3\n"), text)
        XCTAssertEqual(text.components(separatedBy: "_bucket{").count - 1, LatencyHistogram.bounds.count + 1)
    }

    func testAValueOnABoundCountsInThatBucket() {
        var histogram = LatencyHistogram()
        histogram.observe(.milliseconds(1))
        XCTAssertEqual(histogram.cumulative[LatencyHistogram.bounds.firstIndex(of: 0.001)!], 1)
        XCTAssertEqual(histogram.cumulative[LatencyHistogram.bounds.firstIndex(of: 0.0005)!], 0)
    }

    func testLabelValuesAndHelpAreEscaped() {
        var family = MetricFamily("adorch_x", .gauge, help: "a \\ b\nc")
        family.add(1, [("k", "q\"uote\\back\nline")])
        let text = MetricsText.render([family], as: .text)
        XCTAssertTrue(text.contains("# HELP adorch_x a \\\\ b\\nc\n"), text)
        XCTAssertTrue(text.contains("adorch_x{k=\"q\\\"uote\\\\back\\nline\"} 1\n"), text)
    }

    func testTheAcceptHeaderChoosesTheFormat() {
        XCTAssertEqual(MetricsFormat.negotiated(accept: nil), .text)
        XCTAssertEqual(MetricsFormat.negotiated(accept: "text/plain;version=0.0.4;q=0.3,*/*;q=0.1"), .text)
        XCTAssertEqual(MetricsFormat.negotiated(accept: "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"), .openmetrics)
        // Prometheus 2.42's own header.
        XCTAssertEqual(MetricsFormat.negotiated(accept: "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"), .openmetrics)
        XCTAssertEqual(MetricsFormat.negotiated(accept: "application/openmetrics-text;q=0"), .text, "q=0 means not acceptable")
        XCTAssertEqual(MetricsFormat.negotiated(accept: "application/openmetrics-textx"), .text, "another media type")
        XCTAssertEqual(MetricsFormat.negotiated(accept: "text/plain, application/openmetrics-text;q=0.5"), .text, "text/plain preferred")
    }

    func testARequestHeadEndsAtABlankLineOfEitherLineEndAndJoinsItsAcceptHeaders() {
        XCTAssertNil(HTTPRequestHead(Array("GET /metrics HTTP/1.1\r\nHost: x\r\n".utf8)), "not whole yet")
        let bare = HTTPRequestHead(Array("GET /metrics?x=1 HTTP/1.0\nAccept: text/plain\n\n".utf8))
        XCTAssertEqual(bare?.method, "GET")
        XCTAssertEqual(bare?.path, "/metrics")
        XCTAssertEqual(bare?.isHTTP1, true)
        XCTAssertEqual(bare?.accept, " text/plain")
        let two = HTTPRequestHead(Array("GET /metrics HTTP/1.1\r\nAccept: text/plain;q=0.1\r\naccept: application/openmetrics-text\r\n\r\n".utf8))
        XCTAssertEqual(MetricsFormat.negotiated(accept: two?.accept), .openmetrics, "a second Accept header counts")
        XCTAssertEqual(HTTPRequestHead(Array("BREW /pot\r\n\r\n".utf8))?.isHTTP1, false)
    }

    func testListenAddresses() {
        XCTAssertEqual(MetricsAddress.parse("127.0.0.1:9464"), MetricsAddress(host: "127.0.0.1", port: 9464, isIPv6: false))
        XCTAssertEqual(MetricsAddress.parse("[::1]:9464"), MetricsAddress(host: "::1", port: 9464, isIPv6: true))
        for bad in ["", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "localhost:9464", "::1:9464", "[::1]9464", "127.0.0.1:+80"] {
            XCTAssertNil(MetricsAddress.parse(bad), bad)
        }
        XCTAssertTrue(MetricsAddress.parse("127.8.0.1:1")!.isLoopback)
        XCTAssertFalse(MetricsAddress.parse("0.0.0.0:1")!.isLoopback)
        XCTAssertFalse(MetricsAddress.parse("[::]:1")!.isLoopback)
    }

    func testTheListenerIsOffByDefault() throws {
        XCTAssertNil(DaemonConfig.embeddedDefault().metrics)
        XCTAssertNil(try DaemonConfig.parse(toml: "[metrics]\n", source: "t").metrics)
        XCTAssertEqual(try DaemonConfig.parse(toml: "[metrics]\nlisten = \"127.0.0.1:9464\"\n", source: "t").metrics?.port, 9464)
    }
}
