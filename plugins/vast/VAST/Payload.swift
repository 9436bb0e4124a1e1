import Foundation

extension ResolvedAd {
    /// What the app needs to play the ad, as the JSON object handed to the host: the chosen
    /// file, duration, skip offset, click-through, companions and ids. `expires_in_s` (VAST
    /// 4.3's <Expires>) is the ad's lifetime as the host reads it.
    public func payload() -> [String: Any] {
        var media: [String: Any] = ["url": media.url, "type": media.type, "delivery": media.delivery,
                                    "width": media.width, "height": media.height]
        if let bitrate = self.media.bitrate { media["bitrate"] = bitrate }
        if let codec = self.media.codec { media["codec"] = codec }
        var object: [String: Any] = [
            "network": "vast", "ad_id": id, "ad_system": inline.adSystem, "title": inline.title, "media": media,
            "duration_s": inline.duration ?? 0, "wrappers": wrappers,
            "companions": inline.companions.map { c in
                var companion: [String: Any] = ["width": c.width, "height": c.height, "resource_type": c.resourceType, "resource": c.resource]
                if let type = c.creativeType { companion["creative_type"] = type }
                if let click = c.clickThrough { companion["click_through"] = click }
                return companion
            },
            // The plugin fires the tracking URLs itself when the host forwards the app's events.
            "tracks_impressions": false,
        ]
        if let creative = inline.creativeID { object["creative_id"] = creative }
        if let universal = inline.universalAdID { object["universal_ad_id"] = universal }
        if let click = inline.clickThrough { object["click_through"] = click }
        if let offset = inline.skipOffset {
            object["skip_offset"] = offset
            if let seconds = inline.skipOffsetSeconds { object["skip_offset_s"] = seconds }
        }
        if let expires = inline.expires { object["expires_in_s"] = expires }
        return object
    }

    public func payloadJSON() -> String {
        let data = (try? JSONSerialization.data(withJSONObject: payload(), options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
