import AdorchLocking
import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// The metrics an operator scrapes (docs/metrics.md): from the real daemon with the sim
/// plugin, through `adorchctl metrics` (checked by Debian's promtool) and through the
/// [metrics] listener, scraped by Debian's prometheus.
final class MetricsTests: XCTestCase {
    private let adorchctl = productsDirectory.appendingPathComponent("adorchctl").path
    private let adorchd = productsDirectory.appendingPathComponent("adorchd").path

    private let slot = """
    [[slots]]
    id = "s"
    format = "interstitial"
    buffer = 1
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=1 latency_ms=0"
    """

    /// `shows` Show calls on slot s, each once an ad is ready again.
    private func show(_ d: DaemonProcess, times shows: Int) throws {
        for _ in 0..<shows {
            try d.waitFor("an ad ready in s") { (try d.slotStatus("s")["ready"]?.intValue ?? 0) >= 1 }
            _ = try d.call("io.adorch.Ads.Show", ["slot": "s"])
        }
    }

    /// The value of the one sample `series` (name and labels, as printed) in `text`.
    private func value(_ series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
    }

    func testAdorchctlMetricsCountTheShowsAndLoadsAndPassPromtool() throws {
        let empty = """
        [[slots]]
        id = "empty"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "fill=0 latency_ms=0"
        """
        let d = try DaemonProcess(config: simConfig(slots: slot + "\n" + empty))
        defer { _ = d.stop() }
        XCTAssertEqual(try tcpSockets(of: d.pid), 0, "no [metrics] listen: no listener")
        // Every (slot, result) is there from the start, at 0.
        let fresh = try runCommand(adorchctl, ["metrics", "--socket", d.socket]).stdout
        for result in ["hit", "no_ad", "unservable", "display_failed", "interrupted"] {
            XCTAssertEqual(value(#"adorch_show_requests_total{slot="empty",result="\#(result)"}"#, in: fresh), 0, "\(result) before any Show")
        }
        XCTAssertEqual(value(#"adorch_show_duration_seconds_count{slot="empty"}"#, in: fresh), 0)
        try show(d, times: 3)
        try d.waitFor("a no-fill in slot empty") { (try d.slotStatus("empty")["counters"]?["no_fills"]?.intValue ?? 0) >= 1 }
        let run = try runCommand(adorchctl, ["metrics", "--socket", d.socket])
        XCTAssertEqual(run.status, 0, run.stderr)
        let text = run.stdout
        XCTAssertEqual(value(#"adorch_shows_total{slot="s"}"#, in: text), 3)
        XCTAssertEqual(value(#"adorch_show_requests_total{slot="s",result="hit"}"#, in: text), 3)
        XCTAssertEqual(value(#"adorch_show_duration_seconds_count{slot="s"}"#, in: text), 3)
        XCTAssertEqual(value(#"adorch_show_duration_seconds_bucket{slot="s",le="+Inf"}"#, in: text), 3)
        XCTAssertEqual(value(#"adorch_build_info{version="0.1.0"}"#, in: text), 1)
        // Every sim load that ended counts under its outcome, and was timed.
        let fills = try XCTUnwrap(value(#"adorch_loads_total{network="sim",outcome="filled"}"#, in: text))
        let noFills = try XCTUnwrap(value(#"adorch_loads_total{network="sim",outcome="no_fill"}"#, in: text))
        XCTAssertGreaterThanOrEqual(fills, 3)
        XCTAssertGreaterThanOrEqual(noFills, 1)
        XCTAssertEqual(value(#"adorch_load_duration_seconds_count{network="sim"}"#, in: text), fills + noFills)
        XCTAssertEqual(value(#"adorch_shows_total{slot="empty"}"#, in: text), 0)
        XCTAssertEqual(value(#"adorch_show_requests_total{slot="s",result="no_ad"}"#, in: text), 0)
        XCTAssertFalse(text.contains("# EOF"), "the text format has no # EOF")

        // docs/metrics.md lists every series the daemon prints.
        let docs = try String(contentsOf: packageRoot.appendingPathComponent("docs/metrics.md"), encoding: .utf8)
        let families = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        XCTAssertGreaterThan(families.count, 30)
        for family in families { XCTAssertTrue(docs.contains("| `\(family)` |"), "docs/metrics.md lists \(family)") }

        let lint = try promtool(["check", "metrics"], stdin: text)
        XCTAssertEqual(lint.status, 0, "promtool check metrics: \(lint.output)")

        let open = try runCommand(adorchctl, ["metrics", "--format", "openmetrics", "--socket", d.socket])
        XCTAssertEqual(open.status, 0, open.stderr)
        XCTAssertTrue(open.stdout.hasSuffix("# EOF\n"))
        XCTAssertTrue(open.stdout.contains("# TYPE adorch_shows counter\n"))
        XCTAssertTrue(open.stdout.contains("# UNIT adorch_show_duration_seconds seconds\n"))

        let bad = try runCommand(adorchctl, ["metrics", "--format", "json", "--socket", d.socket])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("InvalidParameter"), bad.stderr)
    }

    func testABadOrRemoteListenAddressIsRefusedByCheckConfig() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-metrics-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func check(_ metrics: String) throws -> (status: Int32, stdout: String, stderr: String) {
            let path = dir.appendingPathComponent("c.toml").path
            try (simConfig(slots: slot) + "\n[metrics]\n" + metrics).write(toFile: path, atomically: true, encoding: .utf8)
            return try runCommand(adorchd, ["--config", path, "--check-config", "--plugin-dir", productsDirectory.path])
        }
        for listen in ["localhost:9464", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "[::1:9464", "0.0.0.0:9464", "192.0.2.1:9464"] {
            let run = try check("listen = \"\(listen)\"\n")
            XCTAssertEqual(run.status, 78, "\(listen): \(run.stdout)")
            XCTAssertTrue(run.stderr.contains("metrics.listen"), "\(listen): \(run.stderr)")
        }
        XCTAssertEqual(try check("listen = \"127.0.0.1:9464\"\n").status, 0)
        XCTAssertEqual(try check("listen = \"[::1]:9464\"\n").status, 0)
        XCTAssertEqual(try check("listen = \"0.0.0.0:9464\"\nallow_remote = true\n").status, 0)
        let unknown = try check("port = 9464\n")
        XCTAssertEqual(unknown.status, 78)
        XCTAssertTrue(unknown.stderr.contains("metrics.port"), unknown.stderr)
    }

    /// The listener answers only GET /metrics, in the format the Accept header asks for, and
    /// a scraper that connects and says nothing holds it for at most its timeout, the daemon
    /// not at all.
    func testTheListenerNegotiatesTheFormatAndOutlastsASilentScraper() throws {
        let port = try freePort()
        let d = try DaemonProcess(config: simConfig(slots: slot) + "\n[metrics]\nlisten = \"127.0.0.1:\(port)\"\n")
        defer { _ = d.stop() }
        XCTAssertEqual(try tcpSockets(of: d.pid), 1, "the listener's one socket")
        try show(d, times: 1)

        let plain = try httpGet(port: port, path: "/metrics")
        XCTAssertTrue(plain.head.hasPrefix("HTTP/1.1 200"), plain.head)
        XCTAssertTrue(plain.head.contains("Content-Type: text/plain; version=0.0.4"), plain.head)
        XCTAssertEqual(value(#"adorch_shows_total{slot="s"}"#, in: plain.body), 1)
        let open = try httpGet(port: port, path: "/metrics", accept: "application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
        XCTAssertTrue(open.head.contains("Content-Type: application/openmetrics-text"), open.head)
        XCTAssertTrue(open.body.hasSuffix("# EOF\n"))
        XCTAssertTrue(try httpGet(port: port, path: "/").head.hasPrefix("HTTP/1.1 404"))

        let silent = try Self.connect(port: port)
        defer { close(silent) }
        let started = ContinuousClock.now
        XCTAssertNotNil(try d.call("io.adorch.Manager.GetStatus")["version"], "the daemon answers while a scraper hangs")
        let after = try httpGet(port: port, path: "/metrics")
        XCTAssertTrue(after.head.hasPrefix("HTTP/1.1 200"), after.head)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5).scaled, "the silent connection was dropped after its timeout")
    }

    /// Idle connections, more than the listener serves at once and a full backlog besides,
    /// do not hold up a scrape: each waits out its own deadline, not the others'.
    func testIdleConnectionsDoNotHoldUpAScrape() throws {
        let port = try freePort()
        let d = try DaemonProcess(config: simConfig(slots: slot) + "\n[metrics]\nlisten = \"127.0.0.1:\(port)\"\n")
        defer { _ = d.stop() }
        let idle = try (0..<28).map { _ in try Self.connect(port: port) }
        defer { for fd in idle { close(fd) } }
        let started = ContinuousClock.now
        let scrape = try httpGet(port: port, path: "/metrics")
        XCTAssertTrue(scrape.head.hasPrefix("HTTP/1.1 200"), scrape.head)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2).scaled, "the scrape waited for no idle connection's deadline")
        // And each idle one is answered 400 and closed once its own time is up.
        var reply = [UInt8](repeating: 0, count: 512)
        let n = recv(idle.last!, &reply, reply.count, 0)
        XCTAssertTrue(String(decoding: reply[..<max(n, 0)], as: UTF8.self).hasPrefix("HTTP/1.1 400"), "n=\(n)")
    }

    /// A local user opening connections as fast as it can and sending nothing does not take a
    /// real scrape's answer: a connection with its request in is never the one dropped for a
    /// newcomer. A request head over 8 KiB is answered 431, not reset.
    func testConnectionChurnTakesNoScrapeAndAnOversizedHeadIsAnswered431() throws {
        let port = try freePort()
        let d = try DaemonProcess(config: simConfig(slots: slot) + "\n[metrics]\nlisten = \"127.0.0.1:\(port)\"\n")
        defer { _ = d.stop() }
        let stop = LockedValue(false)
        let opened = LockedValue(0)
        let churn = Thread {
            var open: [Int32] = []
            while !stop.withLock({ $0 }) {
                guard let fd = try? Self.connect(port: port) else { continue }
                open.append(fd)
                opened.withLock { $0 += 1 }
                if open.count > 40 { close(open.removeFirst()) }
            }
            open.forEach { close($0) }
        }
        churn.start()
        // Scrapes all through the churn, until it has opened more than the 64 connections the
        // listener holds at most (docs/metrics.md) several times over.
        var (scrapes, answered, failures) = (0, 0, [String]())
        let deadline = ContinuousClock.now + .seconds(30).scaled
        while scrapes < 25 || opened.withLock({ $0 }) < 4 * 64, ContinuousClock.now < deadline {
            scrapes += 1
            let started = ContinuousClock.now
            do {
                let reply = try httpGet(port: port, path: "/metrics")
                if reply.head.hasPrefix("HTTP/1.1 200") { answered += 1 } else { failures.append("scrape \(scrapes): \(reply.head)") }
            } catch {
                failures.append("scrape \(scrapes) after \(ContinuousClock.now - started): \(error)")
            }
        }
        stop.withLock { $0 = true }
        print("metrics scrapes answered during the churn: \(answered) of \(scrapes), \(opened.withLock { $0 }) silent connections opened")
        XCTAssertEqual(answered, scrapes, "\(failures.prefix(3))")
        XCTAssertGreaterThanOrEqual(opened.withLock { $0 }, 4 * 64, "the churn replaced the listener's connections")

        let fd = try Self.connect(port: port)
        defer { close(fd) }
        let head = "GET /metrics HTTP/1.1\r\nX-Padding: " + String(repeating: "a", count: 9000)
        _ = head.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var reply = [UInt8](repeating: 0, count: 512)
        let n = recv(fd, &reply, reply.count, 0)
        XCTAssertTrue(String(decoding: reply[..<max(n, 0)], as: UTF8.self).hasPrefix("HTTP/1.1 431 Request Header Fields Too Large"), "n=\(n) errno=\(errno)")
    }

    /// A listen address another process holds does not stop ad serving: adorchd starts
    /// without the listener, logs the key and the errno, shows it in GetStatus, and a
    /// reload tries again.
    func testAListenAddressInUseLeavesTheDaemonServingAndAReloadTriesAgain() throws {
        let port = try freePort()
        // Close-on-exec, or the daemon spawned below would hold the port too.
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = port.bigEndian
        sa.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(taken, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(taken, 1), 0)
        let d = try DaemonProcess(config: simConfig(slots: slot) + "\n[metrics]\nlisten = \"127.0.0.1:\(port)\"\n")
        defer { _ = d.stop() }
        try show(d, times: 1)
        let failed = try XCTUnwrap(try d.status()["metrics"])
        XCTAssertEqual(failed["listen"]?.stringValue, "127.0.0.1:\(port)")
        XCTAssertEqual(failed["listening"]?.boolValue, false)
        let error = failed["error"]?.stringValue ?? ""
        XCTAssertTrue(error.contains("metrics.listen") && error.contains("Address already in use (errno \(EADDRINUSE))"), error)
        XCTAssertTrue(d.log.contains(error), "the journal says it too")
        let status = try runCommand(adorchctl, ["status", "--socket", d.socket])
        XCTAssertTrue(status.stdout.contains("metrics: not listening on 127.0.0.1:\(port): "), status.stdout)

        close(taken)
        let summary = try d.call("io.adorch.Manager.Reload")["summary"]?.stringValue ?? ""
        XCTAssertTrue(summary.contains("metrics on 127.0.0.1:\(port)"), summary)
        XCTAssertEqual(try d.status()["metrics"]?["listening"]?.boolValue, true)
        let scrape = try httpGet(port: port, path: "/metrics")
        XCTAssertEqual(value(#"adorch_shows_total{slot="s"}"#, in: scrape.body), 1)
        XCTAssertTrue(try runCommand(adorchctl, ["status", "--socket", d.socket]).stdout.contains("metrics: serving http://127.0.0.1:\(port)/metrics"))
    }

    /// A Show whose only ad its plugin could not present is a display failure, not a miss.
    func testAShowWhoseAdFailsToDisplayCountsAsDisplayFailed() throws {
        let d = try DaemonProcess(config: simConfig(slots: """
        [[slots]]
        id = "f"
        format = "interstitial"
        buffer = 1
          [[slots.waterfall]]
          plugin = "sim"
          server_parameter = "fill=1 latency_ms=300 show_fail=1"
        """))
        defer { _ = d.stop() }
        // The refill takes longer than the Show's retry: the retry finds no other ad.
        try d.waitFor("an ad ready in f") { (try d.slotStatus("f")["ready"]?.intValue ?? 0) >= 1 }
        let (error, _) = try d.callExpectingError("io.adorch.Ads.Show", ["slot": "f"])
        XCTAssertEqual(error, "io.adorch.Ads.NoAdReady")
        let text = try runCommand(adorchctl, ["metrics", "--socket", d.socket]).stdout
        XCTAssertEqual(value(#"adorch_show_requests_total{slot="f",result="display_failed"}"#, in: text), 1)
        XCTAssertEqual(value(#"adorch_show_requests_total{slot="f",result="no_ad"}"#, in: text), 0)
        XCTAssertEqual(value(#"adorch_display_failures_total{slot="f"}"#, in: text), 1)
    }

    /// A slot's series go when a reload removes it, and all of them start from 0 when it
    /// comes back; a removed plugin's load series go too.
    func testAReloadThatRemovesASlotOrPluginDropsItsSeriesAndAReturningSlotStartsFromZero() throws {
        let other = """
        [[slots]]
        id = "o"
        format = "interstitial"
          [[slots.waterfall]]
          plugin = "swift-example"
        """
        let two = simConfig(slots: slot + "\n" + other) + "\n[plugins.swift-example]\n"
        let d = try DaemonProcess(config: two)
        defer { _ = d.stop() }
        try show(d, times: 2)
        try d.waitFor("a swift-example load ended") {
            value(#"adorch_load_duration_seconds_count{network="swift-example"}"#,
                  in: try runCommand(adorchctl, ["metrics", "--socket", d.socket]).stdout) ?? 0 >= 1
        }
        let config = d.dir.appendingPathComponent("adorchd.toml")
        try simConfig(slots: other.replacingOccurrences(of: "swift-example", with: "sim")).write(to: config, atomically: true, encoding: .utf8)
        _ = try d.call("io.adorch.Manager.Reload")
        let without = try runCommand(adorchctl, ["metrics", "--socket", d.socket]).stdout
        XCTAssertFalse(without.contains(#"slot="s""#), "no series of the removed slot: \(without)")
        XCTAssertFalse(without.contains(#"network="swift-example""#), "no series of the removed plugin")

        try two.write(to: config, atomically: true, encoding: .utf8)
        _ = try d.call("io.adorch.Manager.Reload")
        let back = try runCommand(adorchctl, ["metrics", "--socket", d.socket]).stdout
        XCTAssertEqual(value(#"adorch_shows_total{slot="s"}"#, in: back), 0)
        XCTAssertEqual(value(#"adorch_show_requests_total{slot="s",result="hit"}"#, in: back), 0, "agrees with shows_total")
        XCTAssertEqual(value(#"adorch_show_duration_seconds_count{slot="s"}"#, in: back), 0)
    }

    /// Debian's prometheus scrapes the listener every second; its query API then has the Shows.
    func testPrometheusScrapesTheListenerAndQueriesTheShows() throws {
        let prometheus = "/usr/bin/prometheus"
        guard FileManager.default.isExecutableFile(atPath: prometheus) else {
            return XCTFail("\(prometheus) is missing: scripts/install-deps.sh installs Debian's prometheus")
        }
        let (metricsPort, queryPort) = (try freePort(), try freePort())
        let d = try DaemonProcess(config: simConfig(slots: slot) + "\n[metrics]\nlisten = \"127.0.0.1:\(metricsPort)\"\n")
        defer { _ = d.stop() }
        try show(d, times: 2)

        let dir = d.dir.appendingPathComponent("prometheus")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let config = dir.appendingPathComponent("prometheus.yml")
        try """
        global:
          scrape_interval: 1s
        scrape_configs:
          - job_name: adorch
            static_configs:
              - targets: ["127.0.0.1:\(metricsPort)"]
        """.write(to: config, atomically: true, encoding: .utf8)
        let process = Process()
        process.tieToTheTests(prometheus, ["--config.file=\(config.path)", "--storage.tsdb.path=\(dir.appendingPathComponent("data").path)",
                                           "--web.listen-address=127.0.0.1:\(queryPort)"])
        let log = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = log
        process.standardError = log
        try process.run()
        defer {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }

        // Polled until prometheus has scraped once and answers, within a bound.
        let deadline = ContinuousClock.now + .seconds(60).scaled
        var answer: JSONValue?
        while ContinuousClock.now < deadline {
            if let reply = try? httpGet(port: queryPort, path: "/api/v1/query?query=adorch_shows_total%7Bslot%3D%22s%22%7D"),
               let json = JSONValue.parse(Data(reply.body.utf8)), let first = json["data"]?["result"]?.arrayValue?.first {
                answer = first
                break
            }
            XCTAssertTrue(process.isRunning, "prometheus ended")
            usleep(200_000)
        }
        let result = try XCTUnwrap(answer, "prometheus returned no adorch_shows_total within 60 s")
        XCTAssertEqual(result["metric"]?["job"]?.stringValue, "adorch")
        XCTAssertEqual(result["value"]?.arrayValue?.last?.stringValue, "2")
    }

    // MARK: Helpers

    private func promtool(_ arguments: [String], stdin text: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
        process.arguments = arguments
        let input = Pipe(), output = Pipe()
        (process.standardInput, process.standardOutput, process.standardError) = (input, output, output)
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// How many TCP sockets `pid` holds: its descriptors' socket inodes found in /proc/net/tcp{,6}.
    private func tcpSockets(of pid: pid_t) throws -> Int {
        var inodes = Set<String>()
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            for line in try String(contentsOfFile: table, encoding: .utf8).split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                if fields.count > 9 { inodes.insert(String(fields[9])) }
            }
        }
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
            .filter { $0.hasPrefix("socket:[") && inodes.contains(String($0.dropFirst("socket:[".count).dropLast())) }.count
    }

    /// A loopback port no one listens on now.
    private func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &sa) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestFailure("no free loopback port: \(String(cString: strerror(errno)))") }
        return UInt16(bigEndian: sa.sin_port)
    }

    private static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = port.bigEndian
        sa.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else {
            close(fd)
            throw TestFailure("cannot connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        var timeout = timeval(tv_sec: Int(10 * timeScale), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// One HTTP/1.1 GET, read to the server's close: the status line and headers, and the body.
    private func httpGet(port: UInt16, path: String, accept: String? = nil) throws -> (head: String, body: String) {
        let fd = try Self.connect(port: port)
        defer { close(fd) }
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (accept.map { "Accept: \($0)\r\n" } ?? "") + "Connection: close\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        var ended = "the end of the stream"
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else {
                if n < 0 { ended = String(cString: strerror(errno)) }
                break
            }
            data.append(contentsOf: buffer[..<n])
        }
        let text = String(decoding: data, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw TestFailure("no HTTP response from port \(port) before \(ended): \(text)") }
        return (String(text[..<split.lowerBound]), String(text[split.upperBound...]))
    }
}
