import AdorchFuzzSupport
import AdorchRewards
import Foundation

/// The query string of a server-to-server reward callback, as VerifyRewardCallback gets it.
func fuzzRewards(_ data: Data) {
    guard let query = try? RewardCallback.parse(String(decoding: data, as: UTF8.self)) else { return }
    _ = RewardCallback.signatureIsValid(query, key: "fuzz-key")
}

@main enum Main { static func main() { FuzzTarget.main(fuzzRewards) } }
