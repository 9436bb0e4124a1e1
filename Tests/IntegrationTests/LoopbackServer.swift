import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// A Python HTTP server of Tests/ on loopback (the VAST ad server, the OpenRTB exchange):
/// started, waited for until it listens, and killed by PID when the test is done.
final class LoopbackServer {
    let base: String
    private let process = Process()

    /// Runs `script` (relative to the package) with `arguments`; it prints "listening on PORT".
    init(script: String, arguments: [String]) throws {
        process.tieToTheTests("/usr/bin/env", ["python3", packageRoot.appendingPathComponent(script).path] + arguments)
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        // Wait for the line the server prints once it listens: an event, not a sleep.
        var seen = ""
        while !seen.contains("\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { throw TestFailure("\(script) exited before listening") }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        guard let port = seen.split(separator: " ").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            throw TestFailure("\(script) said \(seen)")
        }
        base = "http://127.0.0.1:\(port)"
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    func get(_ path: String) throws -> Data {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<Data, Error> = .failure(TestFailure("no answer from \(base)"))
        URLSession.shared.dataTask(with: URL(string: base + path)!) { data, _, error in
            result = error.map { .failure($0) } ?? .success(data ?? Data())
            done.signal()
        }.resume()
        _ = done.wait(timeout: .now() + 30)
        return try result.get()
    }

    /// Every GET the server recorded, in order.
    func log() throws -> [String] { try JSONDecoder().decode([String].self, from: get("/_log")) }

    /// Waits until `count` recorded requests start with `prefix` (the server answers then);
    /// `kind` picks another record than the GETs, where the server keeps one.
    func wait(for prefix: String, count: Int = 1, timeout: Int = 10, kind: String = "") throws {
        let escaped = prefix.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? prefix
        let answer = try JSONSerialization.jsonObject(with: get("/_wait?prefix=\(escaped)&count=\(count)&timeout=\(timeout)&kind=\(kind)")) as? [String: Any]
        guard answer?["ok"] as? Bool == true else {
            throw TestFailure("waited \(timeout) s for \(count) requests to \(prefix), got \(answer?["count"] ?? "?"): \(try log())")
        }
    }
}
