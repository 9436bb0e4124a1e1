import AdorchPaths
import AdorchVarlink
import ArgumentParser
import Foundation

AdorchCtl.main()

struct AdorchCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adorchctl",
        abstract: "Talks to adorchd over its Varlink socket.",
        discussion: "The socket is --socket, else $ADORCH_SOCKET, else this user's daemon's (\(DefaultPaths.socket)) if it exists, else the system service's (\(SocketPath.system)) if that exists, else this user's.",
        version: AdorchVersion.current,
        subcommands: [Status.self, Slots.self, Caps.self, Show.self, Load.self, Report.self, Interactive.self, PrivacyCommand.self, Events.self, Reload.self, Reward.self, Metrics.self]
    )
}

struct Connection: ParsableArguments {
    @Option(help: ArgumentHelp("The daemon's socket.", valueName: "path"))
    var socket: String?

    @Flag(help: "Print the daemon's JSON reply instead of a table.")
    var json = false

    var path: String { DefaultPaths.clientSocket(socket) }

    func client() throws -> VarlinkClient {
        do {
            return try VarlinkClient(path: path)
        } catch {
            throw CtlError("cannot reach adorchd at \(path): \(error) (is it running? `make run` starts one)")
        }
    }

    /// One call; an error reply becomes a failure naming the error and its message.
    func call(_ method: String, _ parameters: [String: JSONValue] = [:]) throws -> [String: JSONValue] {
        let reply: VarlinkClient.Reply
        do { reply = try client().call(method, parameters) } catch { throw CtlError("\(method): \(error)") }
        if let error = reply.error { throw CtlError(describe(error: error, parameters: reply.parameters)) }
        return reply.parameters
    }

    func printJSON(_ value: [String: JSONValue]) { print(JSONValue.object(value).prettyString) }
}

struct CtlError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func describe(error: String, parameters: [String: JSONValue]) -> String {
    let message = parameters["message"]?.stringValue ?? parameters.values.compactMap(\.stringValue).first
    return message.map { "\(error): \($0)" } ?? error
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The daemon, its plugins and slots, with counters.")
    @OptionGroup var connection: Connection

    func run() throws {
        let s = try connection.call("io.adorch.Manager.GetStatus")
        if connection.json { return connection.printJSON(s) }
        let uptime = Int(s["uptime_s"]?.doubleValue ?? 0)
        print("adorchd \(s["version"]?.stringValue ?? "?"), pid \(s["pid"]?.intValue ?? 0), up \(uptime / 3600)h \(uptime / 60 % 60)m \(uptime % 60)s")
        print("socket \(s["socket"]?.stringValue ?? "?"), config \(s["config"]?.stringValue ?? "?")")
        let c = s["connections"], l = s["limits"]
        func n(_ v: JSONValue?) -> String { v?.intValue.map(String.init) ?? v?.doubleValue.map { String(format: "%g", $0) } ?? "?" }
        print("connections: \(n(c?["open"])) open, \(n(c?["accepted"])) accepted, \(n(c?["refused"])) refused at once, "
              + "\(n(c?["closed_idle"])) closed idle, \(n(c?["dropped_slow_readers"])) dropped for unread replies, "
              + "\(n(c?["incomplete_messages"])) cut off mid-message, \(n(c?["dropped_pending_bytes"])) dropped for unhandled input; "
              + "subscribers: \(n(s["subscribers"]))")
        // Every budget and refusal count the daemon reports, by its [limits] key: a new one
        // shows here without a change to adorchctl.
        let budgets = (l?.objectValue ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\(n($0.value))" }
        print("limits:", budgets.joined(separator: " "))
        if let m = s["metrics"] {
            let listen = m["listen"]?.stringValue ?? "?"
            print(m["listening"]?.boolValue == true ? "metrics: serving http://\(listen)/metrics"
                                                    : "metrics: not listening on \(listen): \(m["error"]?.stringValue ?? "?")")
        }
        print()
        var plugins = [["PLUGIN", "STATE", "VERSION", "ABI", "RUNS", "CRASHES", "DETAIL"]]
        for p in s["plugins"]?.arrayValue ?? [] {
            let crashed = p["last_crash"]?.stringValue.map { "last crash: \($0)" }
            let detail = p["error"]?.stringValue
                ?? (p["state"]?.stringValue == "restarting" ? crashed : nil)
                ?? p["stats"]?.objectValue.map { stats in
                    stats.keys.sorted().map { "\($0)=\(stats[$0]!.intValue.map(String.init) ?? stats[$0]!.jsonString)" }.joined(separator: " ")
                } ?? crashed ?? ""
            let runs = p["isolation"]?.stringValue.map { $0 == "process" ? p["pid"]?.intValue.map { "pid \($0)" } ?? "no process" : $0 } ?? "-"
            plugins.append([p["name"]?.stringValue ?? "?", p["state"]?.stringValue ?? "?", p["version"]?.stringValue ?? "-",
                            p["abi"]?.stringValue ?? "-", runs, p["crashes"]?.intValue.map(String.init) ?? "-", detail])
        }
        printTable(plugins)
        print()
        var slots = [["SLOT", "FORMAT", "READY", "LOADING", "SHOWS", "LOADS", "FILLS", "NO-FILL", "ERRORS", "TIMEOUTS", "EXPIRED", "IGNORED", "VIOLATIONS"]]
        for slot in s["slots"]?.arrayValue ?? [] {
            let c = slot["counters"]
            func n(_ key: String) -> String { String(c?[key]?.intValue ?? 0) }
            slots.append([slot["id"]?.stringValue ?? "?", slot["format"]?.stringValue ?? "?",
                          "\(slot["ready"]?.intValue ?? 0)/\(slot["buffer"]?.intValue ?? 0)", String(slot["loading"]?.intValue ?? 0),
                          n("shows"), n("loads"), n("fills"), n("no_fills"), n("errors"), n("timeouts"), n("expired"),
                          n("ignored_callbacks"), n("contract_violations")])
        }
        printTable(slots)
    }
}

struct Slots: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Each slot and how many ads it has ready.")
    @OptionGroup var connection: Connection
    @Option(help: ArgumentHelp("Say which slots a frequency rule holds for this user id of yours (default: for Shows without one); an app's users: adorchctl caps --uid.",
                               valueName: "id")) var user: String?

