/// The `timeoutInterval` to give a URLRequest whose real limit is `limit`, enforced by the
/// caller's own timer: whole seconds, and one more. Foundation on Linux keeps only the whole
/// seconds of a timeoutInterval, so a limit under 1 s became no time at all and an answer
/// that came in 3 ms was reported as a timeout.
public func requestTimeoutInterval(for limit: Duration) -> Double {
    (Double(limit / .milliseconds(1)) / 1000).rounded(.up) + 1
}
