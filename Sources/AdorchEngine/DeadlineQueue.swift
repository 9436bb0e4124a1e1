/// Moments keyed by what they are for, earliest first: a binary min-heap with an index, so
/// a key's moment can be moved or dropped in O(log n) when the thing it times changes.
/// The engine's timers live here so that time passing costs what is due, not what exists.
struct DeadlineQueue<Key: Hashable & Comparable & Sendable>: Sendable {
    private var heap: [(at: Moment, key: Key)] = []
    private var position: [Key: Int] = [:]

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    var first: (at: Moment, key: Key)? { heap.first }

    func moment(of key: Key) -> Moment? { position[key].map { heap[$0].at } }

    /// Sets (or moves) the key's moment.
    mutating func set(_ key: Key, at moment: Moment) {
        if let index = position[key] {
            let old = heap[index].at
            heap[index].at = moment
            if moment < old { siftUp(index) } else { siftDown(index) }
        } else {
            heap.append((moment, key))
            position[key] = heap.count - 1
            siftUp(heap.count - 1)
        }
    }

    mutating func remove(_ key: Key) {
        guard let index = position.removeValue(forKey: key) else { return }
        let last = heap.removeLast()
        guard index < heap.count else { return }
        heap[index] = last
        position[last.key] = index
        siftDown(index)
        siftUp(index)
    }

    /// Removes and returns every key whose moment is at or before `now`, earliest first.
    mutating func popDue(at now: Moment) -> [Key] {
        var due: [Key] = []
        while let top = heap.first, top.at <= now {
            due.append(top.key)
            remove(top.key)
        }
        return due
    }

    /// Ties break on the key, so the order of due timers never depends on insertion order.
    private func less(_ i: Int, _ j: Int) -> Bool {
        (heap[i].at, heap[i].key) < (heap[j].at, heap[j].key)
    }

    private mutating func swapAt(_ i: Int, _ j: Int) {
        heap.swapAt(i, j)
        position[heap[i].key] = i
        position[heap[j].key] = j
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard less(child, parent) else { return }
            swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, less(left, smallest) { smallest = left }
            if right < heap.count, less(right, smallest) { smallest = right }
            if smallest == parent { return }
            swapAt(parent, smallest)
            parent = smallest
        }
    }
}
