import Foundation

/// What `org.varlink.service.GetInfo` says about the service.
public struct VarlinkServiceInfo: Sendable {
    public var vendor: String
    public var product: String
    public var version: String
    public var url: String

    public init(vendor: String, product: String, version: String, url: String) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
    }
}

/// One interface the server offers: its name and IDL text.
public struct VarlinkInterface: Sendable {
    public let name: String
    public let description: String
    /// The methods declared in the IDL, so that unknown ones are refused before any handler runs.
    public let methods: Set<String>

    public init(description: String) {
        let lines = description.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        self.name = lines.first { $0.hasPrefix("interface ") }.map { String($0.dropFirst("interface ".count)) } ?? ""
        self.description = description
        self.methods = Set(lines.filter { $0.hasPrefix("method ") }.compactMap {
            $0.dropFirst("method ".count).split(separator: "(").first.map { String($0).trimmingCharacters(in: .whitespaces) }
        })
    }
}
