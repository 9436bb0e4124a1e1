import AdorchEngine
import AdorchVarlink
import Foundation

/// [Varlink queue] io.adorch.Ads: what apps call. Each handler gets its parameters parsed
/// and hands the call to the engine runtime, which answers through the replier.
struct AdsMethods {
    let runtime: EngineRuntime

    func register(in routes: inout Routes) {
        let runtime = runtime
        let ids = runtime.ids
        let gate = runtime.gate
        let json = StatusJSON(ids: ids)
        routes.add(AdsMethod.listSlots, ListSlotsCall.self) { p, call, replier in
            // The caller's own user: user ids are each app's (docs/caps.md), and a slot it may
            // not use does not say when anyone saw its ads.
            let viewer = Viewer(peer: call.peer, gate: gate)
            runtime.slotStatuses(capsFor: CapUser(uid: call.peer?.uid, id: p.userID)) { slots in
                replier.reply { ["slots": .array(slots.map { slot in
                    var shown = slot
                    if !viewer.sees(slot: slot.config.id) { shown.capHold = nil }
                    return json.listedSlotJSON(shown)
                })] }
            }
        }
        routes.add(AdsMethod.show, ShowCall.self) { p, call, replier in
            if let refusal = gate.rateRefusal(.showRate, call) { return replier.fail(refusal) }
            runtime.show(slot: p.slot, userID: p.userID, reward: p.reward, holder: call.peer?.uid, privacy: p.privacy) { result in
                switch result {
                case .success(let (ad, expiresAt)): replier.reply(verbatim: adVerbatim) { ["ad": adJSON(ad, expiresAt: expiresAt, ids)] }
                case .failure(let error): replier.fail(showError(error, call, gate))
                }
            }
        }
        routes.add(AdsMethod.load, LoadCall.self) { p, call, replier in
            if let refusal = gate.rateRefusal(.loadRate, call) { return replier.fail(refusal) }
            runtime.load(slot: p.slot, p.parameters, targeting: p.targeting, holder: call.peer?.uid, privacy: p.privacy,
                         refused: { replier.fail(showError($0, call, gate)) }) { result in
                switch result {
                case .success(let ads):
                    replier.reply(verbatim: adVerbatim) { ["ads": .array(ads.map { adJSON($0.ad, expiresAt: $0.expiresAt, ids) })] }
                case .failure(let failure):
                    replier.fail(AdsError.loadFailed([
                        "slot": .string(p.slot), "error": .string(failure.code.rawValue), "message": .string(failure.message),
                        "attempts": .array(failure.attempts.map {
                            ["network": .string($0.plugin), "ad_unit_id": .string($0.adUnitID), "error": .string($0.code.rawValue)]
                        }),
                    ]))
                }
            }
        }
        routes.add(AdsMethod.report, ReportCall.self) { p, call, replier in
            // Before the id is even looked up: a flood of bad ids costs the engine queue a turn each (issue 31).
            if let refusal = gate.rateRefusal(.reportRate, call) { return replier.fail(refusal) }
            runtime.report(p.event, adID: p.adID, caller: call.peer?.uid, refused: { gate.logRefusal(call, $0) }) { result in
                switch result {
                case .success: replier.reply([:])
                case .failure(.adNotValid(let reason)):
                    replier.fail(AdsError.adNotValid(["ad_id": .string(p.adID), "message": .string("ad \(p.adID) \(reason)")]))
                case .failure(.rewardNotRecorded):
                    replier.fail(AdsError.ledgerFailed(["message": .string(
                        "the reward ad \(p.adID) earned could not be written to the ledger yet (the daemon's log says why); it is written again every second until it can be, and announced then"
                    )]))
                }
            }
        }
        routes.add(AdsMethod.subscribe, SubscribeCall.self) { p, call, replier in
            runtime.subscribe(slots: p.slots, viewer: Viewer(peer: call.peer, gate: gate), replier: replier)
        }
        routes.add(AdsMethod.listEvents, ListEventsCall.self) { p, call, replier in
            if let refusal = gate.rateRefusal(.listRate, call) { return replier.fail(refusal) }
            let viewer = Viewer(peer: call.peer, gate: gate)
            runtime.recentEvents(slots: p.slots, limit: p.limit, viewer: viewer) { replier.reply(["events": .array($0)]) }
        }
        routes.add(AdsMethod.listRewards, ListRewardsCall.self) { p, call, replier in
            if let refusal = gate.rateRefusal(.listRate, call) { return replier.fail(refusal) }
            let viewer = Viewer(peer: call.peer, gate: gate)
            runtime.withRewards({ $0.unacknowledged(userID: p.userID, since: p.since, after: p.after, limit: p.limit, viewer: viewer) }) { result in
                switch result {
                case .success(let page): replier.reply(["rewards": .array(page.rewards), "more": .bool(page.more)])
                case .failure(let error): replier.fail(error)
                }
            }
        }
        routes.add(AdsMethod.ackReward, AckRewardCall.self) { p, call, replier in
            // Each looks its transaction id up in the ledger, a bad one too: counted with Report.
            if let refusal = gate.rateRefusal(.reportRate, call) { return replier.fail(refusal) }
            runtime.withRewards({ $0.acknowledge(p.transID, caller: call.peer?.uid) }) { result in
                switch result {
                case .success: replier.reply([:])
                case .failure(let error): replier.fail(error)
                }
            }
        }
        routes.add(AdsMethod.initInteractive, InitInteractiveCall.self) { p, call, replier in
            runtime.initInteractive(slot: p.slot, p.request, owner: call.peer?.uid) { result in
                switch result {
                case .success(let id): replier.reply(["session_id": .string(id)])
                case .failure(let error): replier.fail(sessionError(error, sessionID: nil, call, gate))
                }
            }
        }
        routes.add(AdsMethod.setPrivacy, SetPrivacyCall.self) { p, call, replier in
            // A write to disk on the engine queue, as AckReward's: counted with Report.
            if let refusal = gate.rateRefusal(.reportRate, call) { return replier.fail(refusal) }
            // Keyed by the peer's uid alone: an app reads and changes only its own.
            guard let uid = call.peer?.uid else { return replier.fail(gate.denied(call, "without credentials, so it has no privacy records")) }
            runtime.setPrivacy(p.privacy, uid: uid, userID: p.userID) { result in
                switch result {
                case .success: replier.reply([:])
                case .failure(.tooManyRecords(let limit)):
                    let key = Budget.privacyRecords.key
                    replier.fail(gate.refused(.privacyRecords, call, AdsError.tooManyPrivacyRecords([
                        "limit": .int(Int64(limit)),
                        "message": .string("uid \(uid) holds \(limit) privacy records: \(key) is \(limit); clear one (SetPrivacy with privacy null) first"),
                    ]), logging: "uid \(uid) holds \(limit) privacy records, \(key) is \(limit); SetPrivacy refused"))
                case .failure(.notStored(let reason)):
                    replier.fail(AdsError.privacyNotStored(["message": .string(
                        "the privacy record could not be written to the state directory (\(reason)); nothing was changed")]))
                }
            }
        }
        routes.add(AdsMethod.getPrivacy, GetPrivacyCall.self) { p, call, replier in
            runtime.privacy(uid: call.peer?.uid, userID: p.userID) { privacy, source in
                replier.reply { ["privacy": privacy?.signals.json ?? .null, "source": .string(source.rawValue)] }
            }
        }
        for (method, operation) in [(AdsMethod.start, SessionCall.start), (.pause, .pause), (.resume, .resume), (.stop, .stop)] {
            routes.add(method, SessionIDCall.self) { p, call, replier in
                // Each costs the engine queue a turn as a Report does: they share its rate.
                if let refusal = gate.rateRefusal(.reportRate, call) { return replier.fail(refusal) }
                runtime.session(operation, p.sessionID, caller: call) { result in
                    switch result {
                    case .success: replier.reply([:])
                    case .failure(let error): replier.fail(sessionError(error, sessionID: p.sessionID, call, gate))
                    }
                }
            }
        }
    }
}

