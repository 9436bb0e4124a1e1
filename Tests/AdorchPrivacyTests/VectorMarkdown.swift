import Foundation
import XCTest

/// The vector pages of shared/data/consent (tcf-vectors.md, gpp-vectors.md), read at run time:
/// the data is not copied into the repository.
struct VectorMarkdown {
    /// `### ID — title`, its first code block, and its `- Label: text` bullets.
    struct Entry: Sendable {
        let id: String
        let title: String
        let string: String
        let bullets: [String: String]
    }

    let entries: [Entry]
    /// Every table row, as its cells with the backticks around a cell removed.
    let rows: [[String]]
    /// Lines outside tables and entries (for the page's free-form lists).
    let lines: [String]

    /// The package's folder, then ../shared/data/consent beside it.
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("../shared/data/consent").standardizedFileURL

    /// The page, or an XCTSkip saying where it was looked for.
    static func load(_ name: String) throws -> VectorMarkdown {
        let url = folder.appendingPathComponent(name)
        guard let text = try? String(contentsOf: url, encoding: .utf8) else {
            throw XCTSkip("the consent vectors are in the shared folder beside the package, and \(url.path) is absent")
        }
        return VectorMarkdown(text)
    }

    init(_ text: String) {
        var entries: [Entry] = []
        var rows: [[String]] = []
        var current: (id: String, title: String, string: String?, bullets: [String: String])?
        var inCode = false
        var code: [String] = []
        func close() {
            if let entry = current { entries.append(Entry(id: entry.id, title: entry.title, string: entry.string ?? "", bullets: entry.bullets)) }
            current = nil
        }
        let lines = text.components(separatedBy: "\n")
        for line in lines {
            if line.hasPrefix("```") {
                if inCode, current != nil, current?.string == nil { current?.string = code.joined(separator: "\n") }
                inCode.toggle()
                code = []
                continue
            }
            if inCode { code.append(line); continue }
            if line.hasPrefix("## ") { close() }
            if line.hasPrefix("### ") {
                close()
                let heading = line.dropFirst(4)
                let parts = heading.components(separatedBy: " — ")
                current = (parts[0].trimmingCharacters(in: .whitespaces), parts.dropFirst().joined(separator: " — "), nil, [:])
            } else if current != nil, line.hasPrefix("- "), let colon = line.range(of: ": ") {
                let label = String(line[line.index(line.startIndex, offsetBy: 2)..<colon.lowerBound])
                current?.bullets[label] = String(line[colon.upperBound...])
            } else if line.hasPrefix("| "), !line.hasPrefix("|--"), !line.hasPrefix("| ---") {
                rows.append(line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                    .map { cell in
                        let trimmed = cell.trimmingCharacters(in: .whitespaces)
                        return trimmed.count >= 2 && trimmed.hasPrefix("`") && trimmed.hasSuffix("`") ? String(trimmed.dropFirst().dropLast()) : trimmed
                    })
            }
        }
        close()
        self.entries = entries
        self.rows = rows
        self.lines = lines
    }

    /// The rows whose first cell matches `pattern` (a regular expression), e.g. `^X-\d+$`.
    func rows(matching pattern: String) -> [[String]] {
        rows.filter { $0.first?.range(of: pattern, options: .regularExpression) != nil }
    }
}

/// Pieces of the pages' notation.
enum VectorNotation {
    /// `[1, 2, 3]`, `[]`, `[1 ×16]`, or `[2,1,0]` as numbers.
    static func numbers(_ text: String) -> [Int]? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("["), trimmed.hasSuffix("]") else { return nil }
        let inner = trimmed.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
        if inner.isEmpty { return [] }
        var numbers: [Int] = []
        for item in inner.split(separator: ",") {
            let parts = item.trimmingCharacters(in: .whitespaces).components(separatedBy: " ×")
            guard let value = Int(parts[0]) else { return nil }
            let repeats = parts.count == 2 ? Int(parts[1]) : 1
            guard let count = repeats else { return nil }
            numbers += Array(repeating: value, count: count)
        }
        return numbers
    }

    /// `2020-01-26T17:01:00Z` or `2020-03-11T13:58:57.400000+00:00` as deciseconds since the epoch.
    static func deciseconds(_ text: String) -> Int? {
        let pattern = #"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:Z|\+00:00)$"#
        guard let match = text.range(of: pattern, options: .regularExpression), match == text.startIndex..<text.endIndex else { return nil }
        let digits = text.split(whereSeparator: { !$0.isNumber }).map(String.init)
        var components = DateComponents()
        components.timeZone = TimeZone(identifier: "UTC")
        (components.year, components.month, components.day) = (Int(digits[0]), Int(digits[1]), Int(digits[2]))
        (components.hour, components.minute, components.second) = (Int(digits[3]), Int(digits[4]), Int(digits[5]))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: components) else { return nil }
        let tenths = digits.count > 6 ? Int(digits[6].prefix(1)) ?? 0 : 0
        return Int(date.timeIntervalSince1970) * 10 + tenths
    }
}
