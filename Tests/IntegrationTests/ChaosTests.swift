import AdorchVarlink
import Foundation
import XCTest

/// Issue 31, acceptance 2 (`make chaos` runs it for 10 minutes, `make test` for 45 s): three
/// apps as three uids show rewarded ads in a loop while the daemon is killed with `kill -9` at
/// random moments and its state directory's disk is filled and freed. At the end every
/// completion an app was told succeeded is in the ledger exactly once, every reward an app was
/// told of is in it, no reward is for an ad no app was shown, and no user got more ads than
/// the slot's cap allows in any window.
final class ChaosTests: XCTestCase {
    private static let apps = [4601, 4602, 4603]
    private static let cap = (impressions: 4, window: 10.0)
    private static let config = simConfig(slots: """
    [access]
    ads_users = [\(apps.map { "\"\($0)\"" }.joined(separator: ", "))]

    [[slots]]
    id = "chaos"
    format = "rewarded"
    buffer = 4
    reward_name = "coins"
    reward_amount = 1
    caps = [{ impressions = \(cap.impressions), per = "\(Int(cap.window))s" }]
      [[slots.waterfall]]
      plugin = "sim"
      server_parameter = "fill=1 latency_ms=0..5"
    """)

    /// One line an app wrote: what the daemon told it.
    private struct Told: Decodable {
        var e: String
        var ad: String?
        var user: String?
        var asked: Double?
        var t: Double?
        var trans: String?
        var error: String?
    }

