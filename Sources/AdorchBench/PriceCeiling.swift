import AdorchEngine
import Foundation

/// The price oracle, the ceiling revenue is measured against: every request the policies
/// are asked to serve is served, at once, by the best of one answer from every network and
/// bidder of the day (each filling at its fill rate, net of errors, and paying a price drawn
/// from its distribution). No preloading policy can do better on average: it must load
/// before the request, from the same sources, and lose what expires.
public enum PriceCeiling {
    /// Mixed into the seed: "CEIL", streams of its own so that no policy's draws move.
    static let salt: UInt64 = 0x4345_494C

    /// What 1,000 of the requests in `letIn` (per slot, their times) would earn.
    public static func revenuePerThousand(_ workload: Workload, letIn: [[Double]]) -> Double {
        let sources = workload.sources
        var random = SplitMix64(seed: workload.seed ^ salt)
        var (revenue, requests) = (0.0, 0)
        for times in letIn {
            for _ in times {
                requests += 1
                var best = 0.0
                for n in sources {
                    let filled = random.nextUnit() < (1 - n.errors) * n.fill
                    let price = n.ecpm * exp(n.priceSpread * random.normal())
                    if filled { best = max(best, price) }
                }
                revenue += best
            }
        }
        return requests == 0 ? 0 : revenue / Double(requests)
    }
}
