import AdorchLocking
import Foundation

/// Why one HTTP fetch gave no document.
public enum FetchFailure: Error, Sendable, Equatable {
    case timeout
    case failed(String)
}

/// Fetches one URL within `timeout`; completes exactly once, on any thread.
public typealias Fetch = @Sendable (_ url: String, _ timeout: Duration, _ completion: @escaping @Sendable (Result<Data, FetchFailure>) -> Void) -> Void

/// An inline ad found at the end of a chain, with the tracking of every document in it.
public struct ResolvedAd: Sendable, Equatable {
    public var id: String
    public var inline: InlineAd
    public var media: MediaFile
    public var tracking: Tracking
    /// How many wrappers were followed to reach it.
    public var wrappers: Int
}

/// A chain that gave no ad: what the host hears. The VAST error pings were already sent.
public struct ChainFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case noFill, timeout, network, malformed
    }

    public var kind: Kind
    /// The VAST error code, when there is one (a first request that got no answer has none).
    public var vastCode: Int?
    public var message: String

    public var description: String { vastCode.map { "VAST \($0): \(message)" } ?? message }
}

/// Resolves a VAST tag: fetches it, follows wrappers up to `maxWrappers`, and picks the media
/// file. Every failure sends its VAST error code ([ERRORCODE]) to every <Error> URL of the
/// chain so far, once, through `ping`, before the completion hears of it.
public final class ChainResolver: Sendable {
    public struct Settings: Sendable {
        public var maxWrappers: Int
        public var preferences: MediaPreferences
        public var macros: Macros

        public init(maxWrappers: Int = 5, preferences: MediaPreferences = MediaPreferences(), macros: Macros = Macros()) {
            self.maxWrappers = maxWrappers
            self.preferences = preferences
            self.macros = macros
        }
    }

    private let settings: Settings
    private let fetch: Fetch
    private let ping: @Sendable (String) -> Void
    private let deadline: ContinuousClock.Instant
    private let cancelled = LockedValue(false)

    /// `deadline` bounds the whole chain: each hop gets what is left of it.
    public init(settings: Settings, deadline: ContinuousClock.Instant, fetch: @escaping Fetch, ping: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.deadline = deadline
        self.fetch = fetch
        self.ping = ping
    }

    /// Nothing more is fetched, pinged or completed after this.
    public func cancel() { cancelled.withLock { $0 = true } }

    private var isCancelled: Bool { cancelled.withLock { $0 } }

    public func resolve(_ tagURL: String, completion: @escaping @Sendable (Result<ResolvedAd, ChainFailure>) -> Void) {
        resolve(tagURL, wrappers: 0, inherited: Tracking(), allowWrapper: true) { [self] result in
            if !isCancelled { completion(result) }
        }
    }

