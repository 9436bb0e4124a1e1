// Decoding a GPP string: the header, then each section by its id.

extension GPPString {
    /// Decodes `header~section~...`. The header (type 3, version 1) lists the section ids in
    /// Fibonacci-coded range encoding; the sections follow in that order, one per id.
    public static func decode(_ text: String) throws(ConsentStringError) -> GPPString {
        let bytes = text.utf8.count
        if bytes > ConsentStringBound.maxBytes { throw .tooLong(field: "GPP string", bytes: bytes, limit: ConsentStringBound.maxBytes) }
        if bytes == 0 { throw .empty(field: "GPP string") }

        // Counted before anything is split or read: each section is checked again on every
        // call that carries the string, so their number is bounded, not only the text.
        let present = text.utf8.reduce(0) { $1 == UInt8(ascii: "~") ? $0 + 1 : $0 }
        let limit = ConsentStringBound.maxGPPSections
        if present > limit { throw .tooManySections(field: "sections", count: present, limit: limit) }

        let parts = text.split(separator: "~", omittingEmptySubsequences: false)
        var header = try Base64URLBitReader(parts[0], segment: "header", offset: 0, wholeBytes: false)
        let type = try header.int(6, "type")
        if type != 3 { throw .unexpectedValue(field: header.qualified("type"), found: type, expected: "3 (the GPP header)") }
        let version = try header.int(6, "version")
        if version != 1 { throw .unsupportedVersion(field: header.qualified("version"), found: version, supported: [1]) }
        let sectionIds = try header.sectionIds(present: present)

        var sections: [GPPSection] = []
        var offset = parts[0].utf8.count + 1
        for (id, part) in zip(sectionIds, parts.dropFirst()) {
            let name = GPPSection.name(of: id)
            if part.isEmpty { throw .inSection(id: id, name: name, .empty(field: name)) }
            do {
                sections.append(try section(id: id, part, offset: offset))
            } catch {
                throw .inSection(id: id, name: name, error)
            }
            offset += part.utf8.count + 1
        }
        return GPPString(sectionIds: sectionIds, sections: sections)
    }

    private static func section(id: Int, _ text: Substring, offset: Int) throws(ConsentStringError) -> GPPSection {
        switch id {
        case GPPSection.tcfEuV2ID:
            return .tcfEuV2(try TCString.decode(text, field: GPPSection.name(of: id)))
        case GPPSection.usPrivacyID:
            do {
                // A section is never empty (checked before), so decode returns a value.
                return .usPrivacy(try USPrivacy.decode(String(text))!)
            } catch {
                throw .usPrivacy(error)
            }
        case GPPSection.usNationalID:
            return .usNational(try USNational.decode(text, offset: offset))
        default:
            return .unsupported(id: id, encoded: String(text))
        }
    }
}

extension Base64URLBitReader {
    /// The header's SectionIds: NumEntries (12 bits), then per entry IsARange and one or two
    /// Fibonacci-coded offsets: an id is the previous id (0 at first) plus its offset, a range's
    /// end its start plus the second. Offsets are at least 1, so ids ascend.
    /// Each entry is counted by its size before its ids are listed, against
    /// `ConsentStringBound.maxGPPSections` and then the `present` sections, and no id may pass
    /// `ConsentStringBound.maxGPPSectionID`: a range naming
    /// millions of ids is refused by its size, never expanded, and at most `present` ids are.
    mutating func sectionIds(present: Int) throws(ConsentStringError) -> [Int] {
        let count = try int(12, "sectionIds.numEntries")
        var ids: [Int] = []
        var previous = 0
        func add(_ offset: Int, to base: Int, _ field: String, at: Int) throws(ConsentStringError) -> Int {
            let (id, overflow) = base.addingReportingOverflow(offset)
            if overflow { throw .badFibonacciNumber(field: qualified(field), atBit: at) }
            return id
        }
        for index in 0..<count {
            let entry = "sectionIds[\(index)]"
            let isRange = try bool("\(entry).isARange")
            let at = position
            let start = try add(try fibonacci("\(entry).start"), to: previous, entry, at: at)
            let end = isRange ? try add(try fibonacci("\(entry).end"), to: start, entry, at: at) : start
            // end >= start >= 1, so the size is at most Int.max; the sum may overflow.
            let (declared, overflow) = ids.count.addingReportingOverflow(end - start + 1)
            let limit = ConsentStringBound.maxGPPSections
            if overflow || declared > limit { throw .tooManySections(field: qualified(entry), count: overflow ? Int.max : declared, limit: limit) }
            let highest = ConsentStringBound.maxGPPSectionID
            if end > highest { throw .valueOutOfRange(field: qualified(entry), found: end, allowed: 1...highest) }
            if declared > present { throw .sectionCountMismatch(declared: declared, present: present) }
            ids.append(contentsOf: start...end)
            previous = end
        }
        if ids.count != present { throw .sectionCountMismatch(declared: ids.count, present: present) }
        return ids
    }
}
