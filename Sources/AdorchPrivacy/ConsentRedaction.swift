/// How a consent string appears in a log line: never in full (docs/privacy.md, "Setting a
/// viewer's state"). A TC or GPP string is a viewer's choices, and with a CMP's timestamps
/// nearly a fingerprint of them.
public enum ConsentRedaction {
    /// The first two characters, which tell the kind of string and its version and nothing of
    /// the choices (`CO`, `DB`, `1Y`), and the length: `CO…(142 bytes)`. Characters outside
    /// base64url and the US Privacy flags are not shown, so a line cannot be forged with one.
    public static func redact(_ text: String) -> String {
        let head = text.unicodeScalars.prefix(2)
        let shown = head.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_".unicodeScalars.contains($0)) }
        return "\(shown ? String(String.UnicodeScalarView(head)) : "")…(\(text.utf8.count) bytes)"
    }
}
