import AdorchEngine
import AdorchRewards
import AdorchVarlink

/// [Varlink queue] io.adorch.Manager (operators: status, reload, the reward callback check)
/// and io.adorch.Debug (tests only, served with --debug-interface).
struct ManagerMethods {
    let runtime: EngineRuntime
    let serving: LockedServer

    func register(in routes: inout Routes) {
        let runtime = runtime
        let serving = serving
        let json = StatusJSON(ids: runtime.ids)
        routes.add(ManagerMethod.verifyRewardCallback, CallbackQuery.self) { p, _, replier in
            runtime.withRewards({ $0.verifyCallback(p.query) }) { result in
                switch result {
                case .success(let verdict):
                    var reply: [String: JSONValue] = ["is_valid": .bool(verdict.valid), "body": .string(RewardCallback.body(isValid: verdict.valid))]
                    if let reason = verdict.reason { reply["reason"] = .string(reason) }
                    replier.reply(reply)
                case .failure(let error): replier.fail(error)
                }
            }
        }
        routes.add(ManagerMethod.getStatus, NoParameters.self) { _, _, replier in
            runtime.status(server: serving.server, socket: serving.socketPath) { status in replier.reply { json.statusJSON(status) } }
        }
        routes.add(ManagerMethod.getMetrics, MetricsCall.self) { p, _, replier in
            runtime.metrics(p.format, server: serving.server, socket: serving.socketPath) { replier.reply(["text": .string($0)]) }
        }
        routes.add(ManagerMethod.getCaps, CapsCall.self) { p, call, replier in
            runtime.capUses(slot: p.slot, user: CapUser(uid: p.uid ?? call.peer?.uid, id: p.userID)) { uses in
                guard let uses else {
                    return replier.fail(ManagerError.slotNotFound(["slot": .string(p.slot), "message": .string("no slot \"\(p.slot)\" is configured")]))
                }
                replier.reply { ["rules": .array(uses.map(StatusJSON.capRuleJSON))] }
            }
        }
        routes.add(ManagerMethod.reload, NoParameters.self) { _, _, replier in
            runtime.reload { result in
                switch result {
                case .success(let summary): replier.reply(["summary": .string(summary)])
                case .failure(let error): replier.fail(ManagerError.reloadFailed(["message": .string(error.description)]))
                }
            }
        }
        routes.add(DebugMethod.freezeEngine, FreezeCall.self) { p, _, replier in
            replier.reply([:])
            runtime.freeze(for: p.duration)
        }
    }
}

struct CallbackQuery: CallParameters {
    var query: String

    init(_ call: VarlinkCall) throws(VarlinkError) { query = try call.string("query") }
}

struct CapsCall: CallParameters {
    var slot: String
    var userID: String?
    var uid: UInt32?

    init(_ call: VarlinkCall) throws(VarlinkError) {
        slot = try call.string("slot")
        userID = try FieldBounds.userID(of: call)
        switch call.parameters["uid"] {
        case nil, .null?: break
        case let value?:
            guard let n = value.intValue, let uid = UInt32(exactly: n) else { throw invalidParameter("uid", "expected a uid, 0 to 4294967295") }
            self.uid = uid
        }
    }
}

struct MetricsCall: CallParameters {
    var format = MetricsFormat.text

    init(_ call: VarlinkCall) throws(VarlinkError) {
        guard let name = try call.optionalString("format") else { return }
        guard let format = MetricsFormat(rawValue: name) else { throw .invalidParameter("format") }
        self.format = format
    }
}

struct FreezeCall: CallParameters {
    /// Longer would outlast any test's patience and the watchdog tests' margins.
    static let longest = 60.0
    var duration: Duration

    init(_ call: VarlinkCall) throws(VarlinkError) {
        guard let seconds = call.parameters["seconds"]?.doubleValue, (0...Self.longest).contains(seconds) else {
            throw .invalidParameter("seconds")
        }
        duration = .milliseconds(Int64(seconds * 1000))
    }
}
