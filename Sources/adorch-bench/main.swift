import AdorchBench
import ArgumentParser
import Foundation

AdorchBenchCommand.main()

struct AdorchBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adorch-bench",
        abstract: "adorch's benchmarks: they print numbers beside the targets; they never fail on a slow machine.",
        discussion: "`all` runs the seven parts in order (what `make bench` does); each part also runs on its own.",
        subcommands: [All.self, Control.self, Day.self, PrivacyDayCommand.self, Footprint.self, Scale.self, Wire.self, Isolation.self, Load.self, Subscribe.self, SoakCommand.self, CyclesCommand.self]
    )
}

/// Where the daemon and its plugins are, and how big a run is.
struct DaemonOptions: ParsableArguments {
    @Option(help: "The adorchd to measure (default: the one next to this program).") var adorchd: String?
    @Option(help: "Where libadorch-plugin-sim.so is (default: adorchd's folder).") var pluginDir: String?
    @Flag(help: "A smoke run: seconds instead of minutes, the same code paths; the figures mean little.") var smoke = false

    var benchmarks: ServiceBenchmarks {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let daemon = adorchd ?? here.appendingPathComponent("adorchd").path
        return ServiceBenchmarks(adorchd: daemon, pluginDir: pluginDir ?? URL(fileURLWithPath: daemon).deletingLastPathComponent().path,
                                 scale: smoke ? .smoke : .standard)
    }
}

/// Prints a section as soon as it is measured, so a long run shows progress.
func emit(_ section: BenchSection) {
    FileHandle.standardOutput.write(Data((section.markdown + "\n").utf8))
}

struct All: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Every part: redis, the day and its family, the privacy day, the footprint, the scale, the wire, plugin isolation.")
    @OptionGroup var daemon: DaemonOptions
    @OptionGroup var day: DayOptions

    func run() throws {
        let benchmarks = daemon.benchmarks
        emit(try benchmarks.controlAPI())
        try day.sections().forEach(emit)
        emit(try benchmarks.footprint())
        emit(try benchmarks.scaling())
        emit(WireBenchmark(iterations: daemon.smoke ? 2_000 : 200_000).run())
        emit(try benchmarks.isolation())
    }
}

struct Control: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The control API against redis-server on a Unix socket.")
    @OptionGroup var daemon: DaemonOptions
    func run() throws { emit(try daemon.benchmarks.controlAPI()) }
}

struct Day: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A simulated day of show requests against adorch's scheduler and the classic preload policies.",
        discussion: """
            The standard day (--workload), then a family of days generated from the ranges of --family-ranges: \
            the summary over the family, adorch against each reference, its worst days and the targets. \
            The family is written to a file first; --family-file replays it, --day K runs one of its days in full. \
            Then the privacy day: adorch alone on the same days with the viewers' privacy mix.
            """
    )
    @OptionGroup var day: DayOptions
    func run() throws { try day.sections().forEach(emit) }
}

struct PrivacyDayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "privacy-day",
        abstract: "Only the privacy day: adorch alone on the standard day and the family with the viewers' privacy mix.",
        discussion: "Takes the options of `day`; --day K runs day K of the family alone with the mix."
    )
    @OptionGroup var day: DayOptions
    func run() throws { try day.sections(day: false).forEach(emit) }
}

struct Footprint: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Idle RSS, RSS per ready ad, exec to READY=1, idle CPU.")
    @OptionGroup var daemon: DaemonOptions
    func run() throws { emit(try daemon.benchmarks.footprint()) }
}

struct Scale: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show latency with few and many slots, and with few and many subscribers.")
    @OptionGroup var daemon: DaemonOptions
    func run() throws { emit(try daemon.benchmarks.scaling()) }
}

struct Wire: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Decoding a Show call and encoding its reply: Foundation's Codable against adorch's own code.")
    @Option(help: "Messages timed per row.") var iterations = 200_000
    func run() { emit(WireBenchmark(iterations: iterations).run()) }
}

struct Isolation: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show + Report through an isolated plugin against in process; a killed host replaced.")
    @OptionGroup var daemon: DaemonOptions
    func run() throws { emit(try daemon.benchmarks.isolation()) }
}

