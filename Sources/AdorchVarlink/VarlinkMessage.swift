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
        data.withUnsafeBytes { decode(bytes: $0, peer: peer) }
    }

    /// Decodes one message straight from its bytes (without its NUL): the call's own members
    /// are picked as they are read, with no object of them built first. The whole text is
    /// read before any member is judged, so a message that is not JSON is named so first.
    /// It may hold at most `JSONValue.maximumMessageValues` values.
    public static func decode(bytes: UnsafeRawBufferPointer, peer: PeerCredentials? = nil) -> Result<VarlinkCall, VarlinkError> {
        var parser = JSONParser(bytes, maximumValues: JSONValue.maximumMessageValues)
        // The first of duplicate keys wins, as in any object (see JSONParser).
        var method: JSONValue?, parameters: JSONValue?, oneway: JSONValue?, more: JSONValue?, upgrade: JSONValue?
        do throws(JSONParseError) {
            guard try parser.peek() == UInt8(ascii: "{") else {
                _ = try parser.document()
                return .failure(.invalidParameter("message: not a JSON object"))
            }
            try parser.members { parser, key throws(JSONParseError) in
                let value = try parser.value()
                switch key {
                case "method": method = method ?? value
                case "parameters": parameters = parameters ?? value
                case "oneway": oneway = oneway ?? value
                case "more": more = more ?? value
                case "upgrade": upgrade = upgrade ?? value
                default: break
                }
            }
            try parser.finish()
        } catch {
            if error.reason == .tooManyValues {
                return .failure(.invalidParameter("message: more than \(JSONValue.maximumMessageValues) JSON values"))
            }
            return .failure(.invalidParameter("message: not JSON"))
        }
        guard let method else { return .failure(.invalidParameter("method: missing")) }
        guard case .string(let name) = method, isQualifiedMethod(name) else {
            return .failure(.invalidParameter("method: not an interface-qualified method name"))
        }
        var object: [String: JSONValue] = [:]
        switch parameters {
        case nil, .null?: break
        case .object(let p)?: object = p
        default: return .failure(.invalidParameter("parameters: not an object"))
        }
        guard let isOneway = flag(oneway) else { return .failure(.invalidParameter("oneway: not a boolean")) }
        guard let wantsMore = flag(more) else { return .failure(.invalidParameter("more: not a boolean")) }
        guard let upgrades = flag(upgrade) else { return .failure(.invalidParameter("upgrade: not a boolean")) }
        if upgrades { return .failure(.methodNotImplemented("\(name) (upgrade)")) }
        return .success(VarlinkCall(method: name, parameters: object, oneway: isOneway, more: wantsMore, peer: peer))
    }

    /// A flag's value: absent or null is false; nil if it is not a boolean.
    private static func flag(_ value: JSONValue?) -> Bool? {
        switch value {
        case nil, .null?: false
        case .bool(let b)?: b
        default: nil
        }
    }

    private static func isQualifiedMethod(_ s: String) -> Bool {
        // ASCII names (every real one) are judged on their bytes, by the same rule: Characters
        // and their properties are the costly part of a small call's decoding.
        if s.utf8.allSatisfy({ $0 < 0x80 }) {
            var parts = 1, partLength = 0
            for byte in s.utf8 {
                switch byte {
                case UInt8(ascii: "."):
                    guard partLength > 0 else { return false }
                    parts += 1
                    partLength = 0
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                     UInt8(ascii: "_"), UInt8(ascii: "-"):
                    partLength += 1
                default:
                    return false
                }
            }
            return parts >= 2 && partLength > 0
        }
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count >= 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } }
    }

    // MARK: Typed parameters, each failing with InvalidParameter naming the field.

    /// Fails if the call carries a parameter its method does not take, naming the first in
    /// sorted order: found in one pass, as sorting many stray keys cost more than parsing them.
    public func onlyParameters(_ allowed: Set<String>) throws(VarlinkError) {
        if let stray = parameters.keys.lazy.filter({ !allowed.contains($0) }).min() { throw .invalidParameter(stray) }
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