// MARK: Parameters

struct ListSlotsCall: CallParameters {
    var userID: String?

    init(_ call: VarlinkCall) throws(VarlinkError) {
        userID = try FieldBounds.userID(of: call)
    }
}

struct ShowCall: CallParameters {
    var slot: String
    var userID: String?
    var reward: RewardModel?
    var privacy: ViewerPrivacy?

    init(_ call: VarlinkCall) throws(VarlinkError) {
        slot = try call.string("slot")
        userID = try FieldBounds.userID(of: call)
        privacy = try privacyParameter(of: call)
        switch call.parameters["reward"] {
        case nil, .null?: break
        case .object(let r)?:
            guard r.keys.allSatisfy(["name", "amount", "extra"].contains),
                  r["name"].map({ $0.stringValue != nil }) ?? true, r["extra"].map({ $0.stringValue != nil }) ?? true,
                  r["amount"].map({ ($0.intValue ?? -1) >= 0 }) ?? true
            else { throw invalidParameter("reward", "expected {name: string, amount: int >= 0, extra: string}") }
            reward = RewardModel(name: try FieldBounds.check(r["name"]?.stringValue ?? "", "reward.name", max: FieldBounds.rewardName),
                                 amount: r["amount"]?.intValue ?? 0,
                                 extra: try FieldBounds.check(r["extra"]?.stringValue ?? "", "reward.extra", max: FieldBounds.rewardExtra))
        default: throw invalidParameter("reward", "expected an object")
        }
    }
}

