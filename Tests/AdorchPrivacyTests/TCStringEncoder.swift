// The differential test's side of the TC string: a model with every field, drawn at random from
// a seeded generator, and its encoding. The library ships no encoder: the daemon only reads.

/// SplitMix64: small, seedable, and the same sequence on every platform, so a seed printed by
/// a failing run reproduces it.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What the generator draws, field by field as the specification orders them.
struct TCModel {
    struct Vendors {
        var maxVendorId: Int
        var useRanges: Bool
        /// For a BitField, the set ids; for ranges, the entries as written (unsorted, may overlap).
        var entries: [ClosedRange<Int>]
    }
    struct Restriction {
        var purposeId: Int
        var type: Int
        var entries: [ClosedRange<Int>]
    }
    struct PublisherTCModel {
        var purposesConsent: Set<Int>
        var purposesLI: Set<Int>
        var numCustom: Int
        var customConsent: Set<Int>
        var customLI: Set<Int>
    }

    var created: Int
    var lastUpdated: Int
    var cmpId: Int
    var cmpVersion: Int
    var consentScreen: Int
    var language: (Int, Int)
    var vendorListVersion: Int
    var policyVersion: Int
    var serviceSpecific: Bool
    var nonStandardTexts: Bool
    var specialFeatures: Set<Int>
    var purposesConsent: Set<Int>
    var purposesLI: Set<Int>
    var purposeOneTreatment: Bool
    var country: (Int, Int)
    var vendorConsents: Vendors
    var vendorLI: Vendors
    var restrictions: [Restriction]
    var disclosed: Vendors?
    var allowed: Vendors?
    var publisherTC: PublisherTCModel?
    /// Reserved segment types (4...7) written as well: decoders are to pass over them.
    var reservedSegmentTypes: [Int]
    /// Optional segments in the order written (any order is valid after the core).
    var segmentOrder: [Int]

    static func random(using rng: inout SeededGenerator) -> TCModel {
        func subset(_ range: ClosedRange<Int>, density: Double) -> Set<Int> {
            Set(range.filter { _ in Double.random(in: 0..<1, using: &rng) < density })
        }
        func vendors(allowEmpty: Bool) -> Vendors {
            let maxVendorId = allowEmpty && Bool.random(using: &rng) && Int.random(in: 0..<4, using: &rng) == 0
                ? 0 : Int.random(in: 1...(Bool.random(using: &rng) ? 60 : 1_500), using: &rng)
            guard maxVendorId > 0 else { return Vendors(maxVendorId: 0, useRanges: Bool.random(using: &rng), entries: []) }
            if Bool.random(using: &rng) {
                let ids = subset(1...maxVendorId, density: Double.random(in: 0...1, using: &rng))
                var withMax = ids
                withMax.insert(maxVendorId)
                return Vendors(maxVendorId: maxVendorId, useRanges: false, entries: withMax.sorted().map { $0...$0 })
            }
            var entries: [ClosedRange<Int>] = []
            for _ in 0..<Int.random(in: 0...12, using: &rng) {
                let start = Int.random(in: 1...maxVendorId, using: &rng)
                let end = Bool.random(using: &rng) ? start : Int.random(in: start...maxVendorId, using: &rng)
                entries.append(start...end)
            }
            return Vendors(maxVendorId: maxVendorId, useRanges: true, entries: entries)
        }
        func restriction() -> Restriction {
            var entries: [ClosedRange<Int>] = []
            for _ in 0..<Int.random(in: 0...6, using: &rng) {
                let start = Int.random(in: 1...2_000, using: &rng)
                let end = Bool.random(using: &rng) ? start : Int.random(in: start...min(start + 300, 65_535), using: &rng)
                entries.append(start...end)
            }
            return Restriction(purposeId: Int.random(in: 1...24, using: &rng), type: Int.random(in: 0...3, using: &rng), entries: entries)
        }
        let created = Int.random(in: 15_000_000_000...19_000_000_000, using: &rng)
        var model = TCModel(
            created: created,
            lastUpdated: created + Int.random(in: 0...1_000_000_000, using: &rng),
            cmpId: Int.random(in: 1...4_095, using: &rng),
            cmpVersion: Int.random(in: 0...4_095, using: &rng),
            consentScreen: Int.random(in: 0...63, using: &rng),
            language: (Int.random(in: 0...25, using: &rng), Int.random(in: 0...25, using: &rng)),
            vendorListVersion: Int.random(in: 1...4_095, using: &rng),
            policyVersion: Int.random(in: 2...5, using: &rng),
            serviceSpecific: Bool.random(using: &rng),
            nonStandardTexts: Bool.random(using: &rng),
            specialFeatures: subset(1...12, density: 0.3),
            purposesConsent: subset(1...24, density: 0.5),
            purposesLI: subset(1...24, density: 0.5),
            purposeOneTreatment: Bool.random(using: &rng),
            country: (Int.random(in: 0...25, using: &rng), Int.random(in: 0...25, using: &rng)),
            vendorConsents: vendors(allowEmpty: true),
            vendorLI: vendors(allowEmpty: true),
            restrictions: (0..<Int.random(in: 0...(Bool.random(using: &rng) ? 0 : 5), using: &rng)).map { _ in restriction() },
            disclosed: nil, allowed: nil, publisherTC: nil, reservedSegmentTypes: [], segmentOrder: []
        )
        if Bool.random(using: &rng) { model.disclosed = vendors(allowEmpty: false); model.segmentOrder.append(1) }
        if Bool.random(using: &rng) { model.allowed = vendors(allowEmpty: false); model.segmentOrder.append(2) }
        if Bool.random(using: &rng) {
            let numCustom = Int.random(in: 0...63, using: &rng)
            model.publisherTC = PublisherTCModel(
                purposesConsent: subset(1...24, density: 0.4), purposesLI: subset(1...24, density: 0.4), numCustom: numCustom,
                customConsent: numCustom == 0 ? [] : subset(1...numCustom, density: 0.5),
                customLI: numCustom == 0 ? [] : subset(1...numCustom, density: 0.5))
            model.segmentOrder.append(3)
        }
        if Int.random(in: 0..<10, using: &rng) == 0 {
            let type = Int.random(in: 4...7, using: &rng)
            model.reservedSegmentTypes.append(type)
            model.segmentOrder.append(type)
        }
        model.segmentOrder.shuffle(using: &rng)
        return model
    }

