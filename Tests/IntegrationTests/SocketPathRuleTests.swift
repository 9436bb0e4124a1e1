import AdorchPaths
import Foundation
import XCTest

/// The socket a client picks when nobody names one (SocketPath.client) is the same for
/// adorchctl and the C, Python and Swift libraries, in each case: this user's daemon's socket
/// and the system service's both exist, only the system service's, neither. The first three
/// run for real as an app's uid, in a mount namespace whose /run is a fresh tmpfs (so the
/// system socket is there or not, whatever this host has); the Swift library's rule is the
/// same function, run here on the same inputs.
final class SocketPathRuleTests: XCTestCase {
    private let uid = 5581

    private enum Case: String, CaseIterable {
        case both = "own and system sockets exist"
        case systemOnly = "only the system socket exists"
        case neither = "neither socket exists"
        var own: Bool { self == .both }
        var system: Bool { self != .neither }
    }

    func testAdorchctlAndTheThreeClientLibrariesPickTheSameSocketInEachCase() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root: it runs the clients as uid \(uid) in a mount namespace of their own") }
        let make = try runCommand("/usr/bin/make", ["-s", "-C", packageRoot.appendingPathComponent("clients/c").path])
        XCTAssertEqual(make.status, 0, "make -C clients/c: \(make.stdout)\(make.stderr)")
        let runtime = try RunFolder.root.appendingPathComponent("xdg-\(uid)")
        let own = runtime.appendingPathComponent("adorch/adorchd.sock").path
        let ctl = try RunFolder.copy(of: productsDirectory.appendingPathComponent("adorchctl")).path
        let cTest = try RunFolder.copy(of: packageRoot.appendingPathComponent("clients/c/build")).appendingPathComponent("client-test").path
        let python = try RunFolder.copy(of: packageRoot.appendingPathComponent("clients/python")).path
        for situation in Case.allCases {
            try? FileManager.default.removeItem(at: runtime)
            try FileManager.default.createDirectory(at: runtime.appendingPathComponent("adorch"), withIntermediateDirectories: true)
            chmod(runtime.path, 0o755)
            chmod(runtime.appendingPathComponent("adorch").path, 0o755)
            // Plain files: what each client tries to connect to is named in its refusal.
            if situation.own { XCTAssertTrue(FileManager.default.createFile(atPath: own, contents: nil)) }
            let expected = situation.own || !situation.system ? own : SocketPath.system
            let environment = ["XDG_RUNTIME_DIR": runtime.path]
            let swift = SocketPath.client(environment: environment, euid: UInt32(uid), uid: UInt32(uid)) { path in
                path == own ? situation.own : path == SocketPath.system && situation.system
            }
            XCTAssertEqual(swift, expected, "Swift library, \(situation.rawValue)")
            let picks = [
                ("adorchctl", try pick([ctl, "status"], environment, system: situation.system) { Self.match(#"cannot reach adorchd at (\S+): "#, $0) }),
                ("C library", try pick([cTest, "socket-path"], environment, system: situation.system) { Self.match(#"(?m)^(?:socket (\S+)$|error cannot connect to (\S+): )"#, $0) }),
                ("Python library", try pick(["/usr/bin/python3", "-B", "-c", "from adorch._api import socket_path; print('socket', socket_path())"],
                                            environment.merging(["PYTHONPATH": python]) { $1 }, system: situation.system) { Self.match(#"socket (\S+)"#, $0) }),
            ]
            for (client, picked) in picks { XCTAssertEqual(picked, expected, "\(client), \(situation.rawValue)") }
        }
    }

    /// What `argv` printed that `parse` finds, run as the app's uid with only `environment`, in a
    /// mount namespace with an empty /run and, if `system`, the system socket in it.
    private func pick(_ argv: [String], _ environment: [String: String], system: Bool, parse: (String) -> String?) throws -> String? {
        let plant = system ? "mkdir -p \(SocketPath.system.dropLast("/adorchd.sock".count)) && : > \(SocketPath.system) && " : ""
        let inside = try asUser(uid, ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin"] + environment.map { "\($0.key)=\($0.value)" } + argv)
        let result = try runCommand("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c",
                                                         "mount -t tmpfs -o mode=0755 tmpfs /run && \(plant)exec \"$@\"", "sh"] + inside)
        let output = result.stdout + result.stderr
        let picked = parse(output)
        XCTAssertNotNil(picked, "\(argv.joined(separator: " ")) exited \(result.status) naming no socket:\n\(output)")
        return picked
    }

    private static func match(_ pattern: String, _ text: String) -> String? {
        guard let regex = try? NSRegularExpression(pattern: pattern),
              let found = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) else { return nil }
        // The first group that took part: patterns with alternatives name the path in each.
        return (1..<found.numberOfRanges).lazy.compactMap { Range(found.range(at: $0), in: text) }.first.map { String(text[$0]) }
    }
}
