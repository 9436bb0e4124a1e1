import AdorchEngine

/// The people behind a day's show requests: a few heavy users who reach a cap and many light
/// ones who never do. The k-th busiest asks 1/k as often as the busiest (Zipf's law, a common
/// model of how use spreads over an app's users), so with 40 users the busiest makes 23 % of
/// the requests and the lightest half 16 % together.
public enum Audience {
    public static let size = 40

    /// The user id a Show names for user `index`.
    public static func id(_ index: Int) -> String { "u\(index + 1)" }

    /// A user for every request, every slot from the same audience. The stream is the day's
    /// seed mixed with a constant of its own ("users"), apart from the request times' and the
    /// networks' streams, so a day's requests and outcomes are those of a trace without users.
    static func draw(for requests: [[Double]], seed: UInt64) -> [[Int]] {
        var random = SplitMix64(seed: seed ^ 0x7573_6572_7300_0000)
        var cumulative: [Double] = []
        for k in 1...size { cumulative.append((cumulative.last ?? 0) + 1 / Double(k)) }
        let total = cumulative[size - 1]
        return requests.map { times in
            times.map { _ in
                let u = random.nextUnit() * total
                // None when the product rounds up to the total itself: the last user.
                return cumulative.firstIndex { u < $0 } ?? size - 1
            }
        }
    }
}
