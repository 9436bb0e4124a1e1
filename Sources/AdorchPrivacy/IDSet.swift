/// A set of purpose, feature or vendor ids, kept as sorted, disjoint, non-touching ranges.
///
/// Ranges rather than a bitmap or a Set: a range entry of a TC string names up to 65,535
/// vendors in 33 bits, so the memory a string can make the decoder use stays proportional to
/// the string, and a lookup is a binary search.
public struct IDSet: Equatable, Sendable, CustomStringConvertible {
    public let ranges: [ClosedRange<Int>]

    /// Ranges already sorted, disjoint and not touching (as a BitField's runs are).
    init(sortedDisjoint ranges: [ClosedRange<Int>]) {
        self.ranges = ranges
    }

    /// Ranges in any order, overlapping or touching (as a string's range entries may be).
    /// Public so that consent choices can be built without a string (the engine's tests).
    public init(merging ranges: [ClosedRange<Int>]) {
        var merged: [ClosedRange<Int>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, range.lowerBound <= last.upperBound + 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        self.ranges = merged
    }

    public var isEmpty: Bool { ranges.isEmpty }

    public func contains(_ id: Int) -> Bool {
        var low = 0, high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].upperBound < id { low = middle + 1 } else { high = middle }
        }
        return low < ranges.count && ranges[low].contains(id)
    }

    /// Every id, ascending.
    public var ids: [Int] { ranges.flatMap { Array($0) } }

    public var description: String {
        "[" + ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ", ") + "]"
    }
}
