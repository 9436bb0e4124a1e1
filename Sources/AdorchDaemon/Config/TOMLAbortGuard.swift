import TOMLKit

/// Finds the malformed input on which TOMLKit's toml++ (3.4, in TOMLKit 0.6.0) asserts, and so
/// aborts the process in release builds too, instead of returning an error
/// (LebJe/TOMLKit#30; the config fuzzer finds each within seconds). Two places are known:
///
/// - a table header whose key starts with anything but a key character (`[[[slots]]`,
///   `[!a]`, a `[` alone on its line): `parse_key()` asserts;
/// - a `}` where an array expects a value (`x = [}`, `x = [1, }`): `parse_value()` asserts.
///
/// Each is found here first and named as an error; everything else toml++ reports itself.
enum TOMLAbortGuard {
    struct Finding: Equatable {
        var line: Int
        var column: Int
        var message: String
    }

    static func check(_ text: String) -> Finding? {
        // TOMLKit hands toml++ a C string: what follows a NUL is never parsed.
        let scalars = text.unicodeScalars.prefix { $0 != "\0" }
        // The brace first: the header check parses what precedes a suspect line, and that
        // text must not hold the brace.
        let brace = braceForValue(Array(scalars))
        return badHeader(text, scalars, upTo: brace?.line ?? .max) ?? brace
    }

    /// A line that looks like a bad header may be inside a multi-line string or array, where
    /// it is valid. toml++ reaches it as a header only if everything before its line parses on
    /// its own (a cut inside a string or an array is an unterminated-value error), so that is
    /// the test: exact, and cheap, since only suspect lines cost a parse.
    private static func badHeader(_ text: String, _ all: Substring.UnicodeScalarView, upTo lastLine: Int) -> Finding? {
        var lineStart = all.startIndex, number = 1
        while lineStart < all.endIndex, number <= lastLine {
            let lineEnd = all[lineStart...].firstIndex(of: "\n") ?? all.endIndex
            var line = Array(all[lineStart..<lineEnd])
            if lineEnd < all.endIndex { line.append("\n") }
            // toml++ skips a byte-order mark; blank it so that columns still count it.
            if number == 1, line.first == "\u{FEFF}" { line[0] = " " }
            if let (offset, found) = badKeyStart(line),
               (try? TOMLTable(string: String(text.unicodeScalars[..<lineStart]))) != nil {
                let shown = found == "\n" || found == "\r" ? "the end of the line"
                    : found.value < 0x21 || found.properties.isWhitespace ? "U+\(String(found.value, radix: 16, uppercase: true))" : "'\(found)'"
                return Finding(line: number, column: offset + 1,
                               message: "a table header must start with a key (a letter, digit, '-', '_' or a quoted key), saw \(shown)")
            }
            guard lineEnd < all.endIndex else { break }
            lineStart = all.index(after: lineEnd)
            number += 1
        }
        return nil
    }

    /// A `}` outside strings and comments whose previous token is `[` or `,`. Valid TOML never
    /// has one (in an inline table it is a dangling comma, which toml++ reports), so only
    /// invalid text is refused here; and before it, toml++ sees strings and comments as this
    /// does, or has already stopped at an earlier error.
    private static func braceForValue(_ s: [Unicode.Scalar]) -> Finding? {
        var i = 0, line = 1, lineStart = 0
        var previous: Unicode.Scalar?
        while i < s.count {
            let c = s[i]
            switch c {
            case "\n":
                line += 1
                lineStart = i + 1
            case " ", "\t", "\r":
                break
            case "#":
                while i + 1 < s.count, s[i + 1] != "\n" { i += 1 }
            case "\"", "'":
                let triple = i + 2 < s.count && s[i + 1] == c && s[i + 2] == c
                i += triple ? 3 : 1
                while i < s.count {
                    if s[i] == "\\", c == "\"" { i += 2; continue }
                    if s[i] == "\n" {
                        guard triple else { break }  // a one-line string ends here (an error toml++ names)
                        line += 1
                        lineStart = i + 1
                    }
                    if s[i] == c, !triple || (i + 2 < s.count && s[i + 1] == c && s[i + 2] == c) {
                        i += triple ? 3 : 1
                        // A closing delimiter may carry up to two more quotes, which belong to the string.
                        var extra = 0
                        while triple, extra < 2, i < s.count, s[i] == c { i += 1; extra += 1 }
                        break
                    }
                    i += 1
                }
                previous = c
                continue
            case "}" where previous == "[" || previous == ",":
                return Finding(line: line, column: i - lineStart + 1, message: "expected a value or ']', saw '}'")
            default:
                previous = c
            }
            i += 1
        }
        return nil
    }

    /// Where a header's key would start on `line` (with its line feed, if any) and the scalar
    /// found there, if the line is a header and that scalar is one on which toml++ asserts.
    private static func badKeyStart(_ scalars: [Unicode.Scalar]) -> (Int, Unicode.Scalar)? {
        var i = 0
        func skipBlanks() -> Bool {
            let start = i
            while i < scalars.count, scalars[i] == " " || scalars[i] == "\t" { i += 1 }
            return i > start
        }
        _ = skipBlanks()
        guard i < scalars.count, scalars[i] == "[" else { return nil }
        i += 1
        // `[[` opens an array of tables; `[ [` is an error toml++ reports itself.
        if i < scalars.count, scalars[i] == "[" {
            i += 1
            _ = skipBlanks()
        } else if skipBlanks(), i < scalars.count, scalars[i] == "[" {
            return nil
        }
        guard i < scalars.count else { return nil }  // the text ends: toml++ reports that
        let c = scalars[i]
        let isKeyStart = c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "-" || c == "_")
        return isKeyStart || c == "\"" || c == "'" || c == "]" ? nil : (i, c)
    }
}