    private func resolve(_ url: String, wrappers: Int, inherited: Tracking, allowWrapper: Bool,
                         completion: @escaping @Sendable (Result<ResolvedAd, ChainFailure>) -> Void) {
        let left = deadline - ContinuousClock.now
        guard left > .zero else {
            return completion(.failure(fail(.timeout, wrappers > 0 ? 301 : nil, "the timeout passed before \(url) was asked", inherited.errors)))
        }
        guard !isCancelled else { return }
        fetch(settings.macros.expand(url), left) { [self] result in
            switch result {
            case .failure(.timeout):
                completion(.failure(fail(.timeout, wrappers > 0 ? 301 : nil, "no answer from \(url) in time", inherited.errors)))
            case .failure(.failed(let why)):
                completion(.failure(fail(.network, wrappers > 0 ? 301 : nil, "\(url): \(why)", inherited.errors)))
            case .success(let data) where data.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }):
                // An empty answer (HTTP 204 or no body) is how many servers say "no ad".
                completion(.failure(fail(.noFill, 303, "\(url): empty answer, no ad", inherited.errors)))
            case .success(let data):
                resolve(document: data, from: url, wrappers: wrappers, inherited: inherited, allowWrapper: allowWrapper, completion: completion)
            }
        }
    }

    /// A VAST document already in hand (an OpenRTB bid's `adm`), its wrappers followed as a tag's.
    public func resolve(document: Data, completion: @escaping @Sendable (Result<ResolvedAd, ChainFailure>) -> Void) {
        resolve(document: document, from: "the markup", wrappers: 0, inherited: Tracking(), allowWrapper: true) { [self] result in
            if !isCancelled { completion(result) }
        }
    }

    private func resolve(document data: Data, from source: String, wrappers: Int, inherited: Tracking, allowWrapper: Bool,
                         completion: @escaping @Sendable (Result<ResolvedAd, ChainFailure>) -> Void) {
        let response: VASTResponse
        do throws(VASTError) { response = try VASTResponse.parse(data) } catch {
            return completion(.failure(fail(.malformed, error.code, "\(source): \(error.message)", inherited.errors)))
        }
        guard !response.ads.isEmpty else {
            return completion(.failure(fail(.noFill, 303, "\(source): no ad", inherited.errors + response.errorURLs)))
        }
        tryAd(response.ads, 0, wrappers: wrappers, inherited: inherited, allowWrapper: allowWrapper, completion: completion)
    }

    /// Tries the response's ads in order: the next one only if the previous gave no ad and
    /// may fall back (a wrapper's fallbackOnNoAd; always for an unusable inline ad).
    private func tryAd(_ ads: [VASTAd], _ index: Int, wrappers: Int, inherited: Tracking, allowWrapper: Bool,
                       completion: @escaping @Sendable (Result<ResolvedAd, ChainFailure>) -> Void) {
        let ad = ads[index]
        var tracking = inherited
        tracking.merge(ad.tracking)
        let next: @Sendable (ChainFailure, Bool) -> Void = { [self] failure, mayFallBack in
            if mayFallBack, failure.kind == .noFill, index + 1 < ads.count {
                tryAd(ads, index + 1, wrappers: wrappers, inherited: inherited, allowWrapper: allowWrapper, completion: completion)
            } else {
                completion(.failure(failure))
            }
        }
        switch ad.kind {
        case .wrapper(let wrapper):
            guard allowWrapper else {
                return next(fail(.noFill, 302, "a wrapper after followAdditionalWrappers=\"false\"", tracking.errors), true)
            }
            guard wrappers < settings.maxWrappers else {
                return next(fail(.noFill, 302, "wrapper limit reached: more than \(settings.maxWrappers) wrappers", tracking.errors), true)
            }
            resolve(wrapper.tagURI, wrappers: wrappers + 1, inherited: tracking, allowWrapper: wrapper.followAdditionalWrappers) { result in
                switch result {
                case .success: completion(result)
                case .failure(let failure): next(failure, wrapper.fallbackOnNoAd)
                }
            }
        case .inline(let inline):
            guard inline.duration != nil else {
                return next(fail(.noFill, 201, "ad \(ad.id) has no linear creative", tracking.errors), true)
            }
            guard let media = settings.preferences.choose(from: inline.mediaFiles) else {
                let offered = Set(inline.mediaFiles.map(\.type)).sorted().joined(separator: ", ")
                return next(fail(.noFill, 403, "ad \(ad.id): no playable media file (offered: \(offered.isEmpty ? "none" : offered))", tracking.errors), true)
            }
            completion(.success(ResolvedAd(id: ad.id, inline: inline, media: media, tracking: tracking, wrappers: wrappers)))
        }
    }

    /// The failure, after its error code went to every error URL of the chain so far.
    private func fail(_ kind: ChainFailure.Kind, _ code: Int?, _ message: String, _ errorURLs: [String]) -> ChainFailure {
        if let code, !isCancelled {
            for url in errorURLs { ping(settings.macros.expand(url, extra: ["ERRORCODE": String(code)])) }
        }
        return ChainFailure(kind: kind, vastCode: code, message: message)
    }
}