/// The load generator alone, against a daemon someone else started: for profiling one call
/// (`perf record -p` on that daemon) without the rest of the suite around it.
struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Drive a running adorchd with one kind of call and print its latency.")
    enum Kind: String, ExpressibleByArgument, CaseIterable { case getInfo = "get-info", showReport = "show-report" }
    @Option(help: "The daemon's socket.") var socket: String
    @Option(help: "The call: \(Kind.allCases.map(\.rawValue).joined(separator: ", ")).") var call: Kind = .showReport
    @Option(help: "The slot Show takes from.") var slot = "s0"
    @Option(help: "Connections, each with one request in flight.") var connections = 64
    @Option(help: "Requests in all.") var requests = 20_000

    func run() throws {
        let figures = try LoadGenerator.run(socket: socket, connections: connections, requests: requests,
                                            call: call == .getInfo ? .getInfo : .showReport(slot: slot))
        print(String(format: "%@: %d answered, %d errors, %.0f/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms",
                     figures.name, figures.requests, figures.errors, figures.requestsPerSecond, figures.p50, figures.p99, figures.p999))
        if let error = figures.firstError { print("first error: \(error)") }
    }
}

/// Subscribers that read every event, held until stdin closes or the process is stopped: to
/// watch the fan-out's cost on a running daemon, or to occupy connections in a test.
struct Subscribe: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Attach subscribers to a running adorchd and hold them until stdin closes.")
    @Option(help: "The daemon's socket.") var socket: String
    @Option(help: "How many subscribers, each on its own connection.") var count = 1

    func run() throws {
        let subscribers = try LoadGenerator.Subscribers(socket: socket, count: count)
        try subscribers.wait(forEvents: count)  // each one's "subscribed"
        FileHandle.standardOutput.write(Data("\(count) subscribed\n".utf8))  // unbuffered: a test waits for it
        _ = FileHandle.standardInput.readDataToEndOfFile()
        print("\(subscribers.stop()) events received")
    }
}

/// The soak: `make soak` runs it for 30 minutes; the test suite runs a short one.
struct SoakCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Clients mixing Show, Report, Subscribe and reconnects against misbehaving, blocking and crashing plugins, with reloads.",
        discussion: "Prints RSS, open fds, hosts and calls over time, then a summary; exits 1 if the daemon crashed, a reply was lost, a reload failed, fds did not return to their baseline, the crashing plugin never crashed, a host process was left over (unnamed by status, unreaped, or alive after the daemon stopped), or (in runs of 10 minutes or more) RSS grew 10 % after warm-up."
    )
    @OptionGroup var daemon: DaemonOptions
    @Option(help: "How long, in minutes.") var minutes: Double = 30
    @Option(help: "Clients, each on its own connection and thread.") var clients = 200
    @Option(help: "Seconds between two reloads.") var reloadEvery: Double = 60
    @Option(help: "Seconds between two samples of RSS and fds.") var sampleEvery: Double = 30
    @Option(help: "Each client's mean pause between calls, in milliseconds.") var thinkMs: Double = 20
    @Option(help: "The crashing plugin faults at this load or show of each of its slots, in each of its hosts.") var crashAt = 20

    func run() throws {
        let benchmarks = daemon.benchmarks
        let soak = Soak(adorchd: benchmarks.adorchd, pluginDir: benchmarks.pluginDir, duration: .milliseconds(Int(minutes * 60_000)),
                        clients: clients, reloadEvery: .milliseconds(Int(reloadEvery * 1000)),
                        sampleEvery: .milliseconds(Int(sampleEvery * 1000)), thinkTime: .microseconds(Int(thinkMs * 1000)),
                        crashAt: crashAt)
        let result = try soak.run { FileHandle.standardOutput.write(Data(($0 + "\n").utf8)) }  // unbuffered: progress as it comes
        print(result.report)
        if !result.passed { throw ExitCode.failure }
    }
}

/// A million load → show → destroy cycles: `make cycles`.
struct CyclesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cycles",
        abstract: "Load → show → destroy through sim at zero latency; checks that ad objects never pile up.",
        discussion: "Exits 1 unless sim's live objects come back to the slots' buffers and RSS stays within 5 % of its level after warm-up."
    )
    @OptionGroup var daemon: DaemonOptions
    @Option(help: "Cycles (successful Shows) in all.") var count = 1_000_000
    @Option(help: "Connections, each with one Show + Report in flight.") var connections = 16

    func run() throws {
        let benchmarks = daemon.benchmarks
        let result = try Cycles(adorchd: benchmarks.adorchd, pluginDir: benchmarks.pluginDir, cycles: count, connections: connections)
            .run { FileHandle.standardOutput.write(Data(($0 + "\n").utf8)) }
        print(result.report)
        if !result.passed { throw ExitCode.failure }
    }
}
