import AdorchEngine
import AdorchPluginHost
import AdorchVarlink
import Dispatch
import Foundation
import Logging

/// [engine queue] Where engine events go: the journal, the latest events for ListEvents,
/// and the Subscribe streams. An event's JSON is made only when someone reads it.
///
/// Part of the engine queue's state (RuntimeState): reached only through EngineRuntime.
final class EventFeed {
    /// Events ListEvents can still return, in all: each slot keeps its share (RecentEvents).
    static let recentKept = 512

    private let logger: Logger
    private let ids: ExternalIDs
    /// Set once the socket is served; events before that reach only the journal and `recent`.
    var server: VarlinkServer?
    private var recent = RecentEvents(capacity: recentKept)
    private var subscribers: [UInt64: Subscriber] = [:]
    private var nextSubscriber: UInt64 = 1
    /// Lines about each plugin's ads and callbacks, by network (admitLine).
    private var eventLines: [String: SecondWindow] = [:]
    /// Events about each plugin's ads and callbacks sent to subscribers, by network: at most
    /// CallbackBounds.publishedEventsPerSecond each (admitPublication).
    private var published: [String: SecondWindow] = [:]

    init(logger: Logger, ids: ExternalIDs) {
        self.logger = logger
        self.ids = ids
    }

    var subscriberCount: Int {
        return subscribers.count
    }

    /// Events whose every line an operator needs, whatever the plugin's budget: a reward
    /// granted is a payout (each one already went through the ledger), and a network's
    /// rate-limit pause comes at most once per pause. A plugin's crash or disablement is not
    /// an event: the registry logs it, outside any budget.
    static let alwaysLogged: Set<EngineEvent.Kind> = [.rewardGranted, .networkPaused]

    /// The lines about one plugin's doings, every event that names its network but
    /// `alwaysLogged` (its loads' ends, its ads' expiry, replacement and shows, its events,
    /// ignored callbacks and contract violations), make at most as many a second as its own
    /// log lines may (plugin.h, ADORCH_LOG_LINES_PER_S): the events still go to ListEvents and,
    /// within their own bound (admitPublication), to subscribers, and the count of lines left out is said once a second. Counting only
    /// some kinds let a plugin whose ads expired at once log 15,500 lines a second.
    private func admitLine(of event: EngineEvent) -> Bool {
        guard !Self.alwaysLogged.contains(event.kind), let network = event.network else { return true }
        let window = eventLines[network] ?? SecondWindow(perSecond: CallbackBounds.logLinesPerSecond)
        eventLines[network] = window
        return window.admit(warning: logger, metadata: ["plugin": "\(network)"]) { dropped in
            "plugin \(network): \(dropped) lines about its ads and callbacks left out of the log in the last second (over \(CallbackBounds.logLinesPerSecond)); ListEvents has every event"
        }
    }

    private func admitPublication(of event: EngineEvent) -> Bool {
        guard !Self.alwaysLogged.contains(event.kind), let network = event.network else { return true }
        // Paced within the second as callbacks are: a second's worth sent at once held Shows
        // up 300 ms behind its encoding and writing.
        let window = published[network] ?? SecondWindow(perSecond: CallbackBounds.publishedEventsPerSecond, slices: CallbackBounds.callbackSlicesPerSecond)
        published[network] = window
        return window.admit(warning: logger, metadata: ["plugin": "\(network)"]) { dropped in
            "plugin \(network): \(dropped) events about its ads and callbacks not sent to subscribers in the last second (over \(CallbackBounds.publishedEventsPerSecond)); ListEvents keeps them"
        }
    }

    /// An event about an ad a uid holds (`EngineEvent.holder`) goes to it and the Manager side only.
    func publish(_ reported: EngineEvent) {
        var event = reported
        if event.kind == .session, event.message == nil,
           let message = event.detailJSON.flatMap({ JSONValue.parse(Data($0.utf8)) })?.objectValue?["message"]?.stringValue {
            event.message = message  // a renderer's error, from its detail
        }
        let level = event.logLevel
        if logger.logLevel <= level, admitLine(of: event) {
            logger.log(level: level, "\(event.logLine(ids))", metadata: event.logMetadata(ids))
        }
        let now = Date()
        recent.append(Recent(event: event, time: now))
        // The bound before the subscribers are looked at: a flood past it costs no more.
        guard !subscribers.isEmpty, let server, admitPublication(of: event) else { return }
        let listening = subscribers.values.filter { $0.wants(event.slot) && $0.viewer.sees(event) }
        guard !listening.isEmpty else { return }
        server.broadcast(["event": event.json(at: now, ids)], to: listening.map(\.replier))
    }

    /// The latest `limit` events of `slots` (all if nil) that `viewer` may see, oldest first.
    func recentEvents(slots: Set<String>?, limit: Int, viewer: Viewer) -> [JSONValue] {
        let matching = recent.elements.filter { kept in
            (slots.map { s in kept.event.slot.map(s.contains) ?? false } ?? true) && viewer.sees(kept.event)
        }
        return matching.suffix(limit).map { $0.event.json(at: $0.time, ids) }
    }

    /// From here on `replier` streams the events of `slots` that `viewer` may see, until
    /// `unsubscribe` with the id returned (when its connection closes). The first reply says the
    /// subscription is in place and how many of the rewards `viewer` may see wait
    /// unacknowledged beyond those redelivered.
    func subscribe(slots: Set<String>?, viewer: Viewer, replier: VarlinkReplier, rewardsWaiting: Int) -> UInt64 {
        let id = nextSubscriber
        nextSubscriber += 1
        subscribers[id] = Subscriber(slots: slots, viewer: viewer, replier: replier)
        replier.reply(["event": ["kind": "subscribed", "time": .string(timestamp(Date())), "rewards_waiting": .int(Int64(rewardsWaiting))]],
                     continues: true)
        return id
    }

    func unsubscribe(_ id: UInt64) { subscribers[id] = nil }

    /// The daemon stops: every stream ends with a final error.
    func endSubscriptions() {
        for subscriber in subscribers.values { subscriber.replier.fail(AdsError.shuttingDown()) }
        subscribers.removeAll()
    }
}

private struct Subscriber {
    var slots: Set<String>?
    var viewer: Viewer
    var replier: VarlinkReplier

    func wants(_ slot: String?) -> Bool {
        guard let slots else { return true }
        return slot.map(slots.contains) ?? false
    }
}

/// An event as ListEvents keeps it, with when it happened.
struct Recent {
    var event: EngineEvent
    var time: Date
}
