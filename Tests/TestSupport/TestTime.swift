import AdorchPluginHost
import Foundation

/// How many times longer the tests wait for what they expect: scripts/sanitize.sh raises it
/// (ADORCH_TEST_TIME_SCALE), since everything runs several times slower under a sanitizer.
/// Every test target's waits read it from here.
public let timeScale = Double(ProcessInfo.processInfo.environment["ADORCH_TEST_TIME_SCALE"] ?? "").flatMap { $0 >= 1 ? $0 : nil } ?? 1

extension Duration {
    /// This long, times `timeScale`: for how long to wait, never for a bound on the code tested.
    public var scaled: Duration { self * timeScale }
}

/// How much slower the daemon answers in this build: 1, or 20 under a sanitizer, whose build
/// runs every call several times slower. A latency bound a test holds the daemon to is
/// multiplied by it: it holds as written in every normal build, and under a sanitizer says only
/// that the calls were answered.
public let latencyScale: Double = Sanitizer.isActive ? 20 : 1
