import AdorchLocking
import AdorchVarlink
import Foundation
import Synchronization

/// The hostile clients (Tests/hostile/attackers.py; docs/rules.md, "Fair serving") throughout the soak: each
/// attack as its own uid (setpriv), started again a second after it ends, until the soak stops.
/// What the daemon did to them is tallied by error name for the report; the soak's verdict
/// stays its clients' (they must lose no reply), since an attacker is refused by design.
final class SoakAttackers: Sendable {
    /// One attack: the subcommand and its arguments; `hold`, how long it keeps what it opened
    /// before its stdin is closed (the hog holds until told).
    struct Attack: Sendable {
        var name: String
        var arguments: [String]
        var hold: Duration? = nil
    }

    /// Slots of the soak's config that only the attackers use: Load needs an on-demand slot,
    /// and sessions an interactive one.
    static let bannerSlot = "attack_banner"
    static let interactiveSlot = "attack_interactive"
    /// The first attacker's uid; the others follow, one each (per-uid budgets are what they try).
    static let firstUID = 4500

    /// Sized for the default [limits]: over max_connections_per_uid 512, past max_sessions_per_uid 16.
    static let attacks: [Attack] = [
        Attack(name: "drip", arguments: ["--give-up-s", "40"]),
        Attack(name: "partials", arguments: ["--connections", "50", "--give-up-s", "40"]),
        Attack(name: "hog", arguments: ["--connections", "560", "--expect-refused", "48", "--window-s", "5"], hold: .seconds(20)),
        Attack(name: "idle", arguments: ["--connections", "20", "--give-up-s", "150"]),
        Attack(name: "huge-user-id", arguments: ["--slot", "rewarded", "--repeat", "3"]),
        Attack(name: "never-read", arguments: ["--slot", "rewarded", "--subscribers", "300", "--give-up-s", "30"]),
        Attack(name: "hoard", arguments: ["--slot", interactiveSlot, "--sessions", "20"]),
        Attack(name: "load-flood", arguments: ["--slot", bannerSlot, "--give-up-s", "30"]),
    ]

    /// Per attack: runs, the error names in their results, and runs that ended without one.
    private struct Tally {
        var runs = 0
        var errors: [String: Int] = [:]
        var withoutResult = 0
    }

    private let script: String
    private let socket: String
    private let tallies = LockedValue<[String: Tally]>([:])
    private let stopping = Atomic(false)
    private let group = DispatchGroup()

    /// The attackers, or why there are none: they need root (to become other users; as the
    /// soak's own uid they would spend its clients' budgets) and the scripts of the source tree.
    static func make(socket: String) -> Result<SoakAttackers, Unavailable> {
        guard getuid() == 0 else { return .failure(Unavailable(reason: "not root: the attackers must be other uids")) }
        guard let script = locateScript() else { return .failure(Unavailable(reason: "no Tests/hostile/attackers.py here or above the binary")) }
        return .success(SoakAttackers(script: script, socket: socket))
    }

    struct Unavailable: Error { var reason: String }

    private init(script: String, socket: String) {
        self.script = script
        self.socket = socket
    }

    /// The script in the working directory's source tree (make soak runs in the package root),
    /// else in the one the binary was built in (.build/<config>/adorch-bench).
    private static func locateScript() -> String? {
        let relative = "Tests/hostile/attackers.py"
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let roots = [FileManager.default.currentDirectoryPath] + (1...4).map { level in
            (0..<level).reduce(binary) { url, _ in url.deletingLastPathComponent() }.path
        }
        return roots.map { "\($0)/\(relative)" }.first { FileManager.default.fileExists(atPath: $0) }
    }

    func start() {
        for (index, attack) in Self.attacks.enumerated() {
            group.enter()
            Thread.detachNewThread { [self] in
                defer { group.leave() }
                while !stopping.load(ordering: .relaxed) {
                    run(attack, uid: Self.firstUID + index)
                    pause(.seconds(1))
                }
            }
        }
    }

    /// Stops every attacker (by its PID) and waits for them.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        group.wait()
    }

    private func pause(_ length: Duration) {
        let end = ContinuousClock.now + length
        while !stopping.load(ordering: .relaxed), ContinuousClock.now < end { Thread.sleep(forTimeInterval: 0.05) }
    }

    private func run(_ attack: Attack, uid: Int) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", script, attack.name, "--socket", socket]
            + attack.arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 }
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return record(attack.name, result: nil) }
        let outputRead = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var printed = Data()
        DispatchQueue.global().async {
            printed = output.fileHandleForReading.readDataToEndOfFile()
            outputRead.signal()
        }
        let started = ContinuousClock.now
        var inputOpen = true
        while outputRead.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            if inputOpen, stopping.load(ordering: .relaxed) || attack.hold.map({ ContinuousClock.now - started >= $0 }) ?? false {
                try? input.fileHandleForWriting.close()
                inputOpen = false
            }
            if stopping.load(ordering: .relaxed), process.isRunning { kill(process.processIdentifier, SIGTERM) }
        }
        process.waitUntilExit()
        let lines = String(decoding: printed, as: UTF8.self).split(separator: "\n")
        let result = lines.last.flatMap { JSONValue.parse(Data($0.utf8))?["result"] }
        // A run cut short by the soak's end is no attacker failure: it is not counted at all.
        if result != nil || !stopping.load(ordering: .relaxed) { record(attack.name, result: result) }
    }

    private func record(_ name: String, result: JSONValue?) {
        tallies.withLock { all in
            all[name, default: Tally()].runs += 1
            guard let result else { return all[name, default: Tally()].withoutResult += 1 }
            for error in Set(Self.errorNames(in: result)) { all[name, default: Tally()].errors[error, default: 0] += 1 }
        }
    }

    /// The Varlink error names anywhere in a result, as values or as keys of a tally (the
    /// "method" a reply was to is a Varlink name too, but no error).
    private static func errorNames(in value: JSONValue) -> [String] {
        func isError(_ text: String) -> Bool { text.hasPrefix("io.adorch.") || text.hasPrefix("org.varlink.") }
        switch value {
        case .string(let text): return isError(text) ? [text] : []
        case .array(let items): return items.flatMap(errorNames)
        case .object(let fields):
            return fields.filter { $0.key != "method" }.flatMap { (isError($0.key) ? [$0.key] : []) + errorNames(in: $0.value) }
        default: return []
        }
    }

    /// One line per attack: runs, and what the daemon answered them (by error name, counted once per run).
    var report: String {
        tallies.withLock { all in
            Self.attacks.enumerated().map { index, attack in
                let tally = all[attack.name] ?? Tally()
                let errors = tally.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                let missing = tally.withoutResult > 0 ? ["\(tally.withoutResult) ended without a result"] : []
                let answers = errors + missing
                return "  \(attack.name) (uid \(Self.firstUID + index)): \(tally.runs) runs; " + (answers.isEmpty ? "no error" : answers.joined(separator: ", "))
            }.joined(separator: "\n")
        }
    }
}
