import AdorchVarlink
import ArgumentParser

struct Caps: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A slot's frequency caps and pacing: what each rule counts for a user now, and until when it holds.",
        discussion: """
            A user id is an app's own: --uid names the app whose Shows it is (default: your own uid). \
            Without --user: for Shows without a user id, which count as one user. Rules are set in the config (docs/caps.md).
            """
    )
    @OptionGroup var connection: Connection
    @Argument(help: "The slot id.") var slot: String
    @Option(help: ArgumentHelp("The app's user id, as Show gets it.", valueName: "id")) var user: String?
    @Option(help: ArgumentHelp("The uid of the app whose user it is.", valueName: "uid")) var uid: UInt32?

    func run() throws {
        var parameters: [String: JSONValue] = ["slot": .string(slot)]
        if let user { parameters["user_id"] = .string(user) }
        if let uid { parameters["uid"] = .int(Int64(uid)) }
        let reply = try connection.call("io.adorch.Manager.GetCaps", parameters)
        if connection.json { return connection.printJSON(reply) }
        let rules = reply["rules"]?.arrayValue ?? []
        guard !rules.isEmpty else { return print("\(slot) has no frequency rules: its Shows are not capped") }
        var rows = [["RULE", "COUNTED", "HOLDS"]]
        for rule in rules {
            let counted = "\(rule["counted"]?.intValue ?? 0) of \(rule["impressions"]?.intValue ?? 0)"
            let holds = rule["retry_after_ms"]?.intValue.map { "for \($0) ms, until \(rule["until"]?.stringValue ?? "?")" } ?? "no"
            rows.append([rule["rule"]?.stringValue ?? "?", counted, holds])
        }
        printTable(rows)
    }
}
