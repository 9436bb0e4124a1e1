import Foundation

/// Debian's redis-server on a Unix socket, measured with its own redis-benchmark: the
/// reference for how fast a request/response daemon goes on this machine.
public final class RedisReference {
    public let socket: String
    private let dir: URL
    private let process = Process()

    public init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-bench-redis-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        socket = dir.appendingPathComponent("redis.sock").path
        process.executableURL = try Self.find("redis-server")
        process.arguments = ["--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                             "--dir", dir.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // redis-server has no readiness notification here: its socket accepting is the event.
        let deadline = ContinuousClock.now + .seconds(10)
        while !Self.accepts(socket) {
            guard process.isRunning, ContinuousClock.now < deadline else { throw BenchError("redis-server did not serve \(socket) within 10 s") }
            usleep(5_000)
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: dir)
    }

    /// PING and GET (after the SET that creates the key), as redis-benchmark reports them.
    public func benchmark(connections: Int, requests: Int) throws -> [LatencyFigures] {
        let run = Process()
        run.executableURL = try Self.find("redis-benchmark")
        run.arguments = ["-s", socket, "-c", "\(connections)", "-n", "\(requests)", "-t", "ping,set,get"]
        let pipe = Pipe()
        run.standardOutput = pipe
        run.standardError = FileHandle.nullDevice
        try run.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        let sections = Self.parse(output)
        return try [("PING_MBULK", "redis PING"), ("GET", "redis GET")].map { test, name in
            guard var figures = sections[test] else { throw BenchError("redis-benchmark printed no \(test) section:\n\(output.suffix(2000))") }
            figures.name = name
            figures.connections = connections
            return figures
        }
    }

    /// redis-benchmark's report, per test: requests, throughput, p50 and p99 from the summary,
    /// p99.9 from the percentile distribution (its first line at or above 99.9 %).
    static func parse(_ output: String) -> [String: LatencyFigures] {
        var result: [String: LatencyFigures] = [:]
        var current: String?
        var expectSummaryValues = false
        for raw in output.replacingOccurrences(of: "\r", with: "\n").split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("======"), line.hasSuffix("======") {
                current = line.trimmingCharacters(in: CharacterSet(charactersIn: "= "))
                result[current!] = LatencyFigures(name: current!, connections: 0, requests: 0, errors: 0, requestsPerSecond: 0, p50: 0, p99: 0, p999: 0)
                continue
            }
            guard let test = current else { continue }
            let words = line.split(separator: " ")
            if line.hasSuffix("requests completed in") || line.contains("requests completed in"), let n = Int(words.first ?? "") {
                result[test]!.requests = n
            } else if line.hasPrefix("throughput summary:"), words.count > 2, let rps = Double(words[2]) {
                result[test]!.requestsPerSecond = rps
            } else if line.hasPrefix("avg"), line.contains("p99") {
                expectSummaryValues = true
            } else if expectSummaryValues {
                expectSummaryValues = false
                let values = words.compactMap { Double($0) }
                if values.count >= 5 { (result[test]!.p50, result[test]!.p99) = (values[2], values[4]) }
            } else if line.contains("% <= "), line.contains("cumulative count"), result[test]!.p999 == 0,
                      let percent = Double(words.first?.dropLast() ?? ""), percent >= 99.9, words.count > 2, let ms = Double(words[2]) {
                result[test]!.p999 = ms
            }
        }
        return result
    }

    static func find(_ program: String) throws -> URL {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") + ["/usr/sbin", "/usr/bin"] {
            let path = "\(dir)/\(program)"
            if FileManager.default.isExecutableFile(atPath: path) { return URL(fileURLWithPath: path) }
        }
        throw BenchError("\(program) not found: install Debian's redis-server (scripts/install-deps.sh does)")
    }

    private static func accepts(_ path: String) -> Bool {
        let fd = Foundation.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }
}
