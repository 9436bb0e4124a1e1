import AdorchEngine
import AdorchLocking
import Foundation
import VASTFixtures
import XCTest

@testable import VAST

final class VASTParsingTests: XCTestCase {
    func testAnInlineAdIsReadWhole() throws {
        let response = try VASTResponse.parse(Data(Docs().inline(expires: 60).utf8))
        XCTAssertEqual(response.version, "4.2")
        guard case .inline(let ad)? = response.ads.first?.kind else { return XCTFail("\(response)") }
        XCTAssertEqual(ad.adSystem, "test-server")
        XCTAssertEqual(ad.title, "Test ad ad-1")
        XCTAssertEqual(ad.duration, 20)
        XCTAssertEqual(ad.skipOffset, "25%")
        XCTAssertEqual(ad.skipOffsetSeconds, 5)
        XCTAssertEqual(ad.expires, 60)
        XCTAssertEqual(ad.mediaFiles.count, 5)
        XCTAssertEqual(ad.mediaFiles[3].bitrate, 1750, "min and max give the middle")
        XCTAssertEqual(ad.clickThrough, "https://advertiser.invalid/landing")
        XCTAssertEqual(ad.companions, [Companion(width: 300, height: 250, resourceType: "static", resource: "https://c.invalid/300x250.png",
                                                 creativeType: "image/png", clickThrough: "https://advertiser.invalid/companion")])
        XCTAssertEqual(ad.universalAdID, "UAI-1")
        let tracking = try XCTUnwrap(response.ads.first?.tracking)
        XCTAssertEqual(tracking.impressions, ["http://t.invalid/in/impression"])
        XCTAssertEqual(tracking.errors, ["http://t.invalid/in/error?code=[ERRORCODE]"])
        XCTAssertEqual(tracking.events["close"], ["http://t.invalid/in/close"], "closeLinear is the close event")
        XCTAssertEqual(tracking.clickTracking, ["http://t.invalid/in/click"])
    }

    func testWrappersAndTheirRules() throws {
        let response = try VASTResponse.parse(Data(Docs().wrapper(next: "http://x.invalid/next", prefix: "w1", follow: false, fallback: false).utf8))
        XCTAssertEqual(response.ads.first?.kind, .wrapper(Wrapper(tagURI: "http://x.invalid/next", followAdditionalWrappers: false, fallbackOnNoAd: false)))
        let defaults = try VASTResponse.parse(Data(Docs().wrapper(next: "http://x.invalid/next", prefix: "w1").utf8))
        XCTAssertEqual(defaults.ads.first?.kind, .wrapper(Wrapper(tagURI: "http://x.invalid/next", followAdditionalWrappers: true, fallbackOnNoAd: true)))
    }

    func testBrokenDocumentsGetTheirVASTCodes() {
        func code(_ text: String) -> Int? {
            do { _ = try VASTResponse.parse(Data(text.utf8)); return nil } catch { return error.code }
        }
        XCTAssertEqual(code("<VAST version=\"4.0\"><Ad>"), 100, "not well-formed")
        XCTAssertEqual(code("<html/>"), 100, "not VAST")
        XCTAssertEqual(code("<VAST version=\"9.0\"/>"), 102)
        XCTAssertEqual(code("<VAST version=\"4.0\"><Ad><Wrapper/></Ad></VAST>"), 101)
        XCTAssertEqual(code(Docs().inline(media: "").replacingOccurrences(of: "<Duration>00:00:20.000</Duration>", with: "<Duration>soon</Duration>")), 101)
        XCTAssertNil(code(Docs().empty))
    }

    func testTimes() {
        XCTAssertEqual(VASTResponse.parseTime("01:02:03.500"), 3723.5)
        XCTAssertNil(VASTResponse.parseTime("1:70:00"))
        XCTAssertNil(VASTResponse.parseTime("30"))
    }
}

