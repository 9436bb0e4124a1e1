import Foundation

/// A Varlink error reply: a fully qualified name and its parameters.
public struct VarlinkError: Error, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var parameters: [String: JSONValue]

    public init(_ name: String, _ parameters: [String: JSONValue] = [:]) {
        self.name = name
        self.parameters = parameters
    }

    public var description: String {
        parameters.isEmpty ? name : "\(name) \(JSONValue.object(parameters).jsonString)"
    }

    // The errors of org.varlink.service, which every Varlink service speaks.
    public static func interfaceNotFound(_ interface: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InterfaceNotFound", ["interface": .string(interface)])
    }
    public static func methodNotFound(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotFound", ["method": .string(method)])
    }
    public static func methodNotImplemented(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotImplemented", ["method": .string(method)])
    }
    public static func invalidParameter(_ parameter: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InvalidParameter", ["parameter": .string(parameter)])
    }
    public static let expectedMore = VarlinkError("org.varlink.service.ExpectedMore")
    public static let permissionDenied = VarlinkError("org.varlink.service.PermissionDenied")
}

/// Who is on the other end of a connection, from SO_PEERCRED.
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// Supplementary groups.
    public var groups: [UInt32]

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }
}

/// One method call as it arrived.
public struct VarlinkCall: Sendable {
    /// The fully qualified method, e.g. `io.adorch.Ads.Show`.
    public var method: String
    public var parameters: [String: JSONValue]
    /// The caller wants no reply.
    public var oneway: Bool
    /// The caller accepts several replies (`continues: true` on all but the last).
    public var more: Bool
    public var peer: PeerCredentials?

    public var interface: String { String(method[..<(method.lastIndex(of: ".") ?? method.startIndex)]) }
    public var member: String { String(method[method.index(after: method.lastIndex(of: ".") ?? method.startIndex)...]) }

    public init(method: String, parameters: [String: JSONValue] = [:], oneway: Bool = false, more: Bool = false, peer: PeerCredentials? = nil) {
        self.method = method
        self.parameters = parameters
        self.oneway = oneway
        self.more = more
        self.peer = peer
    }

    /// Decodes one message. Anything that is not a well-formed call is named as the
    /// `org.varlink.service.InvalidParameter` it earns.
    public static func decode(_ data: Data, peer: PeerCredentials? = nil) -> Result<VarlinkCall, VarlinkError> {
        guard let value = JSONValue.parse(data) else { return .failure(.invalidParameter("message: not JSON")) }
        guard case .object(let object) = value else { return .failure(.invalidParameter("message: not a JSON object")) }
        guard let methodValue = object["method"] else { return .failure(.invalidParameter("method: missing")) }
        guard case .string(let method) = methodValue, isQualifiedMethod(method) else {
            return .failure(.invalidParameter("method: not an interface-qualified method name"))
        }
        var parameters: [String: JSONValue] = [:]
        switch object["parameters"] {
        case nil, .null?: break
        case .object(let p)?: parameters = p
        default: return .failure(.invalidParameter("parameters: not an object"))
        }
        var flags: [String: Bool] = [:]
        for flag in ["oneway", "more", "upgrade"] {
            switch object[flag] {
            case nil, .null?: flags[flag] = false
            case .bool(let b)?: flags[flag] = b
            default: return .failure(.invalidParameter("\(flag): not a boolean"))
            }
        }
        if flags["upgrade"] == true { return .failure(.methodNotImplemented("\(method) (upgrade)")) }
        return .success(VarlinkCall(method: method, parameters: parameters, oneway: flags["oneway"]!, more: flags["more"]!, peer: peer))
    }

    private static func isQualifiedMethod(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count >= 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } }
    }

    // MARK: Typed parameters, each failing with InvalidParameter naming the field.

    /// Fails if the call carries a parameter its method does not take.
    public func onlyParameters(_ allowed: Set<String>) throws(VarlinkError) {
        if let stray = parameters.keys.sorted().first(where: { !allowed.contains($0) }) { throw .invalidParameter(stray) }
    }

    public func string(_ name: String) throws(VarlinkError) -> String {
        guard let value = try optionalString(name) else { throw .invalidParameter(name) }
        return value
    }

    public func optionalString(_ name: String) throws(VarlinkError) -> String? {
        switch parameters[name] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw .invalidParameter(name)
        }
    }

    public func optionalStringArray(_ name: String) throws(VarlinkError) -> [String]? {
        switch parameters[name] {
        case nil, .null?: return nil
        case .array(let items)?:
            var strings: [String] = []
            for item in items {
                guard case .string(let s) = item else { throw .invalidParameter(name) }
                strings.append(s)
            }
            return strings
        default: throw .invalidParameter(name)
        }
    }

    public func optionalInt(_ name: String) throws(VarlinkError) -> Int64? {
        switch parameters[name] {
        case nil, .null?: return nil
        case let value?:
            guard let i = value.intValue else { throw .invalidParameter(name) }
            return i
        }
    }
}

/// The reply side of one message, encoded with its NUL.
enum VarlinkWire {
    static func reply(_ parameters: [String: JSONValue], continues: Bool) -> Data {
        var object: [String: JSONValue] = ["parameters": .object(parameters)]
        if continues { object["continues"] = true }
        return frame(.object(object))
    }

    static func error(_ error: VarlinkError) -> Data {
        frame(["error": .string(error.name), "parameters": .object(error.parameters)])
    }

    static func frame(_ value: JSONValue) -> Data {
        var data = value.jsonData
        data.append(0)
        return data
    }
}
