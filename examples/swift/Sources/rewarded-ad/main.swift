import AdorchClient
import Foundation

// Shows a rewarded ad and prints the reward: what a game does when the player asks for an
// extra life. The daemon's socket: $ADORCH_SOCKET, else the usual place (Client.init).
let slot = CommandLine.arguments.dropFirst().first ?? "rewarded_main"
let client = Client()
let rewarded = RewardedAd(client: client, slot: slot)

do {
    try await rewarded.load(timeout: .seconds(30))
    let ad = try await rewarded.show(userID: "player-1")
    print("showing ad \(ad.id) of \(ad.network) in \(ad.slot)")
    let listener = Task {
        for await callback in ad.callbacks {
            switch callback {
            case .other(let event): print("event: \(event.name ?? event.kind)")
            case .reward(let reward): print("callback: reward \(reward.transID)")
            default: print("callback: \(callback)")
            }
        }
    }
    // The app renders ad.payload here; the viewer watches it to the end.
    try await ad.impression()
    try await ad.complete()
    let reward = try await ad.waitReward(timeout: .seconds(30))
    print("reward: \(reward.rewardAmount) \(reward.rewardName) for \(reward.userID) (transaction \(reward.transID))")
    // Credit the player first, then tell the daemon: it offers the reward again until then.
    try await ad.ack(reward)
    try await ad.close()
    await listener.value
} catch {
    print("rewarded ad failed: \(error)")
    exit(1)
}
