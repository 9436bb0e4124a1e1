import AdorchBench
import ArgumentParser
import Foundation

/// The day benchmark's options and its section: the standard day, then the family of
/// generated days (or one day of the family, in full).
struct DayOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The standard day's workload file.", valueName: "PATH")) var workload = "bench/workload.toml"
    @Option(help: "Simulate this many hours a day instead of the files' (a smoke run).") var hours: Double?
    @Option(help: ArgumentHelp("After the standard day, a family of N generated days (default: the ranges file's count); 0: none.",
                               valueName: "N")) var family: Int?
    @Option(help: ArgumentHelp("The family's seed (default: the ranges file's). The summary must hold for any seed.", valueName: "S"))
    var familySeed: UInt64?
    @Option(help: ArgumentHelp("The file stating the ranges, seed and count the family's days are drawn from.", valueName: "PATH"))
    var familyRanges = "bench/family.toml"
    @Option(help: ArgumentHelp("Where to keep the generated family (default: .build/bench-family-SEED.toml).", valueName: "PATH"))
    var familyOut: String?
    @Option(help: ArgumentHelp("Replay a kept family instead of generating one (with --family N, its first N days).", valueName: "PATH"))
    var familyFile: String?
    @Option(help: ArgumentHelp("Run only day K (from 1) of the family, kept or generated, and print its full table.", valueName: "K"))
    var day: Int?

    func validate() throws {
        if familyFile != nil, familySeed != nil { throw ValidationError("--family-seed draws a new family; --family-file replays a kept one") }
        if let family, family < 0 { throw ValidationError("--family must be 0 or more") }
        if let day, day < 1 { throw ValidationError("--day counts from 1") }
    }

    func section() throws -> BenchSection {
        if let day { return try oneDay(day) }
        var w = try Workload.load(path: workload)
        if let hours { w.hours = hours }
        let started = ContinuousClock.now
        let standard = DayBenchmark.run(w)
        var text = """
            The standard day of `\(workload)` replayed to adorch's engine and to the reference policies of \
            `Sources/AdorchBench/Policies.swift`, simulated in \(ContinuousClock.now - started).

            \(standard.table)
            """
        var targets = standard.targets
        if let capped = CappedDayReport(uncapped: standard) {
            text += "\n" + capped.text
            targets += capped.targets
        }
        let (days, origin, file) = try familyDays()
        if !days.isEmpty {
            let family = FamilyBenchmark.run(days)
            text += "\nThe family: \(origin), kept in `\(file)`.\n\n" + family.report(file: file)
            targets += family.targets
        }
        return BenchSection(title: "2. A day of traffic", text: text.trimmingCharacters(in: .newlines), targets: targets)
    }

    /// The family's days (a kept one, or drawn and written out), what they are, and their file.
    private func familyDays() throws -> (days: [Workload], origin: String, file: String) {
        if let familyFile {
            var days = try Workload.loadDays(path: familyFile)
            if let family { days = Array(days.prefix(family)) }
            return (days.map(withHours), "\(days.count) days replayed from a kept family", familyFile)
        }
        var ranges = try DayFamily.load(path: familyRanges)
        if let family { ranges.count = family }
        if let familySeed { ranges.seed = familySeed }
        if let hours { ranges.hours = hours }
        guard ranges.count > 0 else { return ([], "", "") }
        let days = ranges.days()
        let file = familyOut ?? ".build/bench-family-\(ranges.seed).toml"
        let directory = URL(fileURLWithPath: file).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let comment = """
            \(days.count) days of \(String(format: "%g", ranges.hours)) h drawn by adorch-bench day from `\(familyRanges)` with seed \(ranges.seed).
            Replay them with `adorch-bench day --family-file \(file)`, one of them with `--day K` as well.
            """
        try Workload.familyTOML(days, comment: comment).write(toFile: file, atomically: true, encoding: .utf8)
        return (days, "\(days.count) days drawn from `\(familyRanges)` with seed \(ranges.seed)", file)
    }

    private func withHours(_ w: Workload) -> Workload {
        var w = w
        if let hours { w.hours = hours }
        return w
    }

    /// One day of the family, in full: to look into a day the summary singles out.
    private func oneDay(_ k: Int) throws -> BenchSection {
        let w: Workload, origin: String
        if let familyFile {
            (w, origin) = (withHours(try Workload.load(path: familyFile, day: k)), "From `\(familyFile)`")
        } else {
            var ranges = try DayFamily.load(path: familyRanges)
            if let familySeed { ranges.seed = familySeed }
            if let hours { ranges.hours = hours }
            ranges.count = k
            (w, origin) = (ranges.days()[k - 1], "Drawn from `\(familyRanges)` with seed \(ranges.seed)")
        }
        let run = DayBenchmark.run(w)
        return BenchSection(title: "Day \(k) of the family", text: """
            \(origin): \(DayFamily.describe(w)).

            \(run.table)
            \(CappedDayReport(uncapped: run)?.text ?? "")
            """.trimmingCharacters(in: .newlines), targets: [])
    }
}
