import Glibc

/// Whether this process runs under AddressSanitizer or ThreadSanitizer (`make asan`, `make
/// tsan`), as their runtime says: it exports its count of the heap in use. Their shadow memory
/// takes terabytes of address space, so under one no address-space limit (RLIMIT_AS) may be
/// set on a process of this build: a plugin's host or the validator's confined child would
/// die before its plugin's init.
public enum Sanitizer {
    /// The runtime's count of the heap in use, if there is one.
    public static let allocatedBytes: (@convention(c) () -> Int)? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__sanitizer_get_current_allocated_bytes")
        .map { unsafeBitCast($0, to: (@convention(c) () -> Int).self) }

    public static var isActive: Bool { allocatedBytes != nil }
}