/// Counts, sizes and the timeout are bounded by the engine (`LoadBounds`), against the slot's defaults.
struct LoadCall: CallParameters {
    var slot: String
    var parameters: LoadParameters
    var targeting: [String: JSONValue]?
    var privacy: ViewerPrivacy?

    init(_ call: VarlinkCall) throws(VarlinkError) {
        slot = try call.string("slot")
        privacy = try privacyParameter(of: call)
        switch call.parameters["targeting"] {
        case nil, .null?: break
        case .object(let object)?:
            if let (key, message) = Targeting.problem(object) { throw invalidParameter("targeting.\(key)", message) }
            _ = try FieldBounds.check(object, "targeting", max: FieldBounds.targeting)
            targeting = object
        default: throw invalidParameter("targeting", "expected an object")
        }
        parameters = LoadParameters(
            count: try call.optionalInt("count").map { Int(clamping: $0) },
            width: try call.optionalInt("width").map { Int(clamping: $0) },
            height: try call.optionalInt("height").map { Int(clamping: $0) },
            timeout: try call.optionalInt("timeout_ms").map { .milliseconds($0) }
        )
    }
}

struct ReportCall: CallParameters {
    var adID: String
    var event: ViewerEvent

    init(_ call: VarlinkCall) throws(VarlinkError) {
        adID = try call.string("ad_id")
        let name = try call.string("event")
        guard let event = ViewerEvent(rawValue: name) else {
            throw invalidParameter("event", "expected one of \(ViewerEvent.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name)\"")
        }
        self.event = event
    }
}

struct SubscribeCall: CallParameters {
    var slots: Set<String>?

    init(_ call: VarlinkCall) throws(VarlinkError) {
        guard call.more else { throw .expectedMore }
        slots = try call.optionalStringArray("slots").map(Set.init)
    }
}

struct ListEventsCall: CallParameters {
    var slots: Set<String>?
    var limit: Int

    init(_ call: VarlinkCall) throws(VarlinkError) {
        let limit = try call.optionalInt("limit") ?? 50
        guard (1...Int64(EventFeed.recentKept)).contains(limit) else {
            throw invalidParameter("limit", "expected 1 to \(EventFeed.recentKept), got \(limit)")
        }
        self.limit = Int(limit)
        slots = try call.optionalStringArray("slots").map(Set.init)
    }
}

struct ListRewardsCall: CallParameters {
    var userID: String?
    var since: Date?
    var after: String?
    var limit: Int

    init(_ call: VarlinkCall) throws(VarlinkError) {
        let limit = try call.optionalInt("limit") ?? Int64(RewardDesk.listedByDefault)
        guard (1...Int64(RewardDesk.listedAtMost)).contains(limit) else {
            throw invalidParameter("limit", "expected 1 to \(RewardDesk.listedAtMost), got \(limit)")
        }
        self.limit = Int(limit)
        after = try call.optionalString("after")
        if let text = try call.optionalString("since") {
            guard let date = try? Date(text, strategy: .iso8601) else { throw invalidParameter("since", "expected an RFC 3339 time, got \"\(text)\"") }
            since = date
        }
        userID = try FieldBounds.userID(of: call)
    }
}

struct AckRewardCall: CallParameters {
    var transID: String

    init(_ call: VarlinkCall) throws(VarlinkError) { transID = try call.string("trans_id") }
}

struct InitInteractiveCall: CallParameters {
    var slot: String
    var request: InteractiveRequest

