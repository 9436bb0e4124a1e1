import Glibc

/// How often a slot is asked for an ad (docs/scheduler.md, "Demand").
///
/// The long rate comes from exponentially decaying windows of 10 minutes, 1 hour and 6
/// hours: the shortest that has seen enough Shows to be trusted, so a busy slot follows the
/// day's curve within minutes while a quiet one is judged on hours. Each is a Gamma–Poisson
/// estimate with a weak prior (a tenth of a Show per tenth of a window), so a slot never
/// asked is treated as asked now and then, never as certain to be asked or certain not to be,
/// and a slot that is asked is judged on its Shows. The short rate comes from
/// the last few Shows alone, so a burst shows within seconds and fades as soon as it stops.
public struct DemandEstimate: Sendable, Equatable {
    /// The long windows' time constants, shortest first.
    public static let windows: [Duration] = [.seconds(600), .seconds(3600), .seconds(6 * 3600)]
    /// Shows a window must have seen (decayed) before its rate is used.
    static let enoughShows = 8.0
    /// The prior: this many Shows over this share of a window.
    static let priorShows = 0.1
    /// The short rate is read off this many most recent Shows.
    public static let recentCount = 4

    /// Per window: Shows seen and seconds observed, both decayed with the window.
    var decayedShows: [Double] = Self.windows.map { _ in 0 }
    var decayedExposure: [Double] = Self.windows.map { _ in 0 }
    /// When the decayed sums were last brought up to date.
    var updatedAt: Moment?
    /// The most recent Shows, oldest first.
    var recent: [Moment] = []

    public init() {}

    /// The decayed sums of window `i` as they stand at `now`.
    private func decayed(_ i: Int, to now: Moment) -> (shows: Double, exposure: Double) {
        guard let updatedAt, now > updatedAt else { return (decayedShows[i], decayedExposure[i]) }
        let window = Self.windows[i].seconds
        let keep = exp(-(now - updatedAt).seconds / window)
        return (decayedShows[i] * keep, decayedExposure[i] * keep + window * (1 - keep))
    }

    mutating func noteShow(at now: Moment) {
        for i in Self.windows.indices {
            (decayedShows[i], decayedExposure[i]) = decayed(i, to: now)
            decayedShows[i] += 1
        }
        updatedAt = now
        recent.append(now)
        if recent.count > Self.recentCount { recent.removeFirst(recent.count - Self.recentCount) }
    }

    /// When the last Show came; nil before any.
    var lastShow: Moment? { recent.last }

    /// Shows per second over the shortest window with enough Shows (else the longest), with the prior.
    public func longRate(at now: Moment) -> Double {
        for i in Self.windows.indices {
            let (shows, exposure) = decayed(i, to: now)
            if shows >= Self.enoughShows || i == Self.windows.count - 1 {
                return (Self.priorShows + shows) / (Self.priorShows * Self.windows[i].seconds + exposure)
            }
        }
        return 0
    }

    /// Shows per second from the last few Shows: (k − 1) over the time from the oldest of
    /// them to now, so it falls as soon as the Shows stop. Zero until there are enough.
    public func shortRate(at now: Moment) -> Double {
        guard recent.count == Self.recentCount, let oldest = recent.first else { return 0 }
        let span = max((now - oldest).seconds, 1)
        return Double(Self.recentCount - 1) / span
    }

    /// What is kept across restarts: the decayed sums as they stand at `now` (the recent
    /// Shows' moments are on this process's clock and mean nothing to the next one).
    public func saved(at now: Moment) -> SavedDemand {
        let sums = Self.windows.indices.map { decayed($0, to: now) }
        return SavedDemand(shows: sums.map(\.shows), exposureSeconds: sums.map(\.exposure))
    }

    /// A saved estimate, decayed for the time the daemon was away. A saved file with another
    /// number of windows is taken for what it has.
    init(restoring saved: SavedDemand, away: Duration, at now: Moment) {
        for i in Self.windows.indices where i < saved.shows.count && i < saved.exposureSeconds.count {
            let window = Self.windows[i].seconds
            let keep = exp(-max(away.seconds, 0) / window)
            decayedShows[i] = max(saved.shows[i], 0) * keep
            decayedExposure[i] = min(max(saved.exposureSeconds[i], 0), window) * keep + window * (1 - keep)
        }
        updatedAt = now
    }
}

/// A slot's long-window demand as the state directory keeps it, per window.
public struct SavedDemand: Sendable, Equatable, Codable {
    public var shows: [Double]
    public var exposureSeconds: [Double]

    /// What a run could have written: as many values as windows, finite, not negative, no
    /// more Shows than a million a second over a window, no more exposure than the window.
    var isSane: Bool {
        shows.count == DemandEstimate.windows.count && exposureSeconds.count == DemandEstimate.windows.count
            && zip(DemandEstimate.windows, zip(shows, exposureSeconds)).allSatisfy { window, sums in
                let (shows, exposure) = sums
                return shows.isFinite && exposure.isFinite && shows >= 0 && exposure >= 0
                    && shows <= 1e6 * window.seconds && exposure <= window.seconds * (1 + 1e-9)
            }
    }
}
