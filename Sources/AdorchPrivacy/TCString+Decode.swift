// Decoding a TC string: the core segment, then the optional segments by their type.

extension TCString {
    /// Decodes a TCF v2 TC string: base64url segments joined by `.`, the core segment first.
    /// `=` padding is accepted. Refuses TCF v1.1 strings, and anything malformed, with the
    /// field it was reading.
    public static func decode(_ text: String) throws(ConsentStringError) -> TCString {
        try decode(text[...], field: "TC string")
    }

    /// `field` names the text in errors (the GPP section decodes through here too).
    static func decode(_ text: Substring, field: String) throws(ConsentStringError) -> TCString {
        let bytes = text.utf8.count
        if bytes > ConsentStringBound.maxBytes { throw .tooLong(field: field, bytes: bytes, limit: ConsentStringBound.maxBytes) }
        if bytes == 0 { throw .empty(field: field) }

        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        var offset = 0
        var readers: [Base64URLBitReader] = []
        for (index, segment) in segments.enumerated() {
            let name = index == 0 ? "core" : "segment[\(index)]"
            if segment.isEmpty { throw .empty(field: name) }
            readers.append(try Base64URLBitReader(segment, segment: name, offset: offset, wholeBytes: true))
            offset += segment.utf8.count + 1
        }

        var core = readers[0]
        let version = try core.int(6, "version")
        if version == 1 { throw .tcfVersion1 }
        if version != 2 { throw .unsupportedVersion(field: core.qualified("version"), found: version, supported: [2]) }
        let created = try core.int(36, "created")
        let lastUpdated = try core.int(36, "lastUpdated")
        let cmpId = try core.int(12, "cmpId")
        let cmpVersion = try core.int(12, "cmpVersion")
        let consentScreen = try core.int(6, "consentScreen")
        let consentLanguage = try core.letters("consentLanguage")
        let vendorListVersion = try core.int(12, "vendorListVersion")
        let tcfPolicyVersion = try core.int(6, "tcfPolicyVersion")
        let isServiceSpecific = try core.bool("isServiceSpecific")
        let useNonStandardTexts = try core.bool("useNonStandardTexts")
        let specialFeatureOptIns = try core.bitField(12, "specialFeatureOptIns")
        let purposesConsent = try core.bitField(24, "purposesConsent")
        let purposesLITransparency = try core.bitField(24, "purposesLITransparency")
        let purposeOneTreatment = try core.bool("purposeOneTreatment")
        let publisherCC = try core.letters("publisherCC")
        let vendorConsents = try core.vendorSection("vendorConsents")
        let vendorLegitimateInterests = try core.vendorSection("vendorLegitimateInterests")
        let publisherRestrictions = try core.publisherRestrictions()

        var disclosedVendors: VendorSection?
        var allowedVendors: VendorSection?
        var publisherTC: PublisherTC?
        var skippedSegmentTypes: [Int] = []
        for var reader in readers.dropFirst() {
            let type = try reader.int(3, "segmentType")
            switch type {
            case 0:
                throw .unexpectedValue(field: reader.qualified("segmentType"), found: 0, expected: "1, 2 or 3 (only the first segment is the core)")
            case 1:
                if disclosedVendors != nil { throw .duplicateSegment(field: reader.segment, segmentType: 1) }
                disclosedVendors = try reader.vendorSection("disclosedVendors")
            case 2:
                if allowedVendors != nil { throw .duplicateSegment(field: reader.segment, segmentType: 2) }
                allowedVendors = try reader.vendorSection("allowedVendors")
            case 3:
                if publisherTC != nil { throw .duplicateSegment(field: reader.segment, segmentType: 3) }
                publisherTC = try reader.publisherTC()
            default:
                skippedSegmentTypes.append(type)
            }
        }

        return TCString(
            version: version, createdDeciseconds: created, lastUpdatedDeciseconds: lastUpdated,
            cmpId: cmpId, cmpVersion: cmpVersion, consentScreen: consentScreen, consentLanguage: consentLanguage,
            vendorListVersion: vendorListVersion, tcfPolicyVersion: tcfPolicyVersion,
            isServiceSpecific: isServiceSpecific, useNonStandardTexts: useNonStandardTexts,
            specialFeatureOptIns: specialFeatureOptIns, purposesConsent: purposesConsent,
            purposesLITransparency: purposesLITransparency, purposeOneTreatment: purposeOneTreatment,
            publisherCC: publisherCC, vendorConsents: vendorConsents, vendorLegitimateInterests: vendorLegitimateInterests,
            publisherRestrictions: publisherRestrictions, disclosedVendors: disclosedVendors,
            allowedVendors: allowedVendors, publisherTC: publisherTC, skippedSegmentTypes: skippedSegmentTypes
        )
    }
}