    init(_ call: VarlinkCall) throws(VarlinkError) {
        slot = try call.string("slot")
        let creativeURL = try FieldBounds.creativeURL(try call.string("creative_url"))
        guard case .object(let adParameters)? = call.parameters["ad_parameters"] else {
            throw invalidParameter("ad_parameters", "expected an object (the ad's AdParameters, {} if it has none)")
        }
        let adParametersJSON = try FieldBounds.check(adParameters, "ad_parameters", max: FieldBounds.adParameters)
        let typeName = try call.string("slot_type")
        guard let slotType = InteractiveRequest.SlotType(rawValue: typeName) else {
            throw invalidParameter("slot_type", "expected preroll or midroll, got \"\(typeName)\"")
        }
        request = InteractiveRequest(creativeURL: creativeURL, adParametersJSON: adParametersJSON, slotType: slotType)
    }
}

/// A user id of "" is the app as a whole, as none is.
struct SetPrivacyCall: CallParameters {
    var userID: String
    var privacy: ViewerPrivacy?

    init(_ call: VarlinkCall) throws(VarlinkError) {
        userID = try FieldBounds.userID(of: call) ?? ""
        privacy = try privacyParameter(of: call)
    }
}

struct GetPrivacyCall: CallParameters {
    var userID: String?

    init(_ call: VarlinkCall) throws(VarlinkError) { userID = try FieldBounds.userID(of: call) }
}

struct SessionIDCall: CallParameters {
    var sessionID: String

    init(_ call: VarlinkCall) throws(VarlinkError) { sessionID = try call.string("session_id") }
}

// MARK: Replies

/// An ad's payload is the JSON text its plugin gave, checked when the ad loaded (a JSON object,
/// within plugin.h's bound): it goes out as it came, never parsed or encoded again.
private let adVerbatim: Set<String> = ["payload"]

/// An ad as the Ad type of the IDL; built on the Varlink queue (`reply(building:)`).
private func adJSON(_ ad: ShownAd, expiresAt: Date, _ ids: ExternalIDs) -> JSONValue {
    [
        "id": .string(ids.external(ad.id)), "slot": .string(ad.slot), "network": .string(ad.network),
        "format": .string(ad.format.rawValue), "payload": ad.payloadJSON.isEmpty ? .object([:]) : .string(ad.payloadJSON),
        "expires_at": .string(timestamp(expiresAt)), "price": .double(ad.price),
    ]
}

/// The error a Show or Load gets; a budget's refusal is counted and logged by the gate.
private func showError(_ error: ShowError, _ call: VarlinkCall, _ gate: CallGate) -> VarlinkError {
    switch error {
    case .slotNotFound(let slot):
        AdsError.slotNotFound(["slot": .string(slot), "message": .string("no slot \"\(slot)\" is configured")])
    case .noAdReady(let slot):
        AdsError.noAdReady(["slot": .string(slot), "message": .string("no valid ad is ready in \(slot); it is being refilled")])
    case .fairShare(let slot):
        // Neither the other uids nor how many ads each holds: that is theirs (docs/rules.md, "Fair share").
        gate.refused(.fairShare, call, AdsError.noAdReady(["slot": .string(slot), "message": .string(
            "no ad of \(slot) is free for this app now: its ready ads are held for other apps by the fair share; it is being refilled")]),
                     logging: "uid \(call.peer.map { String($0.uid) } ?? "unknown") would take what \(slot) holds for other uids; \(call.member) refused")
    case .viewerUnservable(let slot):
        AdsError.noAdReady(["slot": .string(slot), "message": .string("no ad of \(slot) for this viewer: \(ShowError.noEntryServesViewer)")])
    case .unservable(let slot, let missing):
        AdsError.noAdReady(["slot": .string(slot), "message": .string(
            "\(slot) cannot be filled: \(StatusJSON.unservable(missing))")])
    case .displayFailed(let slot, let tries):
        AdsError.noAdReady(["slot": .string(slot), "message": .string(
            "the plugins could not present any of the \(tries) ads of \(slot) this call took; it is being refilled")])
    case .interrupted(let slot, let reason):
        AdsError.noAdReady(["slot": .string(slot), "message": .string(
            "the ad this call took in \(slot) ended before its plugin presented it (\(reason))")])
    case .shuttingDown:
        AdsError.shuttingDown()
    case .promiseUnwritten(let slot, let reason):
        AdsError.ledgerFailed(["message": .string(
            "the reward of the ad this call took in \(slot) could not be promised in the ledger (\(reason)), so it was not handed out")])
    case .noticeUnwritten(let slot, let reason):
        AdsError.ledgerFailed(["message": .string(
            "the win notice of the ad this call took in \(slot) could not be written to the notice outbox (\(reason)), so it was not handed out")])
    case .invalidParameter(let name, let reason):
        invalidParameter(name, reason)
    case .tooManyOpenAds(let uid, let open, let loading, let limit):
        tooManyOpenAds(uid: uid, open: open, loading: loading, limit: limit, call, gate)
    case .tooManyUnacknowledgedRewards(let uid, let waiting, let limit):
        tooManyUnacknowledgedRewards(uid: uid, waiting: waiting, limit: limit, call, gate)
    case .capped(let slot, let rule, let retryAfter):
        AdsError.capped([
            "slot": .string(slot), "rule": .string(rule), "retry_after_ms": .int(retryAfter.nanosecondsClamped / 1_000_000),
            "message": .string("\(slot) is capped for this user by \(rule): the next ad may be shown in \(retryAfter.nanosecondsClamped / 1_000_000) ms"),
        ])
    }
}

