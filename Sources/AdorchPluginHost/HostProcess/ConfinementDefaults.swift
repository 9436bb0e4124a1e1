extension Confinement {
    /// RLIMIT_AS for a plugin's host unless told otherwise: the daemon's hosts and the
    /// validator's confined child both take it from here. The validator's child peaked at
    /// 0.4 to 0.6 GB of address space with sim, example and swift-example, and 1.2 GB with
    /// vast (URLSession's threads), on 2 cores; the room above that is for glibc's 64 MB
    /// malloc arenas, one per busy thread, and 8 MB thread stacks on a host with many
    /// cores. A plugin that allocates without end fails its allocations there instead of
    /// taking the machine's memory.
    public static let defaultAddressSpaceMB: UInt64 = 4096

    /// The most tasks (threads) a boxed host may run, counted in its own user namespace: far
    /// above what sim, example, swift-example and vast start (under 40 on 2 cores: the plugin
    /// queue, Dispatch's workers, URLSession's), low enough that a plugin that starts threads
    /// without end stops in its own box long before its user's task limit, which the daemon
    /// and the other hosts share.
    public static let boxTasks: UInt32 = 256
}
