import AdorchEngine

/// A slot's buffer keys (docs/scheduler.md, "Buffer bounds"): `buffer = N` is a fixed buffer,
/// as configs always had; `buffer_min` / `buffer_max` make it demand-aware.
enum BufferBounds {
    /// The highest bound a config may set.
    static let ceiling: Int64 = 100
    /// A preloaded slot that says nothing keeps one ad ready, as before demand-aware buffers.
    static let defaultFixed = 1
}

extension TableReader {
    /// (buffer_min, buffer_max) of a slot of `format`; (0, 0) for the formats that are not preloaded.
    func buffer(format: AdFormat) throws(ConfigError) -> (Int, Int) {
        let fixed = try int("buffer", min: 0, max: BufferBounds.ceiling)
        let low = try int("buffer_min", min: 0, max: BufferBounds.ceiling)
        let high = try int("buffer_max", min: 1, max: BufferBounds.ceiling)
        guard format.isPreloaded else {
            if let key = fixed != nil ? "buffer" : low != nil ? "buffer_min" : high != nil ? "buffer_max" : nil {
                let how = format == .interactive ? "run as sessions (io.adorch.Ads.InitInteractive)" : "loaded on demand (io.adorch.Ads.Load)"
                throw error(key, "\(format.rawValue) ads are \(how), not preloaded: remove \(key)")
            }
            return (0, 0)
        }
        if let fixed {
            if low != nil || high != nil {
                throw error(low != nil ? "buffer_min" : "buffer_max",
                            "use either buffer = \(fixed) (a fixed buffer) or buffer_min / buffer_max (demand-aware), not both")
            }
            return (Int(fixed), Int(fixed))
        }
        guard low != nil || high != nil else { return (BufferBounds.defaultFixed, BufferBounds.defaultFixed) }
        // Without buffer_max: the default, or twice buffer_min if that is more, so a slot that
        // names only its floor stays demand-aware.
        let (min, max) = (Int(low ?? 0), Int(high ?? Int64(Swift.min(Int(BufferBounds.ceiling), Swift.max(SlotConfig.defaultBufferMax, 2 * Int(low ?? 0))))))
        guard min <= max else { throw error("buffer_min", "buffer_min (\(min)) is above buffer_max (\(max))") }
        return (min, max)
    }
}
