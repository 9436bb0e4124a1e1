import Foundation

/// An interface declared once, as data: each method and error is an enum case whose raw value
/// is its name and whose `declaration` is the rest of its IDL. The interface's text
/// (`VarlinkInterface(declaring:)`), the routes keyed by method, and every error reply
/// (`callAsFunction`) come from these; nothing spells a name a second time.
public protocol VarlinkMethodName: RawRepresentable<String>, CaseIterable, Hashable, Sendable {
    /// The interface, e.g. "io.adorch.Ads".
    static var interface: String { get }
    /// The comment above the method, and what follows its name: `(parameters) -> (reply)`.
    var declaration: VarlinkDeclaration { get }
}

public protocol VarlinkErrorName: RawRepresentable<String>, CaseIterable, Hashable, Sendable {
    static var interface: String { get }
    /// The comment above the error, and its parameters: `(slot: string, message: string)`.
    var declaration: VarlinkDeclaration { get }
}

/// The IDL of one member after its name: the comment lines above it (each starting with #)
/// and its signature.
public struct VarlinkDeclaration: Sendable {
    public var comment: String
    public var signature: String

    public init(_ comment: String, _ signature: String) {
        self.comment = comment
        self.signature = signature
    }

    /// The names in a signature's first parenthesis, and whether each may be left out (`?type`).
    public var fields: [(name: String, optional: Bool)] {
        let text = signature.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }.joined(separator: " ")
        guard let open = text.firstIndex(of: "(") else { return [] }
        var depth = 0, end = text.endIndex
        for index in text[open...].indices {
            if text[index] == "(" { depth += 1 } else if text[index] == ")" { depth -= 1; if depth == 0 { end = index; break } }
        }
        let inside = text[text.index(after: open)..<end]
        var parts: [Substring] = [], start = inside.startIndex
        depth = 0
        for index in inside.indices {
            switch inside[index] {
            case "(": depth += 1
            case ")": depth -= 1
            case "," where depth == 0: parts.append(inside[start..<index]); start = inside.index(after: index)
            default: break
            }
        }
        parts.append(inside[start...])
        return parts.compactMap { part in
            let pair = part.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            return pair.count == 2 ? (name: pair[0], optional: pair[1].hasPrefix("?")) : nil
        }
    }

    func idl(_ kind: String, _ name: String) -> String {
        (comment.isEmpty ? "" : comment + "\n") + "\(kind) \(name)\(kind == "error" ? " " : "")\(signature)"
    }
}

extension VarlinkMethodName {
    /// `interface.Name`, as calls name it.
    public var qualifiedName: String { "\(Self.interface).\(rawValue)" }
}

extension VarlinkErrorName {
    public var qualifiedName: String { "\(Self.interface).\(rawValue)" }

    /// The error reply, with `parameters` as its IDL declares them: a parameter it does not
    /// declare, or a required one left out, is a bug caught in every debug build.
    public func callAsFunction(_ parameters: [String: JSONValue] = [:]) -> VarlinkError {
        assert(conforms(parameters), "\(qualifiedName) \(parameters.keys.sorted()) does not match its IDL \(declaration.signature)")
        return VarlinkError(qualifiedName, parameters)
    }

    public func conforms(_ parameters: [String: JSONValue]) -> Bool {
        let fields = declaration.fields
        return parameters.keys.allSatisfy { key in fields.contains { $0.name == key } }
            && fields.allSatisfy { $0.optional || parameters[$0.name] != nil }
    }
}

/// One member of an interface, in the order its IDL lists them.
public enum VarlinkMember: Sendable {
    /// A type, written as IDL (comments and declaration).
    case type(String)
    case method(any VarlinkMethodName)
    case error(any VarlinkErrorName)

    var idl: String {
        switch self {
        case .type(let text): text
        case .method(let method): method.declaration.idl("method", method.rawValue)
        case .error(let error): error.declaration.idl("error", error.rawValue)
        }
    }
}

extension VarlinkInterface {
    /// The interface whose methods are `Method` and whose errors are `Error`, its IDL text its
    /// members' in `members`' order; every case must be a member exactly once.
    public init<Method: VarlinkMethodName, Error: VarlinkErrorName>(
        _ comment: String, methods: Method.Type, errors: Error.Type, members: [VarlinkMember]
    ) {
        precondition(Method.interface == Error.interface, "\(Method.self) and \(Error.self) are of different interfaces")
        self.init(comment, Error.interface, members, listing: Method.allCases.map { $0.qualifiedName } + Error.allCases.map { $0.qualifiedName })
    }

    /// An interface that declares methods only.
    public init<Method: VarlinkMethodName>(_ comment: String, methods: Method.Type, members: [VarlinkMember]) {
        self.init(comment, Method.interface, members, listing: Method.allCases.map { $0.qualifiedName })
    }

    /// An interface that declares errors only.
    public init<Error: VarlinkErrorName>(_ comment: String, errors: Error.Type, members: [VarlinkMember]) {
        self.init(comment, Error.interface, members, listing: Error.allCases.map { $0.qualifiedName })
    }

    private init(_ comment: String, _ name: String, _ members: [VarlinkMember], listing declared: [String]) {
        let listed = members.compactMap { member -> String? in
            switch member {
            case .type: nil
            case .method(let method): method.qualifiedName
            case .error(let error): error.qualifiedName
            }
        }
        precondition(listed.count == Set(listed).count && Set(listed) == Set(declared),
                     "\(name) lists \(listed.sorted()); it declares \(declared.sorted()), each once")
        self.init(description: comment + "\ninterface \(name)\n\n" + members.map(\.idl).joined(separator: "\n\n") + "\n")
    }
}
