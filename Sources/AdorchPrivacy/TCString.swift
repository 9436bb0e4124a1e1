import Foundation

/// A decoded IAB TCF v2 TC string: the core segment and the optional segments it carried.
///
/// Field names follow the TCF v2 "TC String Format" specification. Decoding is in
/// TCString+Decode.swift; this file is the model and the questions asked of it.
public struct TCString: Equatable, Sendable {
    /// Always 2: other versions are refused.
    public let version: Int
    /// Deciseconds since the Unix epoch, as the string stores them.
    public let createdDeciseconds: Int
    public let lastUpdatedDeciseconds: Int
    public let cmpId: Int
    public let cmpVersion: Int
    public let consentScreen: Int
    /// Two letters, upper case (`EN`).
    public let consentLanguage: String
    /// 0 is kept as read: the IAB GPP libraries write it in their default strings.
    public let vendorListVersion: Int
    public let tcfPolicyVersion: Int
    public let isServiceSpecific: Bool
    /// UseNonStandardTexts (named UseNonStandardStacks before TCF 2.2, the same bit).
    public let useNonStandardTexts: Bool
    public let specialFeatureOptIns: IDSet
    public let purposesConsent: IDSet
    public let purposesLITransparency: IDSet
    public let purposeOneTreatment: Bool
    public let publisherCC: String
    public let vendorConsents: VendorSection
    public let vendorLegitimateInterests: VendorSection
    public let publisherRestrictions: [PublisherRestriction]
    /// Segment type 1, when the string carried it.
    public let disclosedVendors: VendorSection?
    /// Segment type 2.
    public let allowedVendors: VendorSection?
    /// Segment type 3.
    public let publisherTC: PublisherTC?
    /// Types 4...7 are reserved by the specification: such segments are passed over, and
    /// their types kept here, so a later TCF version's segment does not refuse the string.
    public let skippedSegmentTypes: [Int]

    public var created: Date { Date(timeIntervalSince1970: Double(createdDeciseconds) / 10) }
    public var lastUpdated: Date { Date(timeIntervalSince1970: Double(lastUpdatedDeciseconds) / 10) }

    public func purposeConsented(_ purpose: Int) -> Bool { purposesConsent.contains(purpose) }
    public func purposeLegitimateInterest(_ purpose: Int) -> Bool { purposesLITransparency.contains(purpose) }
    public func specialFeatureOptedIn(_ feature: Int) -> Bool { specialFeatureOptIns.contains(feature) }
    public func vendorConsented(_ vendor: Int) -> Bool { vendorConsents.contains(vendor) }
    public func vendorLegitimateInterest(_ vendor: Int) -> Bool { vendorLegitimateInterests.contains(vendor) }

    /// The restriction types the publisher put on `vendor` for `purpose`, in string order; the
    /// specification allows one, a string may carry more, and the caller decides what several mean.
    public func publisherRestrictions(purpose: Int, vendor: Int) -> [PublisherRestriction.RestrictionType] {
        publisherRestrictions.filter { $0.purposeId == purpose && $0.vendors.contains(vendor) }.map(\.restrictionType)
    }

    public func isRestricted(purpose: Int, type: PublisherRestriction.RestrictionType, vendor: Int) -> Bool {
        publisherRestrictions.contains { $0.purposeId == purpose && $0.restrictionType == type && $0.vendors.contains(vendor) }
    }
}

/// A vendor list of a TC string (consents, legitimate interests, disclosed, allowed vendors).
public struct VendorSection: Equatable, Sendable {
    /// How the string wrote the list; the set is the same either way.
    public enum Encoding: Equatable, Sendable {
        case bitField
        case range
    }

    /// Every id a vendor may have: a TC string writes vendor ids in 16 bits, and none is 0.
    /// The Global Vendor List's ids are the same numbers.
    public static let vendorIDs: ClosedRange<Int> = 1...65_535

    public let maxVendorId: Int
    public let encoding: Encoding
    public let vendors: IDSet

    /// Ids outside 1...maxVendorId read as absent, whatever the encoding.
    public func contains(_ vendor: Int) -> Bool {
        vendor >= 1 && vendor <= maxVendorId && vendors.contains(vendor)
    }
}

/// One publisher restriction: for `purposeId`, `restrictionType` applies to `vendors`.
public struct PublisherRestriction: Equatable, Sendable {
    public enum RestrictionType: Int, Equatable, Sendable {
        case notAllowed = 0
        case requireConsent = 1
        case requireLegitimateInterest = 2
        /// The specification reserves 3 and gives it no meaning.
        case undefined = 3
    }

    public let purposeId: Int
    public let restrictionType: RestrictionType
    public let vendors: IDSet
}

/// The Publisher TC segment (type 3): the publisher's own purposes and custom purposes.
public struct PublisherTC: Equatable, Sendable {
    public let purposesConsent: IDSet
    public let purposesLITransparency: IDSet
    public let numCustomPurposes: Int
    public let customPurposesConsent: IDSet
    public let customPurposesLITransparency: IDSet
}
