/// A set of purpose, feature or vendor ids, kept the way the string wrote it, so that the
/// memory a string can make the decoder keep stays at most about its own size, whatever its
/// bits are.
///
/// A BitField (`Base64URLBitReader.bitField`) is kept as a bitmap: one bit per id, as in the
/// string, so a field of alternating bits costs what it costs in the string rather than one
/// range per id. Range entries are kept as ranges: an entry names up to 65,535 vendors in 33
/// bits, and takes 4 bytes here for the at least 17 bits it takes in the string. Every id a
/// consent string carries is at most 16 bits wide, so a range's bounds are kept as `UInt16`.
/// Equality is by ids, whichever way each side is kept.
public struct IDSet: Equatable, Sendable, CustomStringConvertible {
    private enum Storage: Sendable {
        /// Id `n` is bit `(n - 1) % 64` (least significant first) of word `(n - 1) / 64`; the
        /// bits after the field's last id are clear.
        case bitmap([UInt64])
        /// Sorted, disjoint, non-touching.
        case ranges([ClosedRange<UInt16>])
    }

    private let storage: Storage

    /// The bits of a BitField, as `Base64URLBitReader.bitField` reads them: id 1 first.
    init(bitmap words: [UInt64]) {
        storage = .bitmap(words)
    }

    /// Ranges in any order, overlapping or touching (as a string's range entries may be).
    /// Public so that consent choices can be built without a string (the engine's tests).
    /// Each bound must fit in 16 bits, as every id a consent string carries does.
    public init(merging ranges: [ClosedRange<Int>]) {
        var merged: [ClosedRange<UInt16>] = []
        // At most one range per entry: reserved once, not doubled as it grows past them.
        merged.reserveCapacity(ranges.count)
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            guard let lower = UInt16(exactly: range.lowerBound), let upper = UInt16(exactly: range.upperBound) else {
                preconditionFailure("IDSet: \(range) does not fit in 16 bits")
            }
            if let last = merged.last, Int(lower) <= Int(last.upperBound) + 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, upper)
            } else {
                merged.append(lower...upper)
            }
        }
        storage = .ranges(merged)
    }

    public var isEmpty: Bool {
        switch storage {
        case .bitmap(let words): words.allSatisfy { $0 == 0 }
        case .ranges(let ranges): ranges.isEmpty
        }
    }

    public func contains(_ id: Int) -> Bool {
        switch storage {
        case .bitmap(let words):
            guard id >= 1, (id - 1) / 64 < words.count else { return false }
            return words[(id - 1) / 64] >> ((id - 1) % 64) & 1 == 1
        case .ranges(let ranges):
            guard let id = UInt16(exactly: id) else { return false }
            var low = 0, high = ranges.count
            while low < high {
                let middle = (low + high) / 2
                if ranges[middle].upperBound < id { low = middle + 1 } else { high = middle }
            }
            return low < ranges.count && ranges[low].contains(id)
        }
    }

    /// The ids as sorted, disjoint, non-touching ranges (for tests and `description`).
    public var ranges: [ClosedRange<Int>] { Array(Runs(storage: storage)) }

    /// Every id, ascending.
    public var ids: [Int] { Runs(storage: storage).flatMap { Array($0) } }

    public var description: String {
        "[" + Runs(storage: storage).map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ", ") + "]"
    }

    /// Bytes the ids take (the buffer's capacity), to check they stay within the string's size.
    var storageBytes: Int {
        switch storage {
        case .bitmap(let words): words.capacity * MemoryLayout<UInt64>.stride
        case .ranges(let ranges): ranges.capacity * MemoryLayout<ClosedRange<UInt16>>.stride
        }
    }

    /// Same ids, compared run by run without building either side's ranges.
    public static func == (left: IDSet, right: IDSet) -> Bool {
        var leftRuns = Runs(storage: left.storage), rightRuns = Runs(storage: right.storage)
        while true {
            let leftRun = leftRuns.next(), rightRun = rightRuns.next()
            if leftRun != rightRun { return false }
            if leftRun == nil { return true }
        }
    }

    /// The maximal runs of consecutive ids, ascending.
    private struct Runs: Sequence, IteratorProtocol {
        let storage: Storage
        /// For a bitmap, the bit to look from; for ranges, the next range's index.
        var position = 0

        mutating func next() -> ClosedRange<Int>? {
            switch storage {
            case .bitmap(let words):
                let start = Self.firstBit(set: true, in: words, from: position)
                guard start < words.count * 64 else { return nil }
                let end = Self.firstBit(set: false, in: words, from: start)
                position = end
                return start + 1...end
            case .ranges(let ranges):
                guard position < ranges.count else { return nil }
                position += 1
                return Int(ranges[position - 1].lowerBound)...Int(ranges[position - 1].upperBound)
            }
        }

        /// The index of the first bit at or after `start` that is `set`, or the bitmap's bit
        /// count if none is.
        private static func firstBit(set: Bool, in words: [UInt64], from start: Int) -> Int {
            var index = start / 64
            guard index < words.count else { return words.count * 64 }
            var word = (set ? words[index] : ~words[index]) & (~0 << UInt64(start % 64))
            while word == 0 {
                index += 1
                guard index < words.count else { return words.count * 64 }
                word = set ? words[index] : ~words[index]
            }
            return index * 64 + word.trailingZeroBitCount
        }
    }
}
