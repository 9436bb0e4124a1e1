import AdorchRewards
import AdorchVarlink
import ArgumentParser
import Foundation

struct Reward: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List and acknowledge rewards; sign or verify a server-to-server reward callback.",
        subcommands: [List.self, Ack.self, Sign.self, Verify.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Rewards granted and not acknowledged yet, oldest first.")
        @OptionGroup var connection: Connection
        @Option(help: "Only this user's rewards.") var userID: String?

        func run() throws {
            // The daemon answers a page at a time: ask on after the last row until none follow.
            var rows: [JSONValue] = []
            var more = true
            while more {
                var parameters: [String: JSONValue] = userID.map { ["user_id": .string($0)] } ?? [:]
                if let last = rows.last?["trans_id"] { parameters["after"] = last }
                let reply = try connection.call("io.adorch.Ads.ListRewards", parameters)
                rows += reply["rewards"]?.arrayValue ?? []
                more = reply["more"]?.boolValue ?? false
            }
            if connection.json { return connection.printJSON(["rewards": .array(rows)]) }
            for row in rows {
                print([row["trans_id"], row["user_id"], row["slot"], row["reward_amount"], row["reward_name"], row["granted_at"]]
                    .map { $0.map { $0.stringValue ?? $0.jsonString } ?? "-" }.joined(separator: "\t"))
            }
        }
    }

    struct Ack: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Acknowledge a reward (the app credited it): it is no longer delivered again.",
            discussion: "Only the user the rewarded ad was handed to, or root, may acknowledge it."
        )
        @OptionGroup var connection: Connection
        @Argument(help: "The reward's transaction id.") var transID: String

        func run() throws {
            let reply = try connection.call("io.adorch.Ads.AckReward", ["trans_id": .string(transID)])
            if connection.json { connection.printJSON(reply) }
        }
    }

    struct KeyFile: ParsableArguments {
        @Option(help: ArgumentHelp("The file with the app security key.", valueName: "file")) var keyFile: String

        func key() throws -> String {
            do {
                return try String(contentsOfFile: keyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            } catch {
                throw CtlError("cannot read the key from \(keyFile): \(error.localizedDescription)")
            }
        }
    }

    struct Sign: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print sha256(key + \":\" + trans_id), the callback's sign.")
        @OptionGroup var key: KeyFile
        @Argument(help: "The transaction id.") var transID: String

        func run() throws { print(RewardCallback.sign(key: try key.key(), transID: transID)) }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a callback's query string; print the JSON answer the network's server expects; exit 1 if it is not valid.",
            discussion: "Replays are checked by the daemon (io.adorch.Manager.VerifyRewardCallback), which remembers accepted transactions."
        )
        @OptionGroup var key: KeyFile
        @Argument(help: "user_id=…&trans_id=…&reward_name=…&reward_amount=…&extra=…&sign=…") var query: String

        func run() throws {
            let valid: Bool
            do {
                valid = RewardCallback.signatureIsValid(try RewardCallback.parse(query), key: try key.key())
            } catch let error as RewardCallback.Failure {
                FileHandle.standardError.write(Data("adorchctl: \(error)\n".utf8))
                valid = false
            }
            print(RewardCallback.body(isValid: valid))
            if !valid { throw ExitCode(1) }
        }
    }
}
