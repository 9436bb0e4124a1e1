import AdorchEngine
import AdorchVarlink
import Foundation
import TOMLKit

/// Reads one TOML table with typed accessors whose errors name the full key.
struct TableReader {
    let table: TOMLTable
    let path: String
    let source: String

    init(_ table: TOMLTable, path: String, source: String) {
        self.table = table
        self.path = path
        self.source = source
    }

    func key(_ name: String) -> String { path.isEmpty ? name : "\(path).\(name)" }

    func error(_ name: String, _ message: String) -> ConfigError {
        ConfigError(file: source, location: "key \(key(name))", message: message)
    }

    func only(_ allowed: [String]) throws(ConfigError) {
        for k in table.keys where !allowed.contains(k) {
            throw error(k, "unknown key; expected one of \(allowed.joined(separator: ", "))")
        }
    }

    private func typeName(_ value: TOMLValueConvertible) -> String { "\(value.type)" }

    func string(_ name: String) throws(ConfigError) -> String? {
        guard let value = table[name] else { return nil }
        guard let s = value.string else { throw error(name, "expected a string, got \(typeName(value))") }
        return s
    }

    /// A file system path: not empty, and at most `maxBytes` bytes (a socket's is bounded by
    /// sun_path).
    func path(_ name: String, maxBytes: Int = Int(PATH_MAX) - 1) throws(ConfigError) -> String? {
        guard let s = try string(name) else { return nil }
        guard !s.isEmpty else { throw error(name, "is empty; expected a path") }
        guard s.utf8.count <= maxBytes else { throw error(name, "is \(s.utf8.count) bytes long; at most \(maxBytes) may be") }
        return s
    }

    func requiredString(_ name: String) throws(ConfigError) -> String {
        guard let s = try string(name) else { throw error(name, "missing; expected a string") }
        return s
    }

    func int(_ name: String, in bounds: ClosedRange<Int>) throws(ConfigError) -> Int64? {
        try int(name, min: Int64(bounds.lowerBound), max: Int64(bounds.upperBound))
    }

    func int(_ name: String, in bounds: ClosedRange<Int64>) throws(ConfigError) -> Int64? {
        try int(name, min: bounds.lowerBound, max: bounds.upperBound)
    }

    /// Both bounds are required: a number without a ceiling reaches arithmetic that can trap.
    func int(_ name: String, min: Int64, max: Int64) throws(ConfigError) -> Int64? {
        guard let value = table[name] else { return nil }
        guard let i = value.int.map(Int64.init) else { throw error(name, "expected an integer, got \(typeName(value))") }
        if i < min { throw error(name, "expected an integer of at least \(min), got \(i)") }
        if i > max { throw error(name, "expected an integer of at most \(max), got \(i)") }
        return i
    }

    func double(_ name: String, range: ClosedRange<Double>) throws(ConfigError) -> Double? {
        guard let value = table[name] else { return nil }
        guard let d = value.double ?? value.int.map(Double.init) else { throw error(name, "expected a number, got \(typeName(value))") }
        guard range.contains(d) else { throw error(name, "expected a number from \(range.lowerBound) to \(range.upperBound), got \(d)") }
        return d
    }

    /// Every number in the table and below is finite: a plugin's config is opaque to the
    /// daemon, but reaches the plugin as JSON, which has no nan or inf.
    func requireFiniteNumbers() throws(ConfigError) {
        for name in table.keys { try requireFinite(table[name]!, name) }
    }

    private func requireFinite(_ value: TOMLValueConvertible, _ name: String) throws(ConfigError) {
        if let d = value.double, !d.isFinite {
            throw error(name, "expected a finite number (the plugin gets its config as JSON, which has no nan or inf), got \(d)")
        }
        if let t = value.table { try TableReader(t, path: key(name), source: source).requireFiniteNumbers() }
        if let a = value.array { for (i, item) in a.enumerated() { try requireFinite(item, "\(name)[\(i)]") } }
    }

    func bool(_ name: String) throws(ConfigError) -> Bool? {
        guard let value = table[name] else { return nil }
        guard let b = value.bool else { throw error(name, "expected true or false, got \(typeName(value))") }
        return b
    }

    /// Users and groups by name or number: nil when neither key is there (no rule). A name
    /// this host does not know is an error, as systemd's User= is: a typo must not lock out,
    /// or let in, someone unnoticed.
    func audience(users: String, groups: String) throws(ConfigError) -> Audience? {
        guard table.contains(key: users) || table.contains(key: groups) else { return nil }
        var audience = Audience(users: [], groups: [])
        for (key, lookup, kind) in [(users, userID, "user"), (groups, groupID, "group")] {
            guard let value = table[key] else { continue }
            guard let array = value.array else { throw error(key, "expected an array of \(kind) names or numbers, got \(typeName(value))") }
            for item in array {
                guard let name = item.string ?? item.int.map(String.init) else {
                    throw error(key, "expected \(kind) names or numbers, got \(typeName(item))")
                }
                guard let id = lookup(name) else { throw error(key, "no \(kind) \"\(name)\" on this host") }
                if kind == "user" { audience.users.insert(id) } else { audience.groups.insert(id) }
            }
        }
        return audience
    }

    func table(_ name: String) throws(ConfigError) -> TableReader? {
        guard let value = table[name] else { return nil }
        guard let t = value.table else { throw error(name, "expected a table, got \(typeName(value))") }
        return TableReader(t, path: key(name), source: source)
    }

    /// A native slot's image options: urls_only (the app downloads the images itself),
    /// multiple (several images per ad), aspect_ratio (e.g. "1.91:1"), as JSON.
    func imageOptions() throws(ConfigError) -> String? {
        guard let t = try table("image_options") else { return nil }
        try t.only(["urls_only", "multiple", "aspect_ratio"])
        _ = try t.bool("urls_only")
        _ = try t.bool("multiple")
        if let ratio = try t.string("aspect_ratio"), !isAspectRatio(ratio) {
            throw t.error("aspect_ratio", "expected W:H such as 1.91:1, got \"\(ratio)\"")
        }
        return t.table.convert(to: .json)
    }

    /// A targeting table, checked key by key (see Targeting).
    func targeting(_ name: String) throws(ConfigError) -> [String: JSONValue]? {
        guard let t = try table(name) else { return nil }
        guard let object = JSONValue.parse(Data(t.table.convert(to: .json).utf8))?.objectValue else {
            throw error(name, "expected a table")
        }
        if let (key, message) = Targeting.problem(object) { throw error("\(name).\(key)", message) }
        return object
    }

    /// An array of tables (`[[name]]`); absent is empty.
    func tables(_ name: String) throws(ConfigError) -> [TableReader] {
        guard let value = table[name] else { return [] }
        guard let array = value.array else { throw error(name, "expected an array of tables ([[\(key(name))]]), got \(typeName(value))") }
        var readers: [TableReader] = []
        for (i, item) in array.enumerated() {
            guard let t = item.table else { throw error("\(name)[\(i)]", "expected a table, got \(typeName(item))") }
            readers.append(TableReader(t, path: "\(key(name))[\(i)]", source: source))
        }
        return readers
    }
}

/// "W:H", each side digits with an optional decimal part ("16:9", "1.91:1"): a hand-written
/// match, as a Regex literal compiles _StringProcessing's parser at start-up (0.9 MB of code).
func isAspectRatio(_ text: String) -> Bool {
    func isNumber(_ side: Substring) -> Bool {
        side.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            .allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } }
    }
    let sides = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
    return sides.count == 2 && sides.allSatisfy(isNumber)
}