    /// The TC string: each segment's bits padded with zeros to whole bytes, then base64url
    /// without padding, as the specification (and CMPs) write it.
    func encoded() -> String {
        var core = BitWriter()
        core.write(2, 6)
        core.write(created, 36)
        core.write(lastUpdated, 36)
        core.write(cmpId, 12)
        core.write(cmpVersion, 12)
        core.write(consentScreen, 6)
        core.write(language.0, 6)
        core.write(language.1, 6)
        core.write(vendorListVersion, 12)
        core.write(policyVersion, 6)
        core.write(serviceSpecific ? 1 : 0, 1)
        core.write(nonStandardTexts ? 1 : 0, 1)
        core.flags(specialFeatures, 12)
        core.flags(purposesConsent, 24)
        core.flags(purposesLI, 24)
        core.write(purposeOneTreatment ? 1 : 0, 1)
        core.write(country.0, 6)
        core.write(country.1, 6)
        core.vendors(vendorConsents)
        core.vendors(vendorLI)
        core.write(restrictions.count, 12)
        for restriction in restrictions {
            core.write(restriction.purposeId, 6)
            core.write(restriction.type, 2)
            core.rangeEntries(restriction.entries)
        }
        var segments = [core.base64url()]
        for type in segmentOrder {
            var segment = BitWriter()
            segment.write(type, 3)
            switch type {
            case 1: segment.vendors(disclosed!)
            case 2: segment.vendors(allowed!)
            case 3:
                let tc = publisherTC!
                segment.flags(tc.purposesConsent, 24)
                segment.flags(tc.purposesLI, 24)
                segment.write(tc.numCustom, 6)
                segment.flags(tc.customConsent, tc.numCustom)
                segment.flags(tc.customLI, tc.numCustom)
            default:
                segment.write(0x5A5, 12)
            }
            segments.append(segment.base64url())
        }
        return segments.joined(separator: ".")
    }
}

struct BitWriter {
    private(set) var bits: [Bool] = []

    mutating func write(_ value: Int, _ width: Int) {
        for shift in stride(from: width - 1, through: 0, by: -1) { bits.append((value >> shift) & 1 == 1) }
    }

    mutating func flags(_ ids: Set<Int>, _ count: Int) {
        for id in stride(from: 1, through: count, by: 1) { bits.append(ids.contains(id)) }
    }

    mutating func vendors(_ vendors: TCModel.Vendors) {
        write(vendors.maxVendorId, 16)
        write(vendors.useRanges ? 1 : 0, 1)
        if vendors.useRanges {
            rangeEntries(vendors.entries)
        } else {
            flags(Set(vendors.entries.flatMap { Array($0) }), vendors.maxVendorId)
        }
    }

    mutating func rangeEntries(_ entries: [ClosedRange<Int>]) {
        write(entries.count, 12)
        for entry in entries {
            let isRange = entry.count > 1
            write(isRange ? 1 : 0, 1)
            write(entry.lowerBound, 16)
            if isRange { write(entry.upperBound, 16) }
        }
    }

    /// `value` (at least 1) Fibonacci-coded as GPP writes it: its Zeckendorf terms (1, 2, 3,
    /// 5, ...) lowest first, then a 1 closing the last.
    mutating func fibonacci(_ value: Int) {
        var terms = [1, 2]
        while terms[terms.count - 1] <= value { terms.append(terms[terms.count - 1] + terms[terms.count - 2]) }
        var used = Array(repeating: false, count: terms.count)
        var left = value
        for index in terms.indices.reversed() where terms[index] <= left {
            used[index] = true
            left -= terms[index]
        }
        bits += used[...used.lastIndex(of: true)!]
        bits.append(true)
    }

    /// A GPP header (type 3, version 1) listing `entries`, ascending, each one id or a range.
    static func gppHeader(_ entries: [ClosedRange<Int>]) -> String {
        var header = BitWriter()
        header.write(3, 6)
        header.write(1, 6)
        header.write(entries.count, 12)
        var previous = 0
        for entry in entries {
            header.write(entry.count > 1 ? 1 : 0, 1)
            header.fibonacci(entry.lowerBound - previous)
            if entry.count > 1 { header.fibonacci(entry.upperBound - entry.lowerBound) }
            previous = entry.upperBound
        }
        return header.base64url()
    }

    func base64url() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var padded = bits
        while padded.count % 8 != 0 { padded.append(false) }
        while padded.count % 6 != 0 { padded.append(false) }
        return String(stride(from: 0, to: padded.count, by: 6).map { start in
            alphabet[padded[start..<start + 6].reduce(0) { $0 << 1 | ($1 ? 1 : 0) }]
        })
    }
}
