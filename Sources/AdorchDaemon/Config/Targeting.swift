import AdorchVarlink
import Foundation

/// What an app or the config may say about the audience, passed to plugins in the request's
/// targeting JSON: daemon-wide in [targeting], per slot in its targeting table, per Load
/// request; each level overrides the keys it names.
enum Targeting {
    static let keys = ["app_id", "gender", "age", "keywords", "extra", "paid_app", "test_mode"]

    /// The first problem with a targeting object, as (key, what was expected); nil if valid.
    static func problem(_ object: [String: JSONValue]) -> (key: String, message: String)? {
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            switch key {
            case "app_id":
                if value.stringValue == nil { return (key, "expected a string") }
            case "gender":
                guard let g = value.stringValue, ["male", "female", "unknown"].contains(g) else {
                    return (key, "expected male, female or unknown")
                }
            case "age":
                guard let age = value.intValue, (0...150).contains(age) else { return (key, "expected an integer from 0 to 150") }
            case "keywords":
                guard let words = value.arrayValue, words.allSatisfy({ $0.stringValue != nil }), words.count <= 50 else {
                    return (key, "expected at most 50 strings")
                }
            case "extra":
                if value.objectValue == nil { return (key, "expected an object (a table)") }
            case "paid_app", "test_mode":
                if value.boolValue == nil { return (key, "expected true or false") }
            default:
                return (key, "unknown targeting key; expected one of \(keys.joined(separator: ", "))")
            }
        }
        return nil
    }

    /// `overlay`'s keys over `base`'s, as a JSON object text.
    static func merge(_ base: [String: JSONValue], _ overlay: [String: JSONValue]) -> [String: JSONValue] {
        base.merging(overlay) { $1 }
    }
}
