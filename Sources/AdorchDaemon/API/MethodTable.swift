import AdorchVarlink

/// [Varlink queue] The io.adorch.* methods as a table of typed handlers: a call passes the
/// call gate, its parameters are parsed and bounded once into the method's own type, and
/// only then does its handler run (and hop to the engine runtime if it needs to).
struct MethodTable: Sendable {
    typealias Handler = @Sendable (VarlinkCall, VarlinkReplier) throws(VarlinkError) -> Void

    private let gate: CallGate
    private let handlers: [String: Routes.Route]

    /// The interfaces whose methods the table routes, each declared once (AdsInterface.swift,
    /// ManagerInterface.swift); the server offers io.adorch.Debug only with --debug-interface.
    static let interfaces: [VarlinkInterface] = [.ads, .manager, .debug]

    init(runtime: EngineRuntime, serving: LockedServer) {
        var routes = Routes()
        AdsMethods(runtime: runtime).register(in: &routes)
        ManagerMethods(runtime: runtime, serving: serving).register(in: &routes)
        gate = runtime.gate
        handlers = routes.handlers
        let declared = Set(Self.interfaces.flatMap { interface in interface.methods.map { "\(interface.name).\($0)" } })
        precondition(Set(handlers.keys) == declared,
                     "routes without a declared method: \(Set(handlers.keys).subtracting(declared).sorted()); declared methods without a route: \(declared.subtracting(handlers.keys).sorted())")
    }

    /// Every method a handler is routed for.
    var routed: Set<String> { Set(handlers.keys) }

    func handle(_ call: VarlinkCall, _ replier: VarlinkReplier) {
        guard let route = handlers[call.method] else { return replier.fail(.methodNotImplemented(call.method)) }
        do throws(VarlinkError) {
            // Access is checked before the parameters: a caller who may not call learns nothing more.
            let slot = route.takesSlot ? call.parameters["slot"]?.stringValue : nil
            if let refusal = gate.refusal(of: call, slot: slot) { throw refusal }
            try route.handler(call, replier)
        } catch {
            replier.fail(error)
        }
    }
}

/// A method's parameters, parsed and bounded from a call. The names it may carry are its
/// method's IDL parameters (`Routes.add`): anything else in the call is an `InvalidParameter`
/// naming it.
protocol CallParameters: Sendable {
    init(_ call: VarlinkCall) throws(VarlinkError)
}

/// Methods that take nothing.
struct NoParameters: CallParameters {
    init(_ call: VarlinkCall) {}
}

/// The table being built: a method name, its parameter type and its handler.
struct Routes {
    struct Route: Sendable {
        /// The method names a slot, whose [access] rule applies too.
        var takesSlot: Bool
        var handler: MethodTable.Handler
    }

    private(set) var handlers: [String: Route] = [:]

    mutating func add<P: CallParameters>(_ method: some VarlinkMethodName, _: P.Type,
                                         _ body: @escaping @Sendable (P, VarlinkCall, VarlinkReplier) -> Void) {
        precondition(handlers[method.qualifiedName] == nil, "\(method.qualifiedName) is routed twice")
        // The parameters the IDL declares, and no others: the names are written once, there.
        let names = Set(method.declaration.fields.map(\.name))
        handlers[method.qualifiedName] = Route(takesSlot: names.contains("slot")) { call, replier throws(VarlinkError) in
            try call.onlyParameters(names)
            body(try P(call), call, replier)
        }
    }
}

/// io.adorch.Ads.InvalidParameter: which parameter and what was expected.
func invalidParameter(_ name: String, _ message: String) -> VarlinkError {
    AdsError.invalidParameter(["parameter": .string(name), "message": .string(message)])
}
