import AdorchLocking
import AdorchJSON
import Foundation
import Synchronization

/// An event stream that has been answered (`subscribed` seen, not passed on): every event
/// after that moment is in `events`. Ends when cancelled or dropped.
struct Subscription: Sendable {
    let events: AsyncThrowingStream<Event, any Error>
    private let relay: Task<Void, Never>

    /// Subscribes to `slots` and returns once the daemon answered, so nothing done after it
    /// is missed; the answer is awaited `client.callTimeout`, as a call's reply is.
    init(_ client: Client, slots: [String]) async throws {
        self = try await withTimeout(client.callTimeout, "answer to Subscribe from \(client.socketPath)") {
            try await Subscription(subscribing: client, slots: slots)
        }
    }

    private init(subscribing client: Client, slots: [String]) async throws {
        let (events, continuation) = AsyncThrowingStream.makeStream(of: Event.self)
        let (answered, answer) = AsyncStream.makeStream(of: (any Error)?.self)
        let relay = Task {
            var first = true
            do {
                for try await event in client.events(slots: slots) {
                    if first {
                        first = false
                        answer.yield(nil)
                        answer.finish()
                    } else {
                        continuation.yield(event)
                    }
                }
                // The events end without an error only when cancelled or the client closed.
                continuation.finish()
                answer.yield(client.closedError ?? CancellationError())
            } catch {
                continuation.finish(throwing: error)
                // Why the subscription failed (cannot connect...), if it was never answered.
                answer.yield(error)
            }
            answer.finish()
        }
        self.events = events
        self.relay = relay
        continuation.onTermination = { _ in relay.cancel() }
        for await error in answered {
            if let error {
                relay.cancel()
                throw error
            }
            return
        }
        relay.cancel()
        throw CancellationError()
    }

    func cancel() { relay.cancel() }
}

