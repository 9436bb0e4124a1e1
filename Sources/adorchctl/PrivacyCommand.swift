import AdorchVarlink
import ArgumentParser
import Foundation

/// SetPrivacy and GetPrivacy as the calling user's app (docs/privacy.md, "Setting a viewer's
/// state"): what one sets is that uid's own, as for any app.
struct PrivacyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "privacy",
        abstract: "Set, show or clear the privacy signals of this user's app, or of one of its users.",
        subcommands: [Get.self, Set.self, Clear.self]
    )

    struct User: ParsableArguments {
        @Option(help: ArgumentHelp("The app's user id (default: the app as a whole).", valueName: "id")) var user: String?

        var parameters: [String: JSONValue] { user.map { ["user_id": .string($0)] } ?? [:] }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "What applies to calls for --user (or without one), and where it came from.")
        @OptionGroup var connection: Connection
        @OptionGroup var user: User

        func run() throws {
            let reply = try connection.call("io.adorch.Ads.GetPrivacy", user.parameters)
            if connection.json { return connection.printJSON(reply) }
            print("source: \(reply["source"]?.stringValue ?? "?")")
            for (key, value) in (reply["privacy"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
                print("\(key): \(value.stringValue ?? value.jsonString)")
            }
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set them, as a Privacy JSON object: {\"gdpr_applies\": true, \"tc_string\": \"CO…\", \"us_privacy\": \"1YNN\", …}.")
        @OptionGroup var connection: Connection
        @OptionGroup var user: User
        @Argument(help: ArgumentHelp("The Privacy object.", valueName: "json")) var privacy: String

        func run() throws {
            guard let object = JSONValue.parse(Data(privacy.utf8)), object.objectValue != nil else {
                throw CtlError("the privacy must be a JSON object, got \(privacy)")
            }
            var parameters = user.parameters
            parameters["privacy"] = object
            let reply = try connection.call("io.adorch.Ads.SetPrivacy", parameters)
            if connection.json { connection.printJSON(reply) }
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Clear them: the app's record (or none) applies again.")
        @OptionGroup var connection: Connection
        @OptionGroup var user: User

        func run() throws {
            let reply = try connection.call("io.adorch.Ads.SetPrivacy", user.parameters)
            if connection.json { connection.printJSON(reply) }
        }
    }
}
