import AdorchBench
import ArgumentParser
import Foundation

AdorchBenchCommand.main()

struct AdorchBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adorch-bench",
        abstract: "adorch's benchmarks: they print numbers beside the targets; they never fail on a slow machine.",
        subcommands: [Day.self]
    )
}

struct Day: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A simulated day of show requests against adorch's scheduler and the classic preload policies."
    )

    @Option(help: "The workload file.") var workload = "bench/workload.toml"
    @Option(help: "Simulate this many hours instead of the file's (a smoke run).") var hours: Double?

    func run() throws {
        var w = try Workload.load(path: workload)
        if let hours { w.hours = hours }
        let started = ContinuousClock.now
        let day = DayBenchmark.run(w)
        print(day.table)
        print("(simulated in \(ContinuousClock.now - started))")
    }
}