final class MediaSelectionTests: XCTestCase {
    private let files: [MediaFile] = {
        guard case .inline(let ad)? = try? VASTResponse.parse(Data(Docs().inline().utf8)).ads.first?.kind else { return [] }
        return ad.mediaFiles
    }()

    func testFilesAreChosenByTheSlotsPreferencesNotByOrder() {
        XCTAssertEqual(MediaPreferences(types: ["video/mp4"], width: 640, height: 360, targetBitrate: 1000).choose(from: files)?.url, "http://m.invalid/360.mp4")
        XCTAssertEqual(MediaPreferences(types: ["video/mp4"], width: 1920, height: 1080, targetBitrate: 5000).choose(from: files)?.url, "http://m.invalid/1080.mp4")
        XCTAssertEqual(MediaPreferences(types: ["video/webm", "video/mp4"]).choose(from: files)?.url, "http://m.invalid/1080.webm", "the preferred type first")
        XCTAssertEqual(MediaPreferences(types: ["application/x-mpegurl"], delivery: "streaming").choose(from: files)?.url, "http://m.invalid/hls.m3u8")
    }

    func testNothingPlayableIsNil() {
        XCTAssertNil(MediaPreferences(types: ["video/ogg"]).choose(from: files))
        XCTAssertNil(MediaPreferences(types: ["application/javascript"]).choose(from: files), "VPAID is not a video file")
    }
}

