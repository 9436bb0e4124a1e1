import Foundation

/// Where the CPU went while a benchmark ran: `perf record` on the daemon and its plugin hosts,
/// summed by binary and by function (inclusive, Swift names demangled). A missed figure is
/// printed with it, so the table says what it costs, not only that it is short.
enum Profile {
    /// Profiles `pids` while `body` runs. nil, with why, when perf is missing or not allowed.
    static func record(pids: [Int32], while body: () throws -> Void) throws -> (text: String?, why: String?) {
        guard let perf = executable("perf") else {
            try body()
            return (nil, "perf is not installed (Debian's linux-perf)")
        }
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-profile-\(UUID().uuidString.prefix(8)).data").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        let recorder = Process()
        recorder.executableURL = URL(fileURLWithPath: perf)
        recorder.arguments = ["record", "-q", "-g", "-o", data, "-p", pids.map(String.init).joined(separator: ",")]
        recorder.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        recorder.standardError = errors
        try recorder.run()
        // perf writes the file's header once it is attached: the load starts after that.
        let attached = ContinuousClock.now
        while !FileManager.default.fileExists(atPath: data), recorder.isRunning, ContinuousClock.now - attached < .seconds(5) {
            usleep(10_000)
        }
        var failure: Error?
        do { try body() } catch { failure = error }
        recorder.interrupt()
        recorder.waitUntilExit()
        if let failure { throw failure }
        guard recorder.terminationStatus == 0 || recorder.terminationReason == .uncaughtSignal,
              FileManager.default.fileExists(atPath: data) else {
            let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return (nil, "perf record failed: \(said.split(separator: "\n").first ?? "exit \(recorder.terminationStatus)")")
        }
        let binaries = try report(perf, data, ["--no-children", "--sort", "dso"], top: 8)
        let functions = try report(perf, data, ["--children", "--sort", "sym"], top: 30)
        let text = """
            By binary (self time):

            ```
            \(binaries)
            ```

            By function, including what it calls (the top \(30) of the daemon's and its host's own code and libc):

            ```
            \(demangle(functions))
            ```
            """
        return (text, nil)
    }

    private static func report(_ perf: String, _ data: String, _ sort: [String], top: Int) throws -> String {
        let lines = try output(perf, ["report", "-i", data, "-q", "-g", "none"] + sort)
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.contains("[k] ") && !$0.contains("start_thread") && !$0.contains("_dispatch_") && !$0.contains("Thread") }
        return lines.prefix(top).joined(separator: "\n")
    }

    private static func demangle(_ text: String) -> String {
        guard let demangler = executable("swift-demangle") else { return text }
        let simplified = (try? output(demangler, ["--simplified", "--compact"], input: text)) ?? text
        // A Swift name with its whole signature is a paragraph: its first 150 characters say which.
        return simplified.split(separator: "\n").map { $0.count > 150 ? $0.prefix(150) + "…" : $0 }.joined(separator: "\n")
    }

    private static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static func output(_ executable: String, _ arguments: [String], input: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        let inPipe = Pipe()
        if input != nil { process.standardInput = inPipe }
        try process.run()
        if let input {
            // Written from another thread: a long report would fill the pipe the reader has not started on.
            let writer = inPipe.fileHandleForWriting
            Thread { writer.write(Data(input.utf8)); try? writer.close() }.start()
        }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
