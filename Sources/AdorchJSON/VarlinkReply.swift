import Foundation

/// One Varlink reply as a client reads it: its parameters, or an error's name and parameters;
/// `continues` while more replies to the same call follow. The daemon's blocking client
/// (AdorchVarlink) and the apps' Swift library (AdorchClient) both read replies as this.
public struct VarlinkReply: Sendable, Equatable {
    public var parameters: [String: JSONValue]
    public var error: String?
    public var continues: Bool

    public init(parameters: [String: JSONValue], error: String? = nil, continues: Bool = false) {
        self.parameters = parameters
        self.error = error
        self.continues = continues
    }

    /// A message's bytes (without its NUL), or nil if they are not a JSON object.
    public init?(message: Data) {
        guard case .object(let object)? = JSONValue.parse(message) else { return nil }
        self.init(parameters: object["parameters"]?.objectValue ?? [:], error: object["error"]?.stringValue,
                  continues: object["continues"]?.boolValue ?? false)
    }
}
