/// GPP section 7, US National (usnat): the core segment and the optional GPC subsection.
///
/// Each field is 2 bits. For the notices, 1 means given and 2 not given; for the opt-outs,
/// 1 opted out and 2 did not; for the consents, 1 no consent and 2 consent; 0 is "not
/// applicable" everywhere but in MspaCoveredTransaction (1 yes, 2 no). 3 is refused.
public struct USNational: Equatable, Sendable {
    /// 1 or 2. Version 2 lists 16 sensitive data categories and 3 child consents, version 1
    /// lists 12 and 2; see `decode` for the version-1 strings written with the longer layout.
    public let version: Int
    public let sharingNotice: Int
    public let saleOptOutNotice: Int
    public let sharingOptOutNotice: Int
    public let targetedAdvertisingOptOutNotice: Int
    public let sensitiveDataProcessingOptOutNotice: Int
    public let sensitiveDataLimitUseNotice: Int
    public let saleOptOut: Int
    public let sharingOptOut: Int
    public let targetedAdvertisingOptOut: Int
    public let sensitiveDataProcessing: [Int]
    public let knownChildSensitiveDataConsents: [Int]
    public let personalDataConsents: Int
    public let mspaCoveredTransaction: Int
    public let mspaOptOutOptionMode: Int
    public let mspaServiceProviderMode: Int
    /// The GPC subsection's bit; nil when the section had no such subsection.
    public let gpc: Bool?

    /// The value an opt-out field holds when the user opted out.
    public static let optedOut = 1

    /// Whether the user opted out of the sale or the sharing of their data, or of targeted
    /// advertising: any of the three forbids personalised ads.
    public var optedOutOfSaleSharingOrTargetedAdvertising: Bool {
        [saleOptOut, sharingOptOut, targetedAdvertisingOptOut].contains(Self.optedOut)
    }

    /// The bits the 16/3 layout's core needs, version included (the 12/2 layout's needs 60).
    private static let longLayoutBits = 70

    /// Decodes a usnat section: `core` or `core.gpc`.
    ///
    /// Version 2 uses the 16/3 layout. Version 1 uses 12/2, except that a version-1 core long
    /// enough for 16/3 is read as 16/3: iabgpp-java, a reference implementation, wrote such
    /// strings once the layout grew (and reads them so), while a real 12/2 core is 60 bits.
    public static func decode(_ text: String) throws(ConsentStringError) -> USNational {
        try decode(text[...], offset: 0)
    }

    static func decode(_ text: Substring, offset: Int) throws(ConsentStringError) -> USNational {
        let bytes = text.utf8.count
        if bytes > ConsentStringBound.maxBytes { throw .tooLong(field: "usnat", bytes: bytes, limit: ConsentStringBound.maxBytes) }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        var core = try Base64URLBitReader(parts[0], segment: "usnat", offset: offset, wholeBytes: false)
        let version = try core.int(6, "version")
        let long: Bool
        switch version {
        case 1: long = core.bitCount >= longLayoutBits
        case 2: long = true
        default: throw .unsupportedVersion(field: core.qualified("version"), found: version, supported: [1, 2])
        }
        func value(_ field: String, allowed: ClosedRange<Int> = 0...2) throws(ConsentStringError) -> Int {
            let value = try core.int(2, field)
            if !allowed.contains(value) { throw .valueOutOfRange(field: core.qualified(field), found: value, allowed: allowed) }
            return value
        }
        func values(_ count: Int, _ field: String) throws(ConsentStringError) -> [Int] {
            var list: [Int] = []
            for index in 0..<count { list.append(try value("\(field)[\(index)]")) }
            return list
        }
        let sharingNotice = try value("sharingNotice")
        let saleOptOutNotice = try value("saleOptOutNotice")
        let sharingOptOutNotice = try value("sharingOptOutNotice")
        let targetedAdvertisingOptOutNotice = try value("targetedAdvertisingOptOutNotice")
        let sensitiveDataProcessingOptOutNotice = try value("sensitiveDataProcessingOptOutNotice")
        let sensitiveDataLimitUseNotice = try value("sensitiveDataLimitUseNotice")
        let saleOptOut = try value("saleOptOut")
        let sharingOptOut = try value("sharingOptOut")
        let targetedAdvertisingOptOut = try value("targetedAdvertisingOptOut")
        let sensitiveDataProcessing = try values(long ? 16 : 12, "sensitiveDataProcessing")
        let knownChildSensitiveDataConsents = try values(long ? 3 : 2, "knownChildSensitiveDataConsents")
        let personalDataConsents = try value("personalDataConsents")
        let mspaCoveredTransaction = try value("mspaCoveredTransaction", allowed: 1...2)
        let mspaOptOutOptionMode = try value("mspaOptOutOptionMode")
        let mspaServiceProviderMode = try value("mspaServiceProviderMode")

        var gpc: Bool?
        var subsectionOffset = offset + parts[0].utf8.count + 1
        for part in parts.dropFirst() {
            if part.isEmpty { throw .empty(field: "usnat.subsection") }
            var subsection = try Base64URLBitReader(part, segment: "usnat.subsection", offset: subsectionOffset, wholeBytes: false)
            subsectionOffset += part.utf8.count + 1
            let type = try subsection.int(2, "subsectionType")
            // GPC (type 1) is the only subsection usnat defines.
            if type != 1 { throw .unexpectedValue(field: subsection.qualified("subsectionType"), found: type, expected: "1 (GPC)") }
            if gpc != nil { throw .duplicateSegment(field: "usnat.subsection", segmentType: 1) }
            gpc = try subsection.bool("gpc")
        }

        return USNational(
            version: version, sharingNotice: sharingNotice, saleOptOutNotice: saleOptOutNotice,
            sharingOptOutNotice: sharingOptOutNotice, targetedAdvertisingOptOutNotice: targetedAdvertisingOptOutNotice,
            sensitiveDataProcessingOptOutNotice: sensitiveDataProcessingOptOutNotice,
            sensitiveDataLimitUseNotice: sensitiveDataLimitUseNotice, saleOptOut: saleOptOut, sharingOptOut: sharingOptOut,
            targetedAdvertisingOptOut: targetedAdvertisingOptOut, sensitiveDataProcessing: sensitiveDataProcessing,
            knownChildSensitiveDataConsents: knownChildSensitiveDataConsents, personalDataConsents: personalDataConsents,
            mspaCoveredTransaction: mspaCoveredTransaction, mspaOptOutOptionMode: mspaOptOutOptionMode,
            mspaServiceProviderMode: mspaServiceProviderMode, gpc: gpc
        )
    }
}
