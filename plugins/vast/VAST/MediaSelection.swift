/// What a slot wants of a video file. Files are chosen by these, never by document order.
public struct MediaPreferences: Sendable, Equatable {
    /// Playable MIME types, best first.
    public var types: [String]
    /// "progressive" or "streaming"; nil takes either, progressive first.
    public var delivery: String?
    /// The player's size in pixels; 0 when unknown.
    public var width: Int
    public var height: Int
    /// The bitrate to aim for, kbit/s.
    public var targetBitrate: Int

    public init(types: [String] = ["video/mp4", "video/webm"], delivery: String? = nil, width: Int = 0, height: Int = 0,
                targetBitrate: Int = 2000) {
        self.types = types
        self.delivery = delivery
        self.width = width
        self.height = height
        self.targetBitrate = targetBitrate
    }

    /// The best playable file, or nil if none is playable (VAST error 403). Playable: a wanted
    /// type and delivery, not an interactive (VPAID) file. Among those: the preferred type,
    /// then the size closest to the player's without exceeding it by much, then the bitrate
    /// closest to the target.
    public func choose(from files: [MediaFile]) -> MediaFile? {
        let playable = files.filter { file in
            types.contains(file.type.lowercased()) && (delivery.map { file.delivery == $0 } ?? true)
                && !(file.apiFramework.map { $0.uppercased() == "VPAID" } ?? false)
        }
        return playable.min { score($0) < score($1) }
    }

    private func score(_ file: MediaFile) -> (Int, Int, Int, Int) {
        let typeRank = types.firstIndex(of: file.type.lowercased()) ?? types.count
        let deliveryRank = delivery == nil && file.delivery != "progressive" ? 1 : 0
        // Larger than the player costs twice as much as smaller: it downloads bytes nobody sees.
        let sizeCost: Int
        if width > 0, height > 0, file.width > 0, file.height > 0 {
            let dw = file.width - width, dh = file.height - height
            sizeCost = (dw > 0 ? 2 * dw : -dw) + (dh > 0 ? 2 * dh : -dh)
        } else {
            sizeCost = 0
        }
        let bitrateCost = file.bitrate.map { abs($0 - targetBitrate) } ?? Int.max / 2
        return (typeRank, deliveryRank, sizeCost, bitrateCost)
    }
}
