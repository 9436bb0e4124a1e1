import Foundation

/// VAST documents written for the tests: an inline ad with everything a player uses,
/// wrappers, and a no-ad response. Tracking and error URLs start with `base` (a loopback
/// server's address in the integration tests, an .invalid host in the unit tests).
public struct Docs: Sendable {
    public var base: String

    public init(base: String = "http://t.invalid") { self.base = base }

    public func inline(id: String = "ad-1", media: String = Docs.defaultMedia, expires: Int? = nil, prefix: String = "in",
                       version: String = "4.2") -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <VAST version="\(version)" xmlns="http://www.iab.com/VAST">
          <Ad id="\(id)">
            <InLine>
              <AdSystem version="1">test-server</AdSystem>
              <AdTitle>Test ad \(id)</AdTitle>
              <Error><![CDATA[\(base)/\(prefix)/error?code=[ERRORCODE]]]></Error>
              <Impression><![CDATA[\(base)/\(prefix)/impression]]></Impression>
              \(expires.map { "<Expires>\($0)</Expires>" } ?? "")
              <Creatives>
                <Creative id="cr-1">
                  <UniversalAdId idRegistry="Ad-ID">UAI-1</UniversalAdId>
                  <Linear skipoffset="25%">
                    <Duration>00:00:20.000</Duration>
                    <TrackingEvents>
                      <Tracking event="start"><![CDATA[\(base)/\(prefix)/start]]></Tracking>
                      <Tracking event="firstQuartile">\(base)/\(prefix)/q1</Tracking>
                      <Tracking event="midpoint">\(base)/\(prefix)/mid</Tracking>
                      <Tracking event="thirdQuartile">\(base)/\(prefix)/q3</Tracking>
                      <Tracking event="complete">\(base)/\(prefix)/complete</Tracking>
                      <Tracking event="closeLinear">\(base)/\(prefix)/close</Tracking>
                      <Tracking event="notUsed">\(base)/\(prefix)/notused</Tracking>
                    </TrackingEvents>
                    <VideoClicks>
                      <ClickThrough><![CDATA[https://advertiser.invalid/landing]]></ClickThrough>
                      <ClickTracking>\(base)/\(prefix)/click</ClickTracking>
                    </VideoClicks>
                    <MediaFiles>\(media)</MediaFiles>
                  </Linear>
                </Creative>
                <Creative>
                  <CompanionAds>
                    <Companion width="300" height="250">
                      <StaticResource creativeType="image/png"><![CDATA[https://c.invalid/300x250.png]]></StaticResource>
                      <CompanionClickThrough>https://advertiser.invalid/companion</CompanionClickThrough>
                    </Companion>
                  </CompanionAds>
                </Creative>
              </Creatives>
            </InLine>
          </Ad>
        </VAST>
        """
    }

    /// In document order: a big WebM first, then three MP4s; a slot of 640x360 wanting MP4
    /// near 1000 kbit/s must get the 640x360 MP4, not the first file.
    public static let defaultMedia = """
    <MediaFile delivery="progressive" type="video/webm" width="1920" height="1080" bitrate="6000">http://m.invalid/1080.webm</MediaFile>
    <MediaFile delivery="progressive" type="video/mp4" width="1920" height="1080" bitrate="5000">http://m.invalid/1080.mp4</MediaFile>
    <MediaFile delivery="progressive" type="video/mp4" width="640" height="360" bitrate="900">http://m.invalid/360.mp4</MediaFile>
    <MediaFile delivery="streaming" type="application/x-mpegURL" width="1280" height="720" minBitrate="500" maxBitrate="3000">http://m.invalid/hls.m3u8</MediaFile>
    <MediaFile delivery="progressive" type="application/javascript" apiFramework="VPAID" width="640" height="360">http://m.invalid/vpaid.js</MediaFile>
    """

    public func wrapper(next: String, prefix: String, follow: Bool? = nil, fallback: Bool? = nil) -> String {
        let attributes = [follow.map { " followAdditionalWrappers=\"\($0)\"" }, fallback.map { " fallbackOnNoAd=\"\($0)\"" }].compactMap { $0 }.joined()
        return """
        <VAST version="4.0">
          <Ad id="w-\(prefix)">
            <Wrapper\(attributes)>
              <AdSystem>wrapper-\(prefix)</AdSystem>
              <VASTAdTagURI><![CDATA[\(next)]]></VASTAdTagURI>
              <Error>\(base)/\(prefix)/error?code=[ERRORCODE]&amp;t=[TIMESTAMP]</Error>
              <Impression>\(base)/\(prefix)/impression</Impression>
              <Creatives><Creative><Linear><TrackingEvents>
                <Tracking event="start">\(base)/\(prefix)/start</Tracking>
                <Tracking event="firstQuartile">\(base)/\(prefix)/q1</Tracking>
                <Tracking event="midpoint">\(base)/\(prefix)/mid</Tracking>
                <Tracking event="thirdQuartile">\(base)/\(prefix)/q3</Tracking>
                <Tracking event="complete">\(base)/\(prefix)/complete</Tracking>
              </TrackingEvents>
              <VideoClicks><ClickTracking>\(base)/\(prefix)/click</ClickTracking></VideoClicks>
              </Linear></Creative></Creatives>
            </Wrapper>
          </Ad>
        </VAST>
        """
    }

    public var empty: String { #"<VAST version="3.0"><Error>"# + base + "/root/error?code=[ERRORCODE]</Error></VAST>" }
}