private func tooManyOpenAds(uid: UInt32, open: Int, loading: Int, limit: Int, _ call: VarlinkCall, _ gate: CallGate) -> VarlinkError {
    let held = "uid \(uid) holds \(open) ads not yet closed, expired or ended" + (loading > 0 ? " and \(loading) are loading for it" : "")
    return gate.refused(.openAds, call, AdsError.tooManyOpenAds([
        "budget": .string(Budget.openAds.key), "limit": .int(Int64(limit)), "open": .int(Int64(open)), "loading": .int(Int64(loading)),
        "message": .string("\(held): \(Budget.openAds.key) is \(limit); report close on the ads it is done with"),
    ]), logging: "\(held), \(Budget.openAds.key) is \(limit); \(call.member) refused")
}

/// The open-ads budget's error with `budget` naming this one (docs/rules.md, "A bound on
/// unacknowledged rewards"): `open` is what the uid holds of the ledger, rewards it was told
/// of and has not acknowledged; nothing is loading for it.
private func tooManyUnacknowledgedRewards(uid: UInt32, waiting: Int, limit: Int, _ call: VarlinkCall, _ gate: CallGate) -> VarlinkError {
    let key = Budget.unacknowledgedRewards.key
    return gate.refused(.unacknowledgedRewards, call, AdsError.tooManyOpenAds([
        "budget": .string(key), "limit": .int(Int64(limit)), "open": .int(Int64(waiting)), "loading": .int(0),
        "message": .string("uid \(uid) has \(waiting) rewards not acknowledged: \(key) is \(limit), so no rewarded ad is shown "
                           + "to it until it acknowledges them with AckReward (ListRewards lists them)"),
    ]), logging: "uid \(uid) has \(waiting) rewards not acknowledged, \(key) is \(limit); rewarded \(call.member) refused")
}

private func noSuchSession(_ sessionID: String?) -> VarlinkError {
    AdsError.sessionNotFound(["session_id": .string(sessionID ?? ""), "message": "no live session has this id: it never existed or has ended"])
}

private func sessionError(_ error: SessionCallError, sessionID: String?, _ call: VarlinkCall, _ gate: CallGate) -> VarlinkError {
    switch error {
    case .denied(let refusal): refusal
    // Another app's session is answered as no session (ids are sequential: any other answer
    // would let an app count the others' sessions); the operator's log says who tried.
    case .session(.notOwner):
        {
            gate.logRefusal(call, "not the user session \(sessionID ?? "") was made by")
            return noSuchSession(sessionID)
        }()
    case .session(.tooManySessions(let uid, let live, let limit)):
        gate.refused(.sessions, call, AdsError.tooManySessions([
            "budget": .string(Budget.sessions.key), "limit": .int(Int64(limit)), "live": .int(Int64(live)),
            "message": .string("uid \(uid) has \(live) live interactive sessions: \(Budget.sessions.key) is \(limit); stop one first"),
        ]), logging: "uid \(uid) has \(live) live interactive sessions, \(Budget.sessions.key) is \(limit); InitInteractive refused")
    case .slotNotFound(let slot): showError(.slotNotFound(slot), call, gate)
    case .session(.sessionNotFound): noSuchSession(sessionID)
    case .session(.invalidParameter(let name, let reason)): invalidParameter(name, reason)
    case .session(.unavailable(let slot, let reason)): AdsError.noAdReady(["slot": .string(slot), "message": .string(reason)])
    }
}