extension Base64URLBitReader {
    /// MaxVendorId, IsRangeEncoding, then a BitField of MaxVendorId bits or range entries,
    /// none of which may name a vendor above MaxVendorId.
    mutating func vendorSection(_ field: String) throws(ConsentStringError) -> VendorSection {
        let maxVendorId = try int(16, "\(field).maxVendorId")
        if try bool("\(field).isRangeEncoding") {
            let vendors = try rangeEntries("\(field).rangeEntries", maxVendorId: maxVendorId)
            return VendorSection(maxVendorId: maxVendorId, encoding: .range, vendors: vendors)
        }
        return VendorSection(maxVendorId: maxVendorId, encoding: .bitField, vendors: try bitField(maxVendorId, "\(field).bitField"))
    }

    /// NumEntries (12 bits), then per entry IsARange, a start (or only) id and, for a range,
    /// an end id, 16 bits each.
    mutating func rangeEntries(_ field: String, maxVendorId: Int) throws(ConsentStringError) -> IDSet {
        let count = try int(12, "\(field).numEntries")
        var ranges: [ClosedRange<Int>] = []
        for index in 0..<count {
            let entry = "\(field)[\(index)]"
            let at = position
            let isRange = try bool("\(entry).isARange")
            let start = try int(16, "\(entry).startVendorId")
            let end = isRange ? try int(16, "\(entry).endVendorId") : start
            if start == 0 { throw .vendorIdZero(field: qualified(entry), atBit: at) }
            if end < start { throw .rangeEndBeforeStart(field: qualified(entry), start: start, end: end, atBit: at) }
            if end > maxVendorId { throw .vendorIdAboveMax(field: qualified(entry), id: end, maxVendorId: maxVendorId, atBit: at) }
            ranges.append(start...end)
        }
        return IDSet(merging: ranges)
    }

    /// NumPubRestrictions, then per restriction PurposeId, RestrictionType and range entries.
    /// A restriction's entries have no MaxVendorId of their own: any id up to 65,535.
    mutating func publisherRestrictions() throws(ConsentStringError) -> [PublisherRestriction] {
        let count = try int(12, "publisherRestrictions.numPubRestrictions")
        let most = ConsentStringBound.maxPublisherRestrictions
        if count > most { throw .valueOutOfRange(field: qualified("publisherRestrictions.numPubRestrictions"), found: count, allowed: 0...most) }
        var restrictions: [PublisherRestriction] = []
        for index in 0..<count {
            let field = "publisherRestrictions[\(index)]"
            let purposeId = try int(6, "\(field).purposeId")
            // Two bits: every value is a case.
            let restrictionType = PublisherRestriction.RestrictionType(rawValue: try int(2, "\(field).restrictionType"))!
            let vendors = try rangeEntries("\(field).rangeEntries", maxVendorId: VendorSection.vendorIDs.upperBound)
            restrictions.append(PublisherRestriction(purposeId: purposeId, restrictionType: restrictionType, vendors: vendors))
        }
        return restrictions
    }

    mutating func publisherTC() throws(ConsentStringError) -> PublisherTC {
        let purposesConsent = try bitField(24, "pubPurposesConsent")
        let purposesLITransparency = try bitField(24, "pubPurposesLITransparency")
        let numCustomPurposes = try int(6, "numCustomPurposes")
        return PublisherTC(
            purposesConsent: purposesConsent, purposesLITransparency: purposesLITransparency,
            numCustomPurposes: numCustomPurposes,
            customPurposesConsent: try bitField(numCustomPurposes, "customPurposesConsent"),
            customPurposesLITransparency: try bitField(numCustomPurposes, "customPurposesLITransparency")
        )
    }
}
