import AdorchEngine
import AdorchPrivacy
import AdorchVarlink

/// The fields of io.adorch.Ads's Privacy type, each named and described once: the IDL's type
/// is written from them, and a Privacy value is read by them (docs/privacy.md, "Setting a
/// viewer's state").
enum PrivacyField: String, CaseIterable {
    case gdprApplies = "gdpr_applies"
    case tcString = "tc_string"
    case gpp
    case gppSid = "gpp_sid"
    case usPrivacy = "us_privacy"
    case childDirected = "child_directed"
    case underAgeOfConsent = "under_age_of_consent"
    case nonPersonalized = "non_personalized"
    case maxContentRating = "max_content_rating"

    /// The field's name where a refusal names it: `privacy.tc_string`.
    var parameter: String { "privacy.\(rawValue)" }

    private var idl: (comment: String, type: String) {
        switch self {
        case .gdprApplies: ("whether the GDPR applies to the viewer; null: unknown (the daemon's config decides)", "?bool")
        case .tcString: ("a TCF v2 TC string, at most \(ConsentStringBound.maxBytes) bytes", "?string")
        case .gpp: ("a GPP string, at most \(ConsentStringBound.maxBytes) bytes and \(ConsentStringBound.maxGPPSections) sections", "?string")
        case .gppSid: ("the ids of the GPP sections that apply to the viewer (OpenRTB's gpp_sid), at most \(ConsentStringBound.maxGPPSections); only with gpp", "?[]int")
        case .usPrivacy: ("a US Privacy string, e.g. 1YNN", "?string")
        case .childDirected: ("the app is directed to children (COPPA), or says this viewer is a child", "?bool")
        case .underAgeOfConsent: ("the viewer is under the age of digital consent (GDPR article 8)", "?bool")
        case .nonPersonalized: ("limited ad tracking, or the app's own choice of non-personalised ads", "?bool")
        case .maxContentRating: ("the highest content rating of ads for the viewer: \(ContentRating.allCases.map(\.rawValue).joined(separator: ", ")); null: no limit", "?string")
        }
    }

    /// The IDL's Privacy type.
    static var typeIDL: String {
        let fields = allCases.map { "  # \($0.idl.comment)\n  \($0.rawValue): \($0.idl.type)" }.joined(separator: ",\n")
        return """
            # A viewer's privacy signals, as the app says them (docs/privacy.md, "Setting a viewer's state").
            # Each string is decoded when it comes: one that does not decode is refused, InvalidParameter naming it.
            type Privacy (
            \(fields)
            )
            """
    }
}

/// A string of a Privacy value that does not decode: its field and the decoder's reason,
/// which never quotes the string whole.
struct PrivacyRefusal: Error {
    var field: PrivacyField
    var reason: String
}

extension ViewerPrivacy {
    /// `ViewerPrivacy(signals)`, with the field whose string did not decode named. Decoded
    /// once; only a refusal decodes the strings one by one, to find which it was.
    static func decoding(_ signals: PrivacySignals) throws(PrivacyRefusal) -> ViewerPrivacy {
        do {
            return try ViewerPrivacy(signals)
        } catch {
            let field: PrivacyField
            switch error {
            case .sidNotInHeader, .sidDuplicate, .tooManySids: field = .gppSid
            default:
                if signals.tcString != nil, (try? ViewerPrivacy(PrivacySignals(tcString: signals.tcString))) == nil {
                    field = .tcString
                } else if signals.gpp != nil, (try? ViewerPrivacy(PrivacySignals(gpp: signals.gpp))) == nil {
                    field = .gpp
                } else {
                    field = .usPrivacy
                }
            }
            throw PrivacyRefusal(field: field, reason: error.description)
        }
    }
}

