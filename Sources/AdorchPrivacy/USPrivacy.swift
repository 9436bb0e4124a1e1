/// A US Privacy (CCPA) string: `regs.us_privacy`, and GPP section 6 (uspv1).
///
/// Four characters: the specification version, `1`, then three flags, each `Y`, `N` or `-`
/// (not applicable), upper case only: explicit notice given, opted out of sale, transaction
/// covered by the IAB Limited Service Provider Agreement.
public struct USPrivacy: Equatable, Sendable {
    public enum Flag: Character, Equatable, Sendable {
        case yes = "Y"
        case no = "N"
        case notApplicable = "-"
    }

    /// The three flags, by the names errors give them.
    public enum Field: String, Equatable, Sendable {
        case notice = "explicit notice"
        case optOutSale = "opt-out of sale"
        case lspaCovered = "limited service provider agreement"
    }

    public let notice: Flag
    public let optOutSale: Flag
    public let lspaCovered: Flag

    public init(notice: Flag, optOutSale: Flag, lspaCovered: Flag) {
        (self.notice, self.optOutSale, self.lspaCovered) = (notice, optOutSale, lspaCovered)
    }

    /// Whether the user opted out of the sale of their data (`Y` in the third place).
    public var optedOutOfSale: Bool { optOutSale == .yes }

    /// The string decoded, or nil for the empty string: an empty `us_privacy` is the absence
    /// of a signal (as Prebid Server reads it), not a malformed one.
    public static func decode(_ text: String) throws(USPrivacyError) -> USPrivacy? {
        let scalars = text.unicodeScalars
        if scalars.isEmpty { return nil }
        guard scalars.count == 4 else { throw .wrongLength(found: scalars.count) }
        let characters = scalars.map(Character.init)
        guard characters[0] == "1" else { throw .unsupportedVersion(found: characters[0]) }
        func flag(_ character: Character, _ field: Field) throws(USPrivacyError) -> Flag {
            guard let flag = Flag(rawValue: character) else { throw .badFlag(field: field, found: character) }
            return flag
        }
        return USPrivacy(
            notice: try flag(characters[1], .notice),
            optOutSale: try flag(characters[2], .optOutSale),
            lspaCovered: try flag(characters[3], .lspaCovered)
        )
    }
}

/// Why a US Privacy string was refused.
public enum USPrivacyError: Error, Equatable, Sendable, CustomStringConvertible {
    case wrongLength(found: Int)
    case unsupportedVersion(found: Character)
    case badFlag(field: USPrivacy.Field, found: Character)

    public var description: String {
        switch self {
        case .wrongLength(let found): "US Privacy string: \(found) characters, must be 4"
        case .unsupportedVersion(let found): "US Privacy version: \(String(reflecting: found)), must be \"1\""
        case .badFlag(let field, let found): "US Privacy \(field.rawValue): \(String(reflecting: found)), must be 'Y', 'N' or '-'"
        }
    }
}
