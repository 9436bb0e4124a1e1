import AdorchPluginHost
import Foundation
import XCTest

/// The plugin host's confinement (docs/confinement.md): Tests/confinement/confinement_test.c,
/// built here with Sources/CAdorchSandbox/sandbox.c, confines itself as the host does and then
/// tries what a plugin might; and `Confinement`'s command-line form.
final class ConfinementTests: XCTestCase {
    private static let buildDir = packageRoot.appendingPathComponent(".build/confinement-test")
    private static let program = buildDir.appendingPathComponent("confinement-test").path

    /// The checks both modes make: what a confined plugin keeps.
    private static let kept = [
        "sibling-readable", "usr-lib-listable", "usr-lib-file-readable", "tmp-writable", "dev-null-writable",
        "inet-socket-allowed", "kill-self-allowed", "thread-starts", "address-space-bounds-malloc",
    ]
    /// What the full confinement takes away.
    private static let takenAway = [
        "hidden-dir-denied", "hidden-dir-entry-denied", "hidden-file-denied", "hidden-later-not-creatable",
        "write-outside-tmp-denied", "create-outside-tmp-denied", "fork-denied", "execve-denied",
        "unix-socket-denied", "unix-socketpair-denied", "kill-parent-denied", "ptrace-parent-denied", "parent-memory-denied",
    ]

    /// Builds the program: a fraction of a second.
    private func buildProgram() throws {
        try FileManager.default.createDirectory(at: Self.buildDir, withIntermediateDirectories: true)
        let sources = ["Tests/confinement/confinement_test.c", "Sources/CAdorchSandbox/sandbox.c"].map { packageRoot.appendingPathComponent($0).path }
        let build = try runCommand("/usr/bin/env", ["cc", "-std=gnu11", "-Wall", "-Wextra", "-O1",
                                                    "-I", packageRoot.appendingPathComponent("Sources/CAdorchSandbox/include").path,
                                                    "-o", Self.program] + sources + ["-lseccomp", "-lpthread"])
        guard build.status == 0 else { throw TestFailure("building the confinement test failed:\n\(build.stdout)\(build.stderr)") }
    }

