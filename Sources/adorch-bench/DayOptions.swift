import AdorchBench
import ArgumentParser
import Foundation

/// The day benchmark's options and its sections: the standard day, then the family of
/// generated days (or one day of the family, in full); and the privacy day, adorch alone on
/// the same days with the viewers' privacy mix.
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

    /// The day's section, the privacy day's, or both (what `day` and `all` print).
    func sections(day wantsDay: Bool = true, privacy wantsPrivacy: Bool = true) throws -> [BenchSection] {
        if let day {
            let (w, origin) = try familyDay(day)
            return (wantsDay ? [oneDay(day, w, origin)] : []) + (wantsPrivacy ? [privacySection([w], title: "Day \(day) of the family, with the privacy mix")] : [])
        }
        var w = try Workload.load(path: workload)
        if let hours { w.hours = hours }
        let (days, origin, file) = try familyDays()
        let (section, family) = wantsDay ? daySection(w, days, origin, file) : (nil, nil)
        return [section].compactMap { $0 }
            + (wantsPrivacy ? [privacySection([w] + days, title: "3. The privacy day", familyWithoutMix: family?.results("adorch"))] : [])
    }

    /// The day's section, and the family's runs for the privacy day's comparison.
    private func daySection(_ w: Workload, _ days: [Workload], _ origin: String, _ file: String) -> (BenchSection, FamilyBenchmark?) {
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
        let family = days.isEmpty ? nil : FamilyBenchmark.run(days)
        if let family {
            text += "\nThe family: \(origin), kept in `\(file)`.\n\n" + family.report(file: file)
            targets += family.targets
        }
        return (BenchSection(title: "2. A day of traffic", text: text.trimmingCharacters(in: .newlines), targets: targets), family)
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

    /// The privacy day: adorch alone on the first of `days` with the mix, then on the rest
    /// (the family) if any.
    private func privacySection(_ days: [Workload], title: String, familyWithoutMix: [DayResult]? = nil) -> BenchSection {
        let first = PrivacyDay.run(days[0])
        let baseline = DaySimulator.run(AdorchPolicy(), workload: days[0], trace: Trace(days[0]))
        var text = """
            adorch alone on the day with each of its \(Audience.size) users' apps setting their privacy \
            (`Sources/AdorchBench/AudiencePrivacy.swift`): \(first.groups.map { "\(Int(($0.share * 100).rounded())) % \($0.name)" }.joined(separator: ", ")) \
            of the users, dealt by the day's seed. Each network serves non-personalised ads and every other one, from the first, \
            serves children. The reference policies know nothing of privacy, so they are not run on the privacy day. A hit is an \
            ad the viewer's class allows from its network, checked by the simulator against the rules (docs/privacy.md).

            \(first.table(baseline: baseline))
            """
        var targets = first.targets
        if days.count > 1 {
            let family = PrivacyFamily.run(Array(days.dropFirst()))
            text += "\n" + family.report(baseline: familyWithoutMix)
            targets += family.targets
        }
        return BenchSection(title: title, text: text.trimmingCharacters(in: .newlines), targets: targets)
    }

    /// Day `k` of the family, kept or drawn, and where it comes from.
    private func familyDay(_ k: Int) throws -> (Workload, String) {
        if let familyFile { return (withHours(try Workload.load(path: familyFile, day: k)), "From `\(familyFile)`") }
        var ranges = try DayFamily.load(path: familyRanges)
        if let familySeed { ranges.seed = familySeed }
        if let hours { ranges.hours = hours }
        ranges.count = k
        return (ranges.days()[k - 1], "Drawn from `\(familyRanges)` with seed \(ranges.seed)")
    }

    /// One day of the family, in full: to look into a day the summary singles out.
    private func oneDay(_ k: Int, _ w: Workload, _ origin: String) -> BenchSection {
        let run = DayBenchmark.run(w)
        return BenchSection(title: "Day \(k) of the family", text: """
            \(origin): \(DayFamily.describe(w)).

            \(run.table)
            \(CappedDayReport(uncapped: run)?.text ?? "")
            """.trimmingCharacters(in: .newlines), targets: [])
    }
}
