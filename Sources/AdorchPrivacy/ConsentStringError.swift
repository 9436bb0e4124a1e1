/// Why a TC string, a GPP string or a GPP section was refused. Each case names the field it was
/// read as (`core.vendorConsents.maxVendorId`, `header.sectionIds`, ...), so a refusal in a
/// log says where the string went wrong, not only that it did.
public indirect enum ConsentStringError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No text where some was needed: the whole string, a `.` segment or a `~` section.
    case empty(field: String)
    /// More text than `ConsentStringBound.maxBytes`.
    case tooLong(field: String, bytes: Int, limit: Int)
    /// A character outside base64url (`A-Z a-z 0-9 - _`, with `=` only as trailing padding);
    /// `offset` is the byte offset in the text given to the decoder.
    case badBase64Character(field: String, character: Character, offset: Int)
    /// The field needed more bits than the segment had left.
    case truncated(field: String, atBit: Int, needed: Int, available: Int)
    /// A TCF v1.1 string: the daemon supports TCF v2 only, and v1.1's fields mean other things.
    case tcfVersion1
    case unsupportedVersion(field: String, found: Int, supported: [Int])
    /// A field holding a value other than the one the format fixes (a GPP header's type, a
    /// segment's type).
    case unexpectedValue(field: String, found: Int, expected: String)
    case valueOutOfRange(field: String, found: Int, allowed: ClosedRange<Int>)
    /// Vendor ids start at 1.
    case vendorIdZero(field: String, atBit: Int)
    case rangeEndBeforeStart(field: String, start: Int, end: Int, atBit: Int)
    /// A range entry naming a vendor above the section's own MaxVendorId.
    case vendorIdAboveMax(field: String, id: Int, maxVendorId: Int, atBit: Int)
    /// A TC string with two optional segments of the same type: which one holds is unclear.
    case duplicateSegment(field: String, segmentType: Int)
    /// A Fibonacci-coded number too large for an Int, or without its terminating `11`.
    case badFibonacciNumber(field: String, atBit: Int)
    /// The GPP header lists one number of sections, the string carries another. The header's
    /// ids are counted entry by entry until they pass `present`: past that, `declared` is a floor.
    case sectionCountMismatch(declared: Int, present: Int)
    /// More than `ConsentStringBound.maxGPPSections` sections: carried by the string
    /// (`sections`), or listed by its header through the entry `field` names, a range counted
    /// by its size and never expanded.
    case tooManySections(field: String, count: Int, limit: Int)
    /// A `gpp_sid` id the GPP header does not list, or lists once but `gpp_sid` twice.
    case sidNotInHeader(id: Int, header: [Int])
    case sidDuplicate(id: Int)
    /// A `gpp_sid` naming more ids than a GPP string may carry sections.
    case tooManySids(count: Int, limit: Int)
    /// The US Privacy string inside GPP section 6.
    case usPrivacy(USPrivacyError)
    /// A GPP section that failed to decode, and why.
    case inSection(id: Int, name: String, ConsentStringError)

    public var description: String {
        switch self {
        case .empty(let field):
            "\(field): empty"
        case .tooLong(let field, let bytes, let limit):
            "\(field): \(bytes) bytes, more than the \(limit) decoded"
        case .badBase64Character(let field, let character, let offset):
            "\(field): \(String(reflecting: character)) at byte \(offset) is not a base64url character"
        case .truncated(let field, let atBit, let needed, let available):
            "\(field): truncated at bit \(atBit), needs \(needed) bits and \(available) are left"
        case .tcfVersion1:
            "core.version: a TCF v1.1 string; only TCF v2 strings are supported"
        case .unsupportedVersion(let field, let found, let supported):
            "\(field): version \(found), supported: \(supported.map(String.init).joined(separator: ", "))"
        case .unexpectedValue(let field, let found, let expected):
            "\(field): \(found), expected \(expected)"
        case .valueOutOfRange(let field, let found, let allowed):
            "\(field): \(found), outside \(allowed.lowerBound)...\(allowed.upperBound)"
        case .vendorIdZero(let field, let atBit):
            "\(field): vendor id 0 at bit \(atBit) (vendor ids start at 1)"
        case .rangeEndBeforeStart(let field, let start, let end, let atBit):
            "\(field): range \(start)-\(end) at bit \(atBit) ends before it starts"
        case .vendorIdAboveMax(let field, let id, let maxVendorId, let atBit):
            "\(field): vendor \(id) at bit \(atBit) is above the section's maxVendorId \(maxVendorId)"
        case .duplicateSegment(let field, let segmentType):
            "\(field): a second segment of type \(segmentType)"
        case .badFibonacciNumber(let field, let atBit):
            "\(field): the Fibonacci-coded number at bit \(atBit) overflows or has no terminating 11"
        case .sectionCountMismatch(let declared, let present):
            "sections: the header lists \(declared > present ? "more than \(present)" : "\(declared)") sections and the string carries \(present)"
        case .tooManySections(let field, let count, let limit):
            "\(field): \(count) sections, more than the \(limit) a GPP string may carry"
        case .sidNotInHeader(let id, let header):
            "gpp_sid: section \(id) is not in the GPP header's \(header)"
        case .sidDuplicate(let id):
            "gpp_sid: section \(id) listed twice"
        case .tooManySids(let count, let limit):
            "gpp_sid: \(count) ids, more than the \(limit) sections a GPP string may carry"
        case .usPrivacy(let error):
            error.description
        case .inSection(let id, let name, let error):
            "section \(id) (\(name)): \(error)"
        }
    }
}
