extension Confinement {
    /// RLIMIT_AS for a plugin's host unless told otherwise: the daemon's hosts and the
    /// validator's confined child both take it from here. The validator's child peaked at
    /// 0.4 to 0.6 GB of address space with sim, example and swift-example, and 1.2 GB with
    /// vast (URLSession's threads), on 2 cores; the room above that is for glibc's 64 MB
    /// malloc arenas, one per busy thread, and 8 MB thread stacks on a host with many
    /// cores. A plugin that allocates without end fails its allocations there instead of
    /// taking the machine's memory.
    public static let defaultAddressSpaceMB: UInt64 = 4096
}
