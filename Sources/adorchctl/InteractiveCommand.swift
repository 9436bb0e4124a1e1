import AdorchVarlink
import ArgumentParser
import Foundation

struct Interactive: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run interactive ad sessions (the renderer's init, start, pause, resume, stop).",
        subcommands: [Run.self, Init.self, Call.self]
    )

    struct Request: ParsableArguments {
        @Argument(help: "An interactive slot's id.") var slot: String
        @Option(help: "The creative URL the app's ad response gave.") var creativeURL = "https://creative.invalid/interactive.js"
        @Option(help: ArgumentHelp("The ad's AdParameters, a JSON object.", valueName: "json")) var adParameters = "{}"
        @Option(help: "preroll or midroll.") var slotType = "midroll"

        func parameters() throws -> [String: JSONValue] {
            guard let object = JSONValue.parse(Data(adParameters.utf8)), object.objectValue != nil else {
                throw CtlError("--ad-parameters must be a JSON object, got \(adParameters)")
            }
            return ["slot": .string(slot), "creative_url": .string(creativeURL), "ad_parameters": object, "slot_type": .string(slotType)]
        }
    }

    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Init and start a session, print its events until the terminal one; exit 1 unless it completed."
        )
        @OptionGroup var connection: Connection
        @OptionGroup var request: Request

        func run() throws {
            // Subscribed first, so the session's first event cannot be missed.
            let stream = try connection.client()
            let first = try stream.call("io.adorch.Ads.Subscribe", ["slots": [.string(request.slot)]], more: true)
            if let error = first.error { throw CtlError(describe(error: error, parameters: first.parameters)) }
            let session = try connection.call("io.adorch.Ads.InitInteractive", try request.parameters())["session_id"] ?? .null
            _ = try connection.call("io.adorch.Ads.Start", ["session_id": session])
            if !connection.json { print("session \(session.stringValue ?? "?") started in \(request.slot)") }
            while true {
                let reply: VarlinkClient.Reply
                do { reply = try stream.nextReply() } catch { throw CtlError("event stream ended: \(error)") }
                guard let event = reply.parameters["event"], event["session_id"] == session else { continue }
                if connection.json {
                    print(event.jsonString)
                } else {
                    let detail = event["detail"].map { " \($0.jsonString)" } ?? ""
                    let message = event["message"]?.stringValue.map { ": \($0)" } ?? ""
                    print("\(event["name"]?.stringValue ?? "?")\(detail)\(message)")
                }
                fflush(nil)
                if event["terminal"] == true {
                    if !connection.json { print("ad_free_pod: \(event["ad_free_pod"] == true ? "yes, skip the pod's other ads" : "no, play the pod")") }
                    if event["name"] != "completed" { throw ExitCode(1) }
                    return
                }
            }
        }
    }

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Init a session (it fetches at once); print its id.")
        @OptionGroup var connection: Connection
        @OptionGroup var request: Request

        func run() throws {
            let reply = try connection.call("io.adorch.Ads.InitInteractive", try request.parameters())
            if connection.json { return connection.printJSON(reply) }
            print(reply["session_id"]?.stringValue ?? "")
        }
    }

    struct Call: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "call", abstract: "Start, pause, resume or stop a session.")
        @OptionGroup var connection: Connection
        @Argument(help: "start, pause, resume or stop.") var operation: String
        @Argument(help: "The session id Init printed.") var sessionID: String

        func run() throws {
            guard ["start", "pause", "resume", "stop"].contains(operation) else {
                throw ValidationError("the operation is start, pause, resume or stop, got \(operation)")
            }
            _ = try connection.call("io.adorch.Ads.\(operation.prefix(1).uppercased() + operation.dropFirst())", ["session_id": .string(sessionID)])
        }
    }
}
