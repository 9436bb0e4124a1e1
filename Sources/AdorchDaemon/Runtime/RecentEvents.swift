/// [engine queue] The events ListEvents can still return: at most `capacity`, kept fairly per
/// slot (docs/rules.md, "Recent events per slot"). When full, the slot holding the most gives
/// up its oldest (of slots holding as many, the one whose oldest is oldest), so that a flood
/// in one slot pushes out only that slot's events: every slot keeps its latest, as many as
/// its share of `capacity` (`capacity` over the slots with events kept) or all it has. Events
/// of no slot count as one more slot. A single ring let one slot whose ads expired at once
/// push every other slot's events out in a fraction of a second.
struct RecentEvents {
    let capacity: Int
    private var bySlot: [String?: SlotEvents] = [:]
    private var count = 0
    /// Arrival order across slots, for `elements`.
    private var nextSequence: UInt64 = 0

    init(capacity: Int) { self.capacity = capacity }

    mutating func append(_ element: Recent) {
        bySlot[element.event.slot, default: SlotEvents()].append(element, sequence: nextSequence)
        nextSequence += 1
        count += 1
        guard count > capacity else { return }
        // At most `capacity` slots hold events: the look is bounded however many slots there are.
        let fullest = bySlot.max { a, b in
            (a.value.count, b.value.oldestSequence) < (b.value.count, a.value.oldestSequence)
        }!.key
        bySlot[fullest]!.removeOldest()
        if bySlot[fullest]!.count == 0 { bySlot[fullest] = nil }
        count -= 1
    }

    /// Every event kept, oldest first.
    var elements: [Recent] {
        bySlot.values.flatMap(\.kept).sorted { $0.sequence < $1.sequence }.map(\.recent)
    }
}

/// One slot's kept events, oldest first: a queue whose front is dropped without shifting
/// the rest each time.
private struct SlotEvents {
    private var items: [(sequence: UInt64, recent: Recent)] = []
    private var head = 0

    var count: Int { items.count - head }
    var oldestSequence: UInt64 { items[head].sequence }
    var kept: ArraySlice<(sequence: UInt64, recent: Recent)> { items[head...] }

    mutating func append(_ recent: Recent, sequence: UInt64) { items.append((sequence, recent)) }

    mutating func removeOldest() {
        head += 1
        // Shift once the dropped half outweighs the kept: amortized constant per event.
        if head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}