final class MacroTests: XCTestCase {
    func testValuesArePercentEncodedOneByOne() {
        let macros = Macros(["APPBUNDLE": "com.example.app", "SLOTID": "a b&c=d"])
        let now = Date(timeIntervalSince1970: 1_800_000_000.25)
        let url = macros.expand("http://x.invalid/t?app=[APPBUNDLE]&slot=[SLOTID]&ts=[TIMESTAMP]&cb=[CACHEBUSTING]&keep=[UNKNOWN]", now: now)
        XCTAssertTrue(url.hasPrefix("http://x.invalid/t?app=com.example.app&slot=a%20b%26c%3Dd&ts=2027-01-15T08%3A00%3A00.250"), url)
        XCTAssertNotNil(url.range(of: #"&cb=\d{8}&keep=\[UNKNOWN\]$"#, options: .regularExpression), url)
        XCTAssertEqual(macros.expand("no macros"), "no macros")
        XCTAssertEqual(macros.expand("http://x.invalid/e?c=[ERRORCODE]&[", extra: ["ERRORCODE": "303"]), "http://x.invalid/e?c=303&[")
    }

    private let privacyTemplate = "http://x.invalid/t?gdpr=[GDPR]&consent=[GDPRCONSENT]&lat=[LIMITADTRACKING]&regs=[REGULATIONS]&gpp=[GPPSTRING]&sid=[GPPSECTIONID]"

    func testPrivacyMacrosCarryTheLoadsSignals() {
        var macros = Macros()
        macros.setPrivacy(PrivacyFacts(gdpr: true, tcString: "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA.YAAAAAAAAAA", limitAdTracking: true,
                                       childDirected: true, gpp: "DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA", gppSectionIDs: [2, 7]))
        // Lists go as comma-separated items, each encoded on its own; base64url and GPP's `~` need no escape.
        XCTAssertEqual(macros.expand(privacyTemplate), "http://x.invalid/t?gdpr=1&consent=CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA.YAAAAAAAAAA"
                       + "&lat=1&regs=coppa,gdpr&gpp=DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA&sid=2,7")
        macros.setPrivacy(PrivacyFacts(gdpr: false, tcString: "", limitAdTracking: false, childDirected: false, gpp: "", gppSectionIDs: []))
        XCTAssertEqual(macros.expand(privacyTemplate), "http://x.invalid/t?gdpr=0&consent=&lat=0&regs=&gpp=&sid=")
        macros.setPrivacy(PrivacyFacts(gdpr: nil, tcString: "a b", limitAdTracking: false, childDirected: false, gpp: "", gppSectionIDs: []))
        XCTAssertEqual(macros.expand(privacyTemplate), "http://x.invalid/t?gdpr=&consent=a%20b&lat=0&regs=&gpp=&sid=", "unknown GDPR is empty")
    }

    func testAHostGivingNoPrivacyEmptiesTheMacrosRatherThanLeavingThem() {
        var macros = Macros(["SLOTID": "s"])
        macros.setPrivacy(nil)
        XCTAssertEqual(macros.expand(privacyTemplate + "&slot=[SLOTID]"), "http://x.invalid/t?gdpr=&consent=&lat=&regs=&gpp=&sid=&slot=s")
    }
}

/// The chain resolver against an in-memory server: every fetch and ping is recorded.
final class ChainResolverTests: XCTestCase {
    private final class FakeServer: Sendable {
        let documents: [String: String]
        let slow: Set<String>
        private let log = LockedValue<(fetched: [String], pinged: [String])>(([], []))

        init(_ documents: [String: String], slow: Set<String> = []) {
            self.documents = documents
            self.slow = slow
        }

        var fetched: [String] { log.withLock { $0.fetched } }
        var pinged: [String] { log.withLock { $0.pinged } }

        func fetch(_ url: String, _ timeout: Duration, _ completion: @escaping @Sendable (Result<Data, FetchFailure>) -> Void) {
            log.withLock { $0.fetched.append(url) }
            if slow.contains(url) { return completion(.failure(.timeout)) }
            guard let document = documents[url] else { return completion(.failure(.failed("HTTP 404"))) }
            completion(.success(Data(document.utf8)))
        }

        func resolve(_ url: String, maxWrappers: Int = 5, preferences: MediaPreferences = MediaPreferences(types: ["video/mp4"], width: 640, height: 360, targetBitrate: 1000)) -> Result<ResolvedAd, ChainFailure>? {
            let resolver = ChainResolver(
                settings: .init(maxWrappers: maxWrappers, preferences: preferences), deadline: .now + .seconds(60),
                fetch: { self.fetch($0, $1, $2) }, ping: { url in self.log.withLock { $0.pinged.append(url) } }
            )
            let result = LockedValue<Result<ResolvedAd, ChainFailure>?>(nil)
            resolver.resolve(url) { r in result.withLock { $0 = r } }
            return result.withLock { $0 }
        }
    }

    /// hop1 -> hop2 -> ... -> hopN -> the inline ad.
    private func chain(_ hops: Int, last: String = Docs().inline()) -> [String: String] {
        var documents = ["http://s.invalid/inline": last]
        for hop in 1...max(1, hops) where hops > 0 {
            let next = hop == hops ? "http://s.invalid/inline" : "http://s.invalid/hop\(hop + 1)"
            documents["http://s.invalid/hop\(hop)"] = Docs().wrapper(next: next, prefix: "w\(hop)")
        }
        return documents
    }

    func testAThreeHopChainMergesTheTrackingOfEveryHop() throws {
        let server = FakeServer(chain(3))
        let ad = try XCTUnwrap(server.resolve("http://s.invalid/hop1")?.get())
        XCTAssertEqual(ad.wrappers, 3)
        XCTAssertEqual(ad.media.url, "http://m.invalid/360.mp4")
        XCTAssertEqual(ad.tracking.impressions, ["http://t.invalid/w1/impression", "http://t.invalid/w2/impression", "http://t.invalid/w3/impression", "http://t.invalid/in/impression"])
        XCTAssertEqual(ad.tracking.events["firstQuartile"]?.count, 4)
        XCTAssertEqual(ad.tracking.clickTracking.count, 4)
        XCTAssertTrue(server.pinged.isEmpty)
    }

    func testMoreWrappersThanTheDepthIs302ToEveryErrorURL() throws {
        let server = FakeServer(chain(6))
        let failure = try XCTUnwrap(server.resolve("http://s.invalid/hop1").flatMap { if case .failure(let f) = $0 { f } else { nil } })
        XCTAssertEqual(failure.kind, .noFill)
        XCTAssertEqual(failure.vastCode, 302)
        XCTAssertEqual(server.fetched.count, 6, "the sixth wrapper is read, its target is not")
        XCTAssertEqual(server.pinged.count, 6)
        for hop in 1...6 {
            XCTAssertEqual(server.pinged.filter { $0.hasPrefix("http://t.invalid/w\(hop)/error?code=302&t=") }.count, 1, "hop \(hop): \(server.pinged)")
        }
        XCTAssertEqual(try XCTUnwrap(FakeServer(chain(5)).resolve("http://s.invalid/hop1")?.get()).wrappers, 5, "five is allowed")
    }

    func testNoAdAtTheEndIs303AndAFallbackTriesTheNextAd() throws {
        var documents = chain(2, last: Docs().empty)
        let server = FakeServer(documents)
        let failure = try XCTUnwrap(server.resolve("http://s.invalid/hop1").flatMap { if case .failure(let f) = $0 { f } else { nil } })
        XCTAssertEqual(failure.vastCode, 303)
        XCTAssertEqual(Set(server.pinged), ["http://t.invalid/w1/error?code=303&t=" + (server.pinged.first { $0.contains("/w1/") }?.components(separatedBy: "&t=").last ?? ""),
                                            "http://t.invalid/w2/error?code=303&t=" + (server.pinged.first { $0.contains("/w2/") }?.components(separatedBy: "&t=").last ?? ""),
                                            "http://t.invalid/root/error?code=303"])
        // A buffet: the first ad's wrapper leads nowhere, the second ad is inline.
        documents["http://s.invalid/buffet"] = """
        <VAST version="4.0">\(Docs().wrapper(next: "http://s.invalid/nothing", prefix: "wb").components(separatedBy: "<VAST version=\"4.0\">")[1].components(separatedBy: "</VAST>")[0])
        \(Docs().inline(id: "second").components(separatedBy: "xmlns=\"http://www.iab.com/VAST\">")[1].components(separatedBy: "</VAST>")[0])</VAST>
        """
        documents["http://s.invalid/nothing"] = Docs().empty
        XCTAssertEqual(try XCTUnwrap(FakeServer(documents).resolve("http://s.invalid/buffet")?.get()).id, "second")
    }

    func testFollowAdditionalWrappersFalseStopsAtTheNextWrapper() throws {
        var documents = chain(2)
        documents["http://s.invalid/hop1"] = Docs().wrapper(next: "http://s.invalid/hop2", prefix: "w1", follow: false)
        let server = FakeServer(documents)
        let failure = try XCTUnwrap(server.resolve("http://s.invalid/hop1").flatMap { if case .failure(let f) = $0 { f } else { nil } })
        XCTAssertEqual(failure.vastCode, 302)
        XCTAssertFalse(server.fetched.contains("http://s.invalid/inline"))
        documents["http://s.invalid/hop1"] = Docs().wrapper(next: "http://s.invalid/inline", prefix: "w1", follow: false)
        XCTAssertEqual(try XCTUnwrap(FakeServer(documents).resolve("http://s.invalid/hop1")?.get()).wrappers, 1, "an inline ad next is fine")
    }

    func testATimeoutInAChainIs301AndNoPlayableFileIs403() throws {
        let slow = FakeServer(chain(2), slow: ["http://s.invalid/hop2"])
        let timeout = try XCTUnwrap(slow.resolve("http://s.invalid/hop1").flatMap { if case .failure(let f) = $0 { f } else { nil } })
        XCTAssertEqual(timeout.kind, .timeout)
        XCTAssertEqual(timeout.vastCode, 301)
        XCTAssertEqual(slow.pinged.count, 1)
        XCTAssertTrue(slow.pinged[0].hasPrefix("http://t.invalid/w1/error?code=301"))

        let first = FakeServer([:], slow: ["http://s.invalid/tag"])
        let firstTimeout = try XCTUnwrap(first.resolve("http://s.invalid/tag").flatMap { if case .failure(let f) = $0 { f } else { nil } })
        XCTAssertEqual(firstTimeout.kind, .timeout)
        XCTAssertNil(firstTimeout.vastCode, "no document, no error URL to tell")

        let picky = FakeServer(chain(1))
        let noMedia = try XCTUnwrap(picky.resolve("http://s.invalid/hop1", preferences: MediaPreferences(types: ["video/ogg"])).flatMap { if case .failure(let f) = $0 { f } else { nil } })
        XCTAssertEqual(noMedia.vastCode, 403)
        XCTAssertEqual(Set(picky.pinged.map { $0.components(separatedBy: "&t=")[0] }), ["http://t.invalid/w1/error?code=403", "http://t.invalid/in/error?code=403"])
    }

    func testMalformedXMLIs100AndMalformed() throws {
        let server = FakeServer(chain(1, last: "<VAST version=\"4.0\"><Ad><InLine>"))
        let failure = try XCTUnwrap(server.resolve("http://s.invalid/hop1").flatMap { if case .failure(let f) = $0 { f } else { nil } })
        XCTAssertEqual(failure.kind, .malformed)
        XCTAssertEqual(failure.vastCode, 100)
        XCTAssertTrue(server.pinged.first?.hasPrefix("http://t.invalid/w1/error?code=100") == true)
    }
}

/// <Expires> 60 through the payload to the engine, on a manual clock.
final class ExpiresTests: XCTestCase {
    func testExpires60MakesTheAdInvalid60SecondsAfterLoad() throws {
        let server = ["http://s.invalid/tag": Docs().inline(expires: 60)]
        let resolver = ChainResolver(settings: .init(preferences: MediaPreferences(types: ["video/mp4"])), deadline: .now + .seconds(5),
                                     fetch: { url, _, completion in completion(.success(Data(server[url]!.utf8))) }, ping: { _ in })
        let result = LockedValue<ResolvedAd?>(nil)
        resolver.resolve("http://s.invalid/tag") { r in result.withLock { $0 = try? r.get() } }
        let ad = try XCTUnwrap(result.withLock { $0 })
        let payload = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(ad.payloadJSON().utf8)) as? [String: Any])
        XCTAssertEqual(payload["expires_in_s"] as? Int, 60)
        XCTAssertEqual((payload["media"] as? [String: Any])?["url"] as? String, "http://m.invalid/360.mp4", "nearest the 2000 kbit/s default")

        // The host reads expires_in_s as the ad's lifetime; the engine keeps it valid until then.
        let slot = SlotConfig(id: "r", format: .rewarded, buffer: 1, ttl: .seconds(3600), waterfall: [WaterfallEntry(plugin: "vast")])
        var engine = Engine(slots: [slot], plugins: ["vast"], settings: .init(refreshAhead: .zero), seed: 1)
        var now = Moment(nanoseconds: 1_000_000_000)
        let loads = engine.advance(to: now).compactMap { if case .load(let o) = $0 { o } else { nil } }
        let id = try XCTUnwrap(loads.first?.adID)
        _ = engine.pluginReported(.loaded(payloadJSON: ad.payloadJSON(), expiresIn: .seconds((payload["expires_in_s"] as? Int) ?? 0), price: nil),
                                  for: id, from: "vast", now: now)
        now = now + .milliseconds(59_999)
        _ = engine.advance(to: now)
        XCTAssertEqual(engine.slotStatuses(at: now).first?.readyAds, [id], "valid just before 60 s")
        now = now + .milliseconds(1)
        let effects = engine.advance(to: now)
        XCTAssertFalse(engine.slotStatuses(at: now).first?.readyAds.contains(id) ?? true, "invalid at 60 s")
        XCTAssertTrue(effects.contains { if case .emit(let e) = $0 { e.kind == .adExpired && e.adID == id } else { false } })
    }
}