    func testRewardsAndCapsHoldThroughKillsAndAFullDisk() throws {
        guard getuid() == 0 else { throw XCTSkip("the apps run as three other uids and the disk is a tmpfs: both need root") }
        let seconds = Double(ProcessInfo.processInfo.environment["ADORCH_CHAOS_SECONDS"] ?? "") ?? 45
        let disk = try smallDisk(megabytes: 64)
        let state = disk.appendingPathComponent("state")
        let folder = try RunFolder.root.appendingPathComponent("chaos-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o755)
        let socket = folder.appendingPathComponent("adorchd.sock").path
        var daemon = try DaemonProcess(config: Self.config, stateDir: state, socket: socket)
        defer { daemon.stop() }

        // The apps, each in the background with a journal in a folder of its own.
        let group = DispatchGroup()
        var journals: [Int: URL] = [:]
        for uid in Self.apps {
            let own = folder.appendingPathComponent("app-\(uid)")
            try FileManager.default.createDirectory(at: own, withIntermediateDirectories: true)
            chown(own.path, uid_t(uid), gid_t(uid))
            journals[uid] = own.appendingPathComponent("journal")
            let argv = try pythonClient("import sys; sys.path.insert(0, sys.argv.pop(1)); import chaos_app; chaos_app.main(*sys.argv[1:5])",
                                        as: uid, [socket, journals[uid]!.path, "\(seconds)", "\(uid)"])
            group.enter()
            DispatchQueue.global().async {
                let run = try? runCommand(argv[0], Array(argv.dropFirst()))
                if run?.status != 0 { print("chaos app \(uid): exit \(run?.status ?? -1): \(run?.stderr ?? "")") }
                group.leave()
            }
        }

        // The chaos: at random moments, a kill, a full disk, or a kill while the disk is full.
        // The pauses are the run's input, not waits for something to happen.
        var (kills, fills, killsWhileFull) = (0, 0, 0)
        let filler = disk.appendingPathComponent("filler").path
        // What each daemon said about the caps history and the ledger, for a failure's diagnosis.
        var said: [String] = []
        func keepWhatItSaid() {
            said += daemon.log.split(separator: "\n").filter { $0.contains("frequency caps:") || $0.contains("rewards:") }.map(String.init)
        }
        func restart() throws {
            keepWhatItSaid()
            kill(daemon.pid, SIGKILL)
            XCTAssertEqual(daemon.stop(), SIGKILL)
            daemon = try DaemonProcess(config: Self.config, stateDir: state, socket: socket)
        }
        let end = Date() + seconds - 3
        while Date() < end {
            Thread.sleep(forTimeInterval: .random(in: 0.5...2.5))
            switch Int.random(in: 0..<3) {
            case 0:
                try restart()
                kills += 1
            case 1:
                fillDisk(filler)
                Thread.sleep(forTimeInterval: .random(in: 0.3...2))
                try FileManager.default.removeItem(atPath: filler)
                fills += 1
            default:
                fillDisk(filler)
                Thread.sleep(forTimeInterval: .random(in: 0.2...1))
                kill(daemon.pid, SIGKILL)
                try FileManager.default.removeItem(atPath: filler)
                try restart()
                killsWhileFull += 1
            }
        }
        group.wait()
        // A clean stop writes any reward still waiting (the disk has room again), then a new
        // daemon reads the ledger back.
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        keepWhatItSaid()
        daemon = try DaemonProcess(config: Self.config, stateDir: state, socket: socket)
        // What lost or reset anything, if anything did: said whatever the outcome.
        let losses = said.filter { $0.contains("lost") || $0.contains("moved to") || $0.contains("could not be opened") || $0.contains("could not be read") }
        print("chaos: \(said.count) lines about caps and rewards; those about losses or resets:\n\(losses.suffix(50).joined(separator: "\n"))")

        var ledger: [JSONValue] = []
        var more = true
        while more {
            var parameters: [String: JSONValue] = ["limit": 1000]
            if let last = ledger.last?["trans_id"] { parameters["after"] = last }
            let page = try daemon.call("io.adorch.Ads.ListRewards", parameters)
            ledger += page["rewards"]?.arrayValue ?? []
            more = page["more"]?.boolValue ?? false
        }
        let ledgerAds = ledger.compactMap { $0["ad_id"]?.stringValue }
        let ledgerTrans = Set(ledger.compactMap { $0["trans_id"]?.stringValue })
        XCTAssertEqual(Set(ledgerAds).count, ledgerAds.count, "one reward per ad")
        XCTAssertEqual(ledgerTrans.count, ledger.count, "one row per transaction")

        var (shown, completed, told, refusals) = (0, 0, 0, [String: Int]())
        var shownAds = Set<String>()
        for uid in Self.apps {
            let lines = try String(contentsOf: journals[uid]!, encoding: .utf8).split(separator: "\n")
            let entries = lines.compactMap { try? JSONDecoder().decode(Told.self, from: Data($0.utf8)) }
            XCTAssertEqual(entries.last?.e, "end", "app \(uid) ran to its end")
            // Each show's (asked, answered): the daemon took the ad between the two.
            var times: [String: [(asked: Double, answered: Double)]] = [:]
            for entry in entries {
                switch entry.e {
                case "shown":
                    shown += 1
                    shownAds.insert(entry.ad!)
                    times[entry.user!, default: []].append((entry.asked!, entry.t!))
                case "completed":
                    completed += 1
                    XCTAssertTrue(ledgerAds.contains(entry.ad!), "app \(uid) was told its complete of \(entry.ad!) succeeded: not in the ledger")
                case "reward":
                    told += 1
                    XCTAssertTrue(ledgerTrans.contains(entry.trans!), "app \(uid) was told of reward \(entry.trans!): not in the ledger")
                case "refused", "not_yet", "complete_refused":
                    refusals["\(entry.e) \(entry.error ?? "")", default: 0] += 1
                default: break
                }
            }
            // No window of the cap holds more of a user's shows than it allows. The daemon took
            // each ad between its Show's ask and answer, so the later one's answer less the
            // earlier one's ask is the most time that can have passed between them: less than
            // the window is a show past the cap, whatever the latencies (10 ms for the
            // milliseconds the caps history keeps time in).
            for (user, shows) in times {
                let sorted = shows.sorted { $0.asked < $1.asked }
                for (first, last) in zip(sorted, sorted.dropFirst(Self.cap.impressions)) where last.answered - first.asked < Self.cap.window - 0.01 {
                    XCTFail("\(user) (uid \(uid)) got \(Self.cap.impressions + 1) ads within \(last.answered - first.asked) s, past the cap")
                }
            }
        }
        XCTAssertTrue(Set(ledgerAds).isSubset(of: shownAds), "a reward for an ad no app was shown: \(Set(ledgerAds).subtracting(shownAds))")
        XCTAssertGreaterThan(completed, 0, "no complete succeeded: the run proved nothing")
        print("chaos: \(Int(seconds)) s, \(kills) kills, \(fills) full disks, \(killsWhileFull) kills while full; \(shown) shown, \(completed) completes told OK, \(told) reward events, \(ledger.count) rewards in the ledger; refusals \(refusals.sorted { $0.key < $1.key })")
    }
}