/// `operation`, or `.timeout` once `timeout` has passed (`what` says what was awaited); nil
/// waits for ever. The operation is cancelled then, and every wait of the library ends at once
/// when cancelled, so the timeout is not held up.
func withTimeout<T: Sendable>(_ timeout: Duration?, _ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    guard let timeout else { return try await operation() }
    return try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw AdorchError(.timeout, message: "no \(what) within \(timeout)")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// A slot of a preloaded format: `RewardedAd`, `InterstitialAd` and `FullscreenAd` are this.
/// The daemon keeps its ads loaded; `load` only waits until one is ready.
public struct PreloadedAd: Sendable {
    public let client: Client
    public let slot: String

    public init(client: Client, slot: String) {
        self.client = client
        self.slot = slot
    }

    /// Whether the slot has a valid ad ready now.
    public func isReady() async throws -> Bool {
        guard let found = try await client.listSlots().first(where: { $0.id == slot }) else {
            throw AdorchError(name: "io.adorch.Ads.SlotNotFound", parameters: ["slot": .string(slot), "message": "no slot has this id"])
        }
        return found.ready > 0
    }

    /// Returns once the slot has a valid ad ready: at once if it has, else at its next
    /// ad_loaded; `.timeout` when `timeout` (the whole of it: subscribing, asking, waiting) passed.
    public func load(timeout: Duration = .seconds(30)) async throws {
        let format = self
        try await withTimeout(timeout, "ad loaded in \(slot)") {
            let subscription = try await Subscription(format.client, slots: [format.slot])
            defer { subscription.cancel() }
            if try await format.isReady() { return }
            for try await event in subscription.events where event.kind == EventKind.adLoaded && event.slot == format.slot { return }
            throw CancellationError()
        }
    }

    /// Takes the slot's best ad and has its network present it (Show). A rewarded slot
    /// needs `userID`. The returned ad's callbacks come from a subscription made before the
    /// Show, so none is missed.
    public func show(userID: String? = nil, reward: RewardModel? = nil) async throws -> ShownAd {
        let subscription = try await Subscription(client, slots: [slot])
        do {
            let ad = try await client.show(slot: slot, userID: userID, reward: reward)
            return ShownAd(client: client, ad: ad, userID: userID, subscription: subscription)
        } catch {
            subscription.cancel()
            throw error
        }
    }
}

public typealias RewardedAd = PreloadedAd
public typealias InterstitialAd = PreloadedAd
public typealias FullscreenAd = PreloadedAd

/// What happened to a shown ad, as an ad SDK's listener hears it.
public enum AdCallback: Sendable, Equatable {
    case impression
    case click
    case close
    case reward(Reward)
    case failedToDisplay
    /// Any other event of this ad (ad_shown, presented, play_finished, ...).
    case other(Event)
}

/// An ad the daemon handed to the app: the IDL's `Ad`, its reports and its callbacks.
public final class ShownAd: Sendable {
    public let ad: Ad
    public var id: String { ad.id }
    public var slot: String { ad.slot }
    public var network: String { ad.network }
    public var format: String { ad.format }
    public var payload: [String: JSONValue] { ad.payload }
    public var expiresAt: String { ad.expiresAt }
    public var price: Double { ad.price }

    /// This ad's callbacks in order, until `close`: each use is a stream of its own, from the
    /// first callback, so any number of tasks may listen. A reward is passed on once, though
    /// a new subscription (after a daemon restart) delivers it again.
    public var callbacks: AsyncStream<AdCallback> { heard.stream() }

    private let client: Client
    private let userID: String?
    private let subscription: Subscription
    private let listener: Task<Void, Never>
    private let reward: RewardBox
    private let heard: Replay<AdCallback>

    init(client: Client, ad: Ad, userID: String?, subscription: Subscription) {
        self.ad = ad
        self.client = client
        self.userID = userID
        self.subscription = subscription
        let reward = RewardBox()
        self.reward = reward
        let heard = Replay<AdCallback>()
        self.heard = heard
        let id = ad.id
        listener = Task {
            var rewarded: Set<String> = []
            do {
                for try await event in subscription.events where event.adID == id {
                    let callback = Self.callback(of: event)
                    if case .reward(let granted) = callback {
                        guard rewarded.insert(granted.transID).inserted else { continue }
                        reward.set(granted)
                    }
                    heard.yield(callback)
                    if callback == .close { break }
                }
            } catch {
                // The stream ended (the client could not reconnect): callbacks end too, and
                // waitReward still asks the ledger.
            }
            heard.finish()
            subscription.cancel()
        }
    }

    deinit {
        listener.cancel()
        subscription.cancel()
    }

    private static func callback(of event: Event) -> AdCallback {
        if let reward = event.reward { return .reward(reward) }
        switch event.name {
        case "impression": return .impression
        case "click": return .click
        case "closed": return .close
        case "failed_to_display": return .failedToDisplay
        default: return .other(event)
        }
    }

    public func report(_ event: ViewerEvent) async throws { try await client.report(adID: ad.id, event: event) }
    public func impression() async throws { try await report(.impression) }
    public func click() async throws { try await report(.click) }
    public func complete() async throws { try await report(.complete) }
    public func skip() async throws { try await report(.skip) }
    public func close() async throws { try await report(.close) }

    /// The reward this ad earned: from its reward_granted event, or from the ledger if it was
    /// granted while no stream of this ad was listening. Not acknowledged: call `ack` once
    /// the app has credited it.
    public func waitReward(timeout: Duration = .seconds(30)) async throws -> Reward {
        let (client, reward, id, userID) = (client, reward, ad.id, userID)
        return try await withTimeout(timeout, "reward for ad \(id)") {
            var after: String?
            repeat {
                let page = try await client.listRewards(userID: userID, after: after)
                if let granted = page.rewards.first(where: { $0.adID == id }) { reward.set(granted) }
                after = page.more ? page.rewards.last?.transID : nil
            } while after != nil && reward.value == nil
            return try await reward.wait()
        }
    }

    /// The app has credited `reward` to its user (AckReward).
    public func ack(_ reward: Reward) async throws { try await client.ackReward(reward.transID) }
}

/// One reward, set once, awaited by any number of tasks.
private final class RewardBox: Sendable {
    private struct State {
        var reward: Reward?
        var waiters: [UUID: CheckedContinuation<Reward, any Error>] = [:]
    }
    private let state = LockedValue(State())

    var value: Reward? { state.withLock { $0.reward } }

    func set(_ reward: Reward) {
        let waiters = state.withLock { state -> [CheckedContinuation<Reward, any Error>] in
            guard state.reward == nil else { return [] }
            state.reward = reward
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: reward) }
    }

    func wait() async throws -> Reward {
        let key = UUID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready: Result<Reward, any Error>? = state.withLock { state in
                    if let reward = state.reward { return .success(reward) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[key] = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: key) }?.resume(throwing: CancellationError())
        }
    }
}