    /// Runs the program in `mode` with a fresh folder under /tmp (the one tree the sandbox lets
    /// it write) and one outside it; its output.
    private func run(_ mode: String) throws -> String {
        try buildProgram()
        let tag = UUID().uuidString.prefix(8)
        let work = URL(fileURLWithPath: "/tmp").appendingPathComponent("adorch-confinement-\(tag)")
        let outside = try Self.outsideTheWritableTree().appendingPathComponent("adorch-confinement-outside-\(tag)")
        for dir in [work, outside] { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false) }
        defer { for dir in [work, outside] { try? FileManager.default.removeItem(at: dir) } }
        let result = try runCommand(Self.program, [mode, work.path, outside.path])
        XCTAssertEqual(result.status, 0, "\(result.stdout)\(result.stderr)")
        return result.stdout
    }

    /// A folder the test may write that is not below /tmp, where the sandbox lets a host
    /// write: the build folder, unless the checkout itself lies below /tmp.
    private static func outsideTheWritableTree() throws -> URL {
        let writable = URL(fileURLWithPath: "/tmp").resolvingSymlinksInPath().path + "/"
        let candidates = [buildDir, URL(fileURLWithPath: "/var/tmp"), URL(fileURLWithPath: "/dev/shm")]
        guard let outside = candidates.first(where: { candidate in
            let real = candidate.resolvingSymlinksInPath().path
            return !(real + "/").hasPrefix(writable) && access(real, W_OK) == 0
        }) else { throw TestFailure("no writable folder outside /tmp among \(candidates.map(\.path))") }
        return outside
    }

    /// Each check passed; a failed or missing one is named with what the program said of it.
    private func assertPassed(_ checks: [String], _ output: String, file: StaticString = #filePath, line: UInt = #line) {
        let lines = output.split(separator: "\n")
        for check in checks where !lines.contains("ok: \(check)") {
            let said = lines.first { $0.hasPrefix("FAIL: \(check):") }.map(String.init) ?? "never ran"
            XCTFail("\(check): \(said)\n\(output)", file: file, line: line)
        }
    }

    private func landlockABI(_ output: String) throws -> Int {
        let line = try XCTUnwrap(output.split(separator: "\n").first { $0.hasPrefix("kernel: landlock ABI ") }, output)
        return try XCTUnwrap(Int(line.dropFirst("kernel: landlock ABI ".count)), output)
    }

    func testAConfinedHostCannotOpenTheHiddenPathsNorReachOtherProcessesButKeepsWhatAPluginNeeds() throws {
        let output = try run("full")
        let abi = try landlockABI(output)
        guard abi > 0 else { throw XCTSkip("this kernel has no Landlock; testTheHostStillRunsOnAKernelWithoutLandlockOrSeccomp covers it") }
        XCTAssertTrue(output.contains("\nlayers: no_new_privs rlimits landlock seccomp\n"), output)
        XCTAssertTrue(output.contains("report: landlock: applied (ABI \(abi), "), output)
        if abi >= 6 { XCTAssertTrue(output.contains("signals and abstract Unix sockets scoped to the host"), output) }
        XCTAssertTrue(output.contains("report: seccomp: applied ("), output)
        XCTAssertFalse(output.contains("rules missing") || output.contains("got no rule"), "every rule went in:\n\(output)")
        assertPassed(Self.kept + Self.takenAway, output)
    }

    /// A kernel without Landlock and seccomp filters, as the program's own filter makes this one
    /// look: both layers are reported refused by name, the rest still applies, and the host runs.
    func testTheHostStillRunsOnAKernelWithoutLandlockOrSeccomp() throws {
        let output = try run("degraded")
        XCTAssertTrue(output.contains("\nlayers: no_new_privs rlimits\n"), output)
        XCTAssertTrue(output.contains("report: landlock: refused: this kernel has no Landlock; the hidden paths stay readable"), output)
        XCTAssertTrue(output.contains("report: seccomp: refused: loading the filter: "), output)
        assertPassed(Self.kept + ["hidden-file-readable-without-landlock", "fork-works-without-seccomp"], output)
    }

    /// The Swift API over the C one, in a process of its own: this test binary again, running
    /// only `testConfinedChild`, which confines itself from its command-line form. XCTest has
    /// threads running by then, as a host that started Dispatch would: Landlock is refused,
    /// saying why, and the seccomp filter reaches a thread that ran before it.
    func testTheSwiftAPIConfinesAThreadedProcessButRefusesLandlockThere() throws {
        // Under a sanitizer no address-space limit can be set: its shadow memory needs terabytes.
        let limit: UInt64? = Sanitizer.isActive ? nil : 8 << 30
        let confinement = Confinement(hiddenPaths: ["/tmp/adorch-confinement-\(UUID().uuidString.prefix(8))"], addressSpaceBytes: limit)
        let result = try runCommand(CommandLine.arguments[0], ["IntegrationTests.ConfinementTests/testConfinedChild"],
                                    environment: [Self.childVariable: confinement.arguments.joined(separator: "\n")])
        let output = result.stdout
        XCTAssertTrue(output.contains("child: applied noNewPrivileges resourceLimits seccomp\n"), "\(output)\(result.stderr)")
        XCTAssertTrue(output.contains("child: refused landlock\n"), output)
        XCTAssertTrue(output.contains("threads already run, and Landlock would confine only the calling one"), output)
        if limit != nil { XCTAssertTrue(output.contains("child: address space 8192 MiB\n"), output) }
        XCTAssertTrue(output.contains("child: an earlier thread's Unix socket: EPERM\n"), output)
    }

    private static let childVariable = "ADORCH_CONFINEMENT_CHILD"

    /// The child of testTheSwiftAPIConfinesAThreadedProcessButRefusesLandlockThere: skipped in
    /// any other run, as it confines the process it runs in for good.
    func testConfinedChild() throws {
        guard let arguments = ProcessInfo.processInfo.environment[Self.childVariable] else {
            throw XCTSkip("runs only as testTheSwiftAPIConfinesAThreadedProcessButRefusesLandlockThere's child")
        }
        @Sendable func say(_ line: String) { FileHandle.standardOutput.write(Data("child: \(line)\n".utf8)) }
        let applied = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        let earlier = Thread {
            applied.wait()
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            say("an earlier thread's Unix socket: \(fd >= 0 ? "made" : errno == EPERM ? "EPERM" : String(cString: strerror(errno)))")
            done.signal()
        }
        earlier.start()
        let report = try Confinement(arguments: arguments.split(separator: "\n").map(String.init)).apply()
        applied.signal()
        done.wait()
        report.lines.forEach { say("report: \($0)") }
        let names: [(ConfinementReport.Layers, String)] = [
            (.noNewPrivileges, "noNewPrivileges"), (.resourceLimits, "resourceLimits"), (.landlock, "landlock"), (.seccomp, "seccomp"),
        ]
        say("applied " + names.filter { report.applied.contains($0.0) }.map(\.1).joined(separator: " "))
        say("refused " + names.filter { report.refused.contains($0.0) }.map(\.1).joined(separator: " "))
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        say("address space \(limit.rlim_max >> 20) MiB")
    }

    func testTheArgumentsCarryTheConfinementToTheHostAndBack() throws {
        let confinement = Confinement(hiddenPaths: ["/var/lib/adorch", "/etc/adorch/reward.key"], addressSpaceBytes: 512 << 20)
        XCTAssertEqual(confinement.arguments, ["--hide", "/var/lib/adorch", "--hide", "/etc/adorch/reward.key", "--address-space-mb", "512"])
        XCTAssertEqual(try Confinement(arguments: confinement.arguments), confinement)
        let unbounded = Confinement(hiddenPaths: ["/var/lib/adorch"], addressSpaceBytes: nil)
        XCTAssertEqual(try Confinement(arguments: unbounded.arguments), unbounded)
        XCTAssertEqual(try Confinement(arguments: []), Confinement(hiddenPaths: [], addressSpaceBytes: nil))
        // A limit that is not whole MiB is carried rounded up: a ceiling a little higher, never lower.
        XCTAssertEqual(Confinement(hiddenPaths: [], addressSpaceBytes: (64 << 20) + 1).arguments, ["--address-space-mb", "65"])
        // Among a host's own arguments: the rest comes back in order, untouched.
        let (split, rest) = try Confinement.split(["--channel-fd", "3", "--hide", "/srv/state", "/usr/lib/adorch/libadorch-plugin-sim.so"])
        XCTAssertEqual(split, Confinement(hiddenPaths: ["/srv/state"], addressSpaceBytes: nil))
        XCTAssertEqual(rest, ["--channel-fd", "3", "/usr/lib/adorch/libadorch-plugin-sim.so"])
    }

    func testBadConfinementArgumentsAreRefusedByName() {
        let cases: [([String], ConfinementArgumentError)] = [
            (["--hide"], .missingValue(option: "--hide")),
            (["--address-space-mb"], .missingValue(option: "--address-space-mb")),
            (["--hide", "var/lib/adorch"], .relativePath("var/lib/adorch")),
            (["--address-space-mb", "0"], .badAddressSpace("0")),
            (["--address-space-mb", "-5"], .badAddressSpace("-5")),
            (["--address-space-mb", "lots"], .badAddressSpace("lots")),
            (["--address-space-mb", String(UInt64.max)], .badAddressSpace(String(UInt64.max))),
            (["--address-space-mb", "64", "--address-space-mb", "128"], .repeatedOption("--address-space-mb")),
            (["--hide", "/srv/state", "--verbose"], .unknownArgument("--verbose")),
        ]
        for (arguments, expected) in cases {
            XCTAssertThrowsError(try Confinement(arguments: arguments), "\(arguments)") { error in
                XCTAssertEqual(error as? ConfinementArgumentError, expected, "\(arguments)")
                XCTAssertTrue("\(error)".hasPrefix("confinement: "), "\(error)")
            }
        }
    }
}