/// [Varlink queue] A call's `privacy` parameter (SetPrivacy, Show, Load), read and decoded
/// once: nil when absent or null. A field of the wrong type, a string over
/// `ConsentStringBound.maxBytes`, a string that does not decode (a GPP string or gpp_sid
/// over `ConsentStringBound.maxGPPSections` among them), an unknown rating, gpp_sid without
/// gpp or a key Privacy does not have is an InvalidParameter naming it.
func privacyParameter(of call: VarlinkCall) throws(VarlinkError) -> ViewerPrivacy? {
    let object: [String: JSONValue]
    switch call.parameters["privacy"] {
    case nil, .null?: return nil
    case .object(let o)?: object = o
    default: throw invalidParameter("privacy", "expected a Privacy object or null")
    }
    if let stray = object.keys.filter({ PrivacyField(rawValue: $0) == nil }).min() {
        throw invalidParameter("privacy.\(stray)", "Privacy has no such field; its fields: \(PrivacyField.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    func value(_ field: PrivacyField) -> JSONValue? {
        if case .null? = object[field.rawValue] { return nil }
        return object[field.rawValue]
    }
    func bool(_ field: PrivacyField) throws(VarlinkError) -> Bool? {
        guard let v = value(field) else { return nil }
        guard let b = v.boolValue else { throw invalidParameter(field.parameter, "expected a bool or null") }
        return b
    }
    func string(_ field: PrivacyField) throws(VarlinkError) -> String? {
        guard let v = value(field) else { return nil }
        guard let s = v.stringValue else { throw invalidParameter(field.parameter, "expected a string or null") }
        return try FieldBounds.check(s, field.parameter, max: ConsentStringBound.maxBytes)
    }
    var signals = PrivacySignals()
    signals.gdprApplies = try bool(.gdprApplies).map { $0 ? .yes : .no } ?? .unknown
    signals.tcString = try string(.tcString)
    signals.gpp = try string(.gpp)
    if let v = value(.gppSid) {
        guard let items = v.arrayValue, let ids = Optional(items.compactMap(\.intValue)), ids.count == items.count,
              let sid = Optional(ids.compactMap { Int(exactly: $0) }), sid.count == ids.count
        else { throw invalidParameter(PrivacyField.gppSid.parameter, "expected an array of integers or null") }
        guard signals.gpp != nil else { throw invalidParameter(PrivacyField.gppSid.parameter, "names GPP sections, so it needs gpp") }
        signals.gppSid = sid
    }
    signals.usPrivacy = try string(.usPrivacy)
    signals.childDirected = try bool(.childDirected) ?? false
    signals.underAgeOfConsent = try bool(.underAgeOfConsent) ?? false
    signals.nonPersonalized = try bool(.nonPersonalized) ?? false
    if let name = try string(.maxContentRating) {
        guard let rating = ContentRating(rawValue: name) else {
            throw invalidParameter(PrivacyField.maxContentRating.parameter,
                                   "expected one of \(ContentRating.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name)\"")
        }
        signals.maxContentRating = rating
    }
    do {
        return try ViewerPrivacy.decoding(signals)
    } catch {
        throw invalidParameter(error.field.parameter, "does not decode: \(error.reason)")
    }
}

extension PrivacySignals {
    /// As the Privacy type: what GetPrivacy answers. The flags the app left out read false.
    var json: JSONValue {
        var object: [String: JSONValue] = [
            PrivacyField.childDirected.rawValue: .bool(childDirected),
            PrivacyField.underAgeOfConsent.rawValue: .bool(underAgeOfConsent),
            PrivacyField.nonPersonalized.rawValue: .bool(nonPersonalized),
        ]
        switch gdprApplies {
        case .yes: object[PrivacyField.gdprApplies.rawValue] = .bool(true)
        case .no: object[PrivacyField.gdprApplies.rawValue] = .bool(false)
        case .unknown: break
        }
        if let tcString { object[PrivacyField.tcString.rawValue] = .string(tcString) }
        if let gpp {
            object[PrivacyField.gpp.rawValue] = .string(gpp)
            object[PrivacyField.gppSid.rawValue] = .array(gppSid.map { .int(Int64($0)) })
        }
        if let usPrivacy { object[PrivacyField.usPrivacy.rawValue] = .string(usPrivacy) }
        if let maxContentRating { object[PrivacyField.maxContentRating.rawValue] = .string(maxContentRating.rawValue) }
        return .object(object)
    }

    /// For a log line: the flags, each string redacted (`ConsentRedaction`) and gpp_sid's
    /// count, never its ids; so every part is bounded, whatever the signals hold.
    var logDescription: String {
        var parts = ["gdpr_applies=\(gdprApplies)"]
        if let tcString { parts.append("tc_string=\(ConsentRedaction.redact(tcString))") }
        if let gpp { parts.append("gpp=\(ConsentRedaction.redact(gpp)) gpp_sid=\(gppSid.count) sections") }
        if let usPrivacy { parts.append("us_privacy=\(ConsentRedaction.redact(usPrivacy))") }
        if childDirected { parts.append("child_directed") }
        if underAgeOfConsent { parts.append("under_age_of_consent") }
        if nonPersonalized { parts.append("non_personalized") }
        if let maxContentRating { parts.append("max_content_rating=\(maxContentRating.rawValue)") }
        return parts.joined(separator: " ")
    }
}
