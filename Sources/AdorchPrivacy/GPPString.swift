/// A decoded IAB GPP string: the header's section ids and each section, in header order.
///
/// Decoding is in GPPString+Decode.swift; this file is the model and the questions asked of it.
public struct GPPString: Equatable, Sendable {
    /// Ascending, as the header lists them.
    public let sectionIds: [Int]
    /// One per id, in the same order.
    public let sections: [GPPSection]

    public func section(_ id: Int) -> GPPSection? {
        sectionIds.firstIndex(of: id).map { sections[$0] }
    }

    public var tcfEuV2: TCString? {
        if case .tcfEuV2(let string) = section(GPPSection.tcfEuV2ID) { string } else { nil }
    }

    public var usPrivacy: USPrivacy? {
        if case .usPrivacy(let string) = section(GPPSection.usPrivacyID) { string } else { nil }
    }

    public var usNational: USNational? {
        if case .usNational(let section) = section(GPPSection.usNationalID) { section } else { nil }
    }

    /// The sections an OpenRTB `gpp_sid` says apply to this request, in `gpp_sid`'s order.
    /// `gpp_sid` is to name sections of this string's header, each once (OpenRTB 2.6:
    /// "the section(s) of the string which should be applied"); any other id refuses it, as
    /// an app whose `gpp_sid` and `gpp` disagree has sent a signal nobody can read. More ids
    /// than `ConsentStringBound.maxGPPSections` are refused before any is looked up, and each
    /// is looked up once, by hash: the check is linear in `gpp_sid` and the header.
    public func applicableSections(gppSid: [Int]) throws(ConsentStringError) -> [GPPSection] {
        let limit = ConsentStringBound.maxGPPSections
        if gppSid.count > limit { throw .tooManySids(count: gppSid.count, limit: limit) }
        // The first of an id listed twice, as `section(_:)` finds it.
        let byId = Dictionary(zip(sectionIds, sections), uniquingKeysWith: { first, _ in first })
        var seen: Set<Int> = []
        var applicable: [GPPSection] = []
        applicable.reserveCapacity(gppSid.count)
        for id in gppSid {
            guard let section = byId[id] else { throw .sidNotInHeader(id: id, header: sectionIds) }
            if !seen.insert(id).inserted { throw .sidDuplicate(id: id) }
            applicable.append(section)
        }
        return applicable
    }
}

/// One section of a GPP string.
public enum GPPSection: Equatable, Sendable {
    case tcfEuV2(TCString)
    case usPrivacy(USPrivacy)
    case usNational(USNational)
    /// A section this library does not decode (TCF Canada, the US state sections, ids added
    /// later): kept as sent. GPP has each section stand alone, so one not understood leaves
    /// the others readable.
    case unsupported(id: Int, encoded: String)

    public static let tcfEuV2ID = 2
    public static let usPrivacyID = 6
    public static let usNationalID = 7

    /// The names the GPP specification gives section ids, for messages.
    static let names: [Int: String] = [
        2: "tcfeuv2", 5: "tcfcav1", 6: "uspv1", 7: "usnat", 8: "usca", 9: "usva", 10: "usco",
        11: "usut", 12: "usct", 13: "usfl", 14: "usmt", 15: "usor", 16: "ustx", 17: "usde",
        18: "usia", 19: "usne", 20: "usnh", 21: "usnj", 22: "ustn", 23: "usmn",
    ]

    /// The specification's name for a section id, or `id N` for one it had not named.
    public static func name(of id: Int) -> String { names[id] ?? "id \(id)" }
}