    func run() throws {
        let reply = try connection.call("io.adorch.Ads.ListSlots", user.map { ["user_id": .string($0)] } ?? [:])
        if connection.json { return connection.printJSON(reply) }
        // New columns go last: scripts that read the first five keep working.
        var rows = [["SLOT", "FORMAT", "BUFFER", "READY", "LOADING", "BOUNDS", "DEMAND/MIN", "WHY", "CAPPED"]]
        for slot in reply["slots"]?.arrayValue ?? [] {
            let (low, high) = (slot["buffer_min"]?.intValue ?? 0, slot["buffer_max"]?.intValue ?? 0)
            let demand = slot["demand"]
            rows.append([slot["id"]?.stringValue ?? "?", slot["format"]?.stringValue ?? "?", String(slot["buffer"]?.intValue ?? 0),
                         String(slot["ready"]?.intValue ?? 0), String(slot["loading"]?.intValue ?? 0),
                         high == 0 ? "-" : low == high ? "fixed" : "\(low)-\(high)",
                         demand?["per_minute"]?.doubleValue.map { String(format: "%.2f", $0) } ?? "-",
                         demand?["reason"]?.stringValue ?? "-",
                         slot["capped"].map { "\($0["rule"]?.stringValue ?? "?") for \($0["retry_after_ms"]?.intValue ?? 0) ms" } ?? "-"])
        }
        printTable(rows)
    }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Take the best valid ad of a slot (it is then shown: no one else gets it).")
    @OptionGroup var connection: Connection
    @Argument(help: "The slot id.") var slot: String
    @Option(help: ArgumentHelp("The app's user id (required for rewarded slots).", valueName: "id")) var user: String?

    func run() throws {
        var parameters: [String: JSONValue] = ["slot": .string(slot)]
        if let user { parameters["user_id"] = .string(user) }
        let reply = try connection.call("io.adorch.Ads.Show", parameters)
        if connection.json { return connection.printJSON(reply) }
        reply["ad"].map(printAd)
    }
}

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Load ads of a banner, splash or native slot now (they are handed to you).")
    @OptionGroup var connection: Connection
    @Argument(help: "The slot id.") var slot: String
    @Option(help: "How many native ads, 1 to 10 (default: the slot's).") var count: Int?
    @Option(help: "Banner width in points.") var width: Int?
    @Option(help: "Banner height in points.") var height: Int?
    @Option(help: ArgumentHelp("The overall deadline (default: the slot's).", valueName: "ms")) var timeoutMs: Int?

    func run() throws {
        var parameters: [String: JSONValue] = ["slot": .string(slot)]
        for (key, value) in [("count", count), ("width", width), ("height", height), ("timeout_ms", timeoutMs)] {
            if let value { parameters[key] = .int(Int64(value)) }
        }
        let reply = try connection.call("io.adorch.Ads.Load", parameters)
        if connection.json { return connection.printJSON(reply) }
        (reply["ads"]?.arrayValue ?? []).forEach(printAd)
    }
}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Report what the viewer did with a shown ad.")
    @OptionGroup var connection: Connection
    @Argument(help: "The ad id Show returned.") var adID: String
    @Argument(help: "impression, click, close, complete or skip.") var event: String

    func run() throws {
        let reply = try connection.call("io.adorch.Ads.Report", ["ad_id": .string(adID), "event": .string(event)])
        if connection.json { connection.printJSON(reply) }
    }
}


struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Recent events; with --follow, then every new one as it happens.")
    @OptionGroup var connection: Connection
    @Flag(name: .shortAndLong, help: "Keep printing new events until interrupted.") var follow = false
    @Option(help: ArgumentHelp("Only this slot's events (repeatable).", valueName: "id")) var slot: [String] = []
    @Option(help: "How many recent events to print first.") var lines = 20

    func run() throws {
        let slots: JSONValue? = slot.isEmpty ? nil : .array(slot.map { .string($0) })
        var stream: VarlinkClient?
        if follow {
            // Subscribed before the history is read, so no event falls between the two.
            let client = try connection.client()
            var parameters: [String: JSONValue] = [:]
            if let slots { parameters["slots"] = slots }
            let first = try client.call("io.adorch.Ads.Subscribe", parameters, more: true)
            if let error = first.error { throw CtlError(describe(error: error, parameters: first.parameters)) }
            stream = client
        }
        var parameters: [String: JSONValue] = ["limit": .int(Int64(lines))]
        if let slots { parameters["slots"] = slots }
        for event in try connection.call("io.adorch.Ads.ListEvents", parameters)["events"]?.arrayValue ?? [] { emit(event) }
        guard let stream else { return }
        while true {
            let reply: VarlinkClient.Reply
            do { reply = try stream.nextReply() } catch { throw CtlError("event stream ended: \(error)") }
            if let error = reply.error { throw CtlError(describe(error: error, parameters: reply.parameters)) }
            if let event = reply.parameters["event"] { emit(event) }
            if !reply.continues { return }
        }
    }

    private func emit(_ event: JSONValue) {
        if connection.json {
            print(event.jsonString)
        } else {
            let fields = ["slot", "ad_id", "session_id", "name", "network", "error", "viewer_event", "ad_free_pod", "message"].compactMap { key in
                event[key].map { key == "message" ? ($0.stringValue ?? "") : "\(key)=\($0.stringValue ?? $0.jsonString)" }
            }
            print("\(event["time"]?.stringValue ?? "") \(event["kind"]?.stringValue ?? "?") \(fields.joined(separator: " "))")
        }
        fflush(nil)
    }
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Make the daemon read its config again (like systemctl reload).")
    @OptionGroup var connection: Connection

    func run() throws {
        let reply = try connection.call("io.adorch.Manager.Reload")
        if connection.json { return connection.printJSON(reply) }
        print("reloaded: \(reply["summary"]?.stringValue ?? "")")
    }
}

struct Metrics: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The daemon's metrics as Prometheus text (docs/metrics.md).",
        discussion: "text is the classic 0.0.4 format, which `promtool check metrics` checks; openmetrics is OpenMetrics 1.0."
    )
    @OptionGroup var connection: Connection

    @Option(help: ArgumentHelp("text or openmetrics.", valueName: "format"))
    var format = "text"

    func run() throws {
        let reply = try connection.call("io.adorch.Manager.GetMetrics", ["format": .string(format)])
        if connection.json { return connection.printJSON(reply) }
        print(reply["text"]?.stringValue ?? "", terminator: "")
    }
}

/// An ad handed out: one line about it, then its payload.
func printAd(_ ad: JSONValue) {
    print("ad \(ad["id"]?.stringValue ?? "?") from \(ad["network"]?.stringValue ?? "?") in \(ad["slot"]?.stringValue ?? "?"), expires \(ad["expires_at"]?.stringValue ?? "?")")
    print(ad["payload"]?.prettyString ?? "{}")
}

/// Left-aligned columns, two spaces apart.
func printTable(_ rows: [[String]]) {
    let widths = rows.reduce(into: [Int]()) { widths, row in
        for (i, cell) in row.enumerated() {
            if i == widths.count { widths.append(cell.count) } else { widths[i] = max(widths[i], cell.count) }
        }
    }
    for row in rows {
        let cells = row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
        print(cells.joined(separator: "  "))
    }
}