/// A banner slot: each load is one ad, handed to the app (report on it with the client).
public struct BannerAd: Sendable {
    public let client: Client
    public let slot: String
    public init(client: Client, slot: String) { self.client = client; self.slot = slot }

    public func load(width: Int? = nil, height: Int? = nil, timeoutMs: Int? = nil, targeting: [String: JSONValue]? = nil) async throws -> Ad {
        try await first(client.load(slot: slot, count: 1, width: width, height: height, timeoutMs: timeoutMs, targeting: targeting), of: slot)
    }
}

/// A splash slot: one ad within the slot's short timeout (2 s by default).
public struct SplashAd: Sendable {
    public let client: Client
    public let slot: String
    public init(client: Client, slot: String) { self.client = client; self.slot = slot }

    public func load(timeoutMs: Int? = nil, targeting: [String: JSONValue]? = nil) async throws -> Ad {
        try await first(client.load(slot: slot, count: 1, timeoutMs: timeoutMs, targeting: targeting), of: slot)
    }
}

/// A native slot: 1 to 10 ads per load (3 recommended).
public struct NativeAdLoader: Sendable {
    public let client: Client
    public let slot: String
    public init(client: Client, slot: String) { self.client = client; self.slot = slot }

    public func load(count: Int? = nil, timeoutMs: Int? = nil, targeting: [String: JSONValue]? = nil) async throws -> [Ad] {
        try await client.load(slot: slot, count: count, timeoutMs: timeoutMs, targeting: targeting)
    }
}

/// A Load's one ad; a Load answers ads or an error, so none is a malformed reply.
private func first(_ ads: [Ad], of slot: String) throws -> Ad {
    guard let ad = ads.first else { throw AdorchError(.malformedReply, message: "Load of \(slot) answered no ad") }
    return ad
}

/// An interactive ad session: made with InitInteractive (it fetches at once), started at the
/// break; `events` are its session events up to and including the terminal one.
public final class InteractiveSession: Sendable {
    public let id: String
    public let slot: String
    /// session_event events of this session, ending after the terminal one (completed,
    /// no_ads_available, error or stopped; its `adFreePod` says whether to skip the pod).
    /// Each use is a stream of its own, from the first event: any number of tasks may iterate.
    public var events: AsyncThrowingStream<Event, any Error> { heard.throwingStream() }
    private let heard: Replay<Event>
    private let client: Client
    private let subscription: Subscription
    private let relay: Task<Void, Never>

    /// Subscribes to the slot (so no event is missed), then InitInteractive.
    public init(client: Client, slot: String, creativeURL: String, adParameters: [String: JSONValue] = [:], slotType: SlotType) async throws {
        let subscription = try await Subscription(client, slots: [slot])
        let id: String
        do {
            id = try await client.initInteractive(slot: slot, creativeURL: creativeURL, adParameters: adParameters, slotType: slotType)
        } catch {
            subscription.cancel()
            throw error
        }
        self.id = id
        self.slot = slot
        self.client = client
        self.subscription = subscription
        let heard = Replay<Event>()
        self.heard = heard
        relay = Task {
            do {
                for try await event in subscription.events where event.kind == EventKind.sessionEvent && event.sessionID == id {
                    heard.yield(event)
                    if event.terminal == true { break }
                }
                heard.finish()
            } catch {
                heard.finish(throwing: error)
            }
            subscription.cancel()
        }
    }

    deinit {
        relay.cancel()
        subscription.cancel()
    }

    public func start() async throws { try await client.start(sessionID: id) }
    public func pause() async throws { try await client.pause(sessionID: id) }
    public func resume() async throws { try await client.resume(sessionID: id) }
    public func stop() async throws { try await client.stop(sessionID: id) }
}
