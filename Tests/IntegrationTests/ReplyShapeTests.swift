import AdorchTestSupport
import AdorchVarlink
import Foundation
import XCTest

/// A reply has the shape its IDL declares: every member it carries is declared in its type,
/// with a value of that type, and every member not optional is there. Read from the running
/// daemon's own GetInterfaceDescription, so the check follows the IDL as it is served.
final class ReplyShapeTests: XCTestCase {
    /// The IDL's types by name: each field's name and type text.
    private static func types(_ idl: String) -> [String: [(name: String, type: String)]] {
        var types: [String: [(String, String)]] = [:]
        let lines = idl.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.hasPrefix("#") && !$0.isEmpty }
        var text = lines.joined(separator: " ")
        while let range = text.range(of: "type ") {
            text = String(text[range.upperBound...])
            let name = String(text.prefix { $0.isLetter || $0.isNumber })
            guard let open = text.firstIndex(of: "(") else { break }
            var depth = 0, end = open
            for index in text[open...].indices {
                if text[index] == "(" { depth += 1 } else if text[index] == ")" { depth -= 1; if depth == 0 { end = index; break } }
            }
            let body = String(text[text.index(after: open)..<end])
            // An enum type (preroll, midroll) has no colons: its values are strings.
            types[name] = body.contains(":") ? Self.fields(body) : []
        }
        return types
    }

    private static func fields(_ body: String) -> [(String, String)] {
        var parts: [String] = [], current = "", depth = 0
        for character in body {
            if character == "(" { depth += 1 } else if character == ")" { depth -= 1 }
            if character == ",", depth == 0 { parts.append(current); current = "" } else { current.append(character) }
        }
        parts.append(current)
        return parts.compactMap { part in
            let pair = part.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            return pair.count == 2 ? (pair[0], pair[1]) : nil
        }
    }

    /// What is wrong with `value` as `type` (a type text of the IDL), at `path`.
    private static func problems(_ value: JSONValue, as type: String, _ path: String, _ types: [String: [(name: String, type: String)]]) -> [String] {
        var type = type
        if type.hasPrefix("?") {
            if value == .null { return [] }
            type.removeFirst()
        }
        if type.hasPrefix("[]") {
            guard case .array(let items) = value else { return ["\(path): not an array"] }
            let element = String(type.dropFirst(2))
            return items.enumerated().flatMap { problems($0.element, as: element, "\(path)[\($0.offset)]", types) }
        }
        switch type {
        case "string": return value.stringValue == nil ? ["\(path): not a string"] : []
        case "int": return value.intValue == nil ? ["\(path): not an int"] : []
        case "float": return value.doubleValue == nil ? ["\(path): not a float"] : []
        case "bool": return value.boolValue == nil ? ["\(path): not a bool"] : []
        case "object": return value.objectValue == nil ? ["\(path): not an object"] : []
        default: break
        }
        if type.hasPrefix("("), type.contains(":") { return problems(value, fields: fields(String(type.dropFirst().dropLast())), path, types) }
        guard let fields = types[type] else { return ["\(path): type \(type) is not declared"] }
        if fields.isEmpty { return value.stringValue == nil ? ["\(path): not one of \(type)'s values"] : [] }
        return problems(value, fields: fields, path, types)
    }

    private static func problems(_ value: JSONValue, fields: [(name: String, type: String)], _ path: String,
                                 _ types: [String: [(name: String, type: String)]]) -> [String] {
        guard case .object(let members) = value else { return ["\(path): not an object"] }
        var found = members.keys.filter { key in !fields.contains { $0.name == key } }.sorted().map { "\(path).\($0): not declared" }
        for field in fields {
            guard let member = members[field.name] else {
                if !field.type.hasPrefix("?") { found.append("\(path).\(field.name): declared, missing") }
                continue
            }
            found += problems(member, as: field.type, "\(path).\(field.name)", types)
        }
        return found
    }

    func testGetStatusAndListSlotsRepliesHaveTheShapeTheirIDLDeclares() throws {
        // Every kind of slot the default config has, interactive included, and a metrics listener.
        let daemon = try DaemonProcess()
        try daemon.waitFor("demo slots full", timeout: .seconds(30).scaled) { try daemon.allSlotsFull() }
        let manager = try XCTUnwrap(daemon.call("org.varlink.service.GetInterfaceDescription", ["interface": "io.adorch.Manager"])["description"]?.stringValue)
        let ads = try XCTUnwrap(daemon.call("org.varlink.service.GetInterfaceDescription", ["interface": "io.adorch.Ads"])["description"]?.stringValue)
        let status = try daemon.call("io.adorch.Manager.GetStatus")
        let managerTypes = Self.types(manager)
        let getStatus = Self.methodReply(manager, "GetStatus")
        XCTAssertEqual(Self.problems(.object(status), fields: getStatus, "GetStatus", managerTypes), [])
        let slots = try daemon.call("io.adorch.Ads.ListSlots")
        XCTAssertEqual(Self.problems(.object(slots), fields: Self.methodReply(ads, "ListSlots"), "ListSlots", Self.types(ads)), [])
        // GetPrivacy with every field of Privacy set, and with none.
        XCTAssertEqual(Self.problems(.object(try daemon.call("io.adorch.Ads.GetPrivacy")), fields: Self.methodReply(ads, "GetPrivacy"),
                                     "GetPrivacy", Self.types(ads)), [])
        _ = try daemon.call("io.adorch.Ads.SetPrivacy", ["privacy": [
            "gdpr_applies": false, "tc_string": "COtybn4PA_zT4KjACBENAPCIAEBAAECAAIAAAAAAAAAA", "gpp": "DBABTA~1YNN", "gpp_sid": [6],
            "us_privacy": "1YNN", "child_directed": false, "under_age_of_consent": false, "non_personalized": true, "max_content_rating": "T",
        ]])
        let privacy = try daemon.call("io.adorch.Ads.GetPrivacy")
        XCTAssertEqual(privacy["privacy"]?.objectValue?.count, 9, "every field is answered: \(privacy)")
        XCTAssertEqual(Self.problems(.object(privacy), fields: Self.methodReply(ads, "GetPrivacy"), "GetPrivacy", Self.types(ads)), [])
    }

    /// A method's reply fields, from its IDL.
    private static func methodReply(_ idl: String, _ method: String) -> [(name: String, type: String)] {
        let lines = idl.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.hasPrefix("#") && !$0.isEmpty }
        let text = lines.joined(separator: " ")
        guard let start = text.range(of: "method \(method)("), let arrow = text[start.upperBound...].range(of: "-> (") else { return [] }
        var depth = 1, end = arrow.upperBound
        for index in text[arrow.upperBound...].indices {
            if text[index] == "(" { depth += 1 } else if text[index] == ")" { depth -= 1; if depth == 0 { end = index; break } }
        }
        return fields(String(text[arrow.upperBound..<end]))
    }
}
