import AdorchEngine
import AdorchPluginHost
import Foundation

/// Many load, show, destroy cycles: memory and file descriptors must not grow.
extension Validator {
    func resources(_ format: AdFormat) {
        let check = "resources after \(options.iterations) cycles"
        guard options.iterations > 0 else { return add(check, .skip, "asked for no cycles (--iterations 0)") }
        setCheck(check)
        let request = self.request(format)
        let warmUp = max(100, options.iterations / 10)
        var start: (memory: Int, fds: Int)?
        // Each ad waits for its completion until its own deadline, counted from its load: a
        // plugin that never completes costs one deadline for all in flight, not one each.
        var inFlight: [(id: UInt64, object: UnsafeMutableRawPointer, due: Date)] = []
        var nulls = 0, stuck = 0
        func retire(_ ad: (id: UInt64, object: UnsafeMutableRawPointer, due: Date)) {
            guard let record = plugin.ledger.waitForCompletion(ad.id, until: ad.due) else { return }
            if !record.loadRefused, record.completions.isEmpty { stuck += 1 }
            if case .loaded? = record.completions.first { _ = plugin.show(ad.object) }
            plugin.destroy(ad.id, ad.object)
        }
        /// `count` cycles, the first `warmUp` of them before `start` is measured; what is in use after.
        func cycles(_ count: Int, warmUp: Int = 0) -> (memory: Int, fds: Int) {
            for cycle in 0..<count {
                if cycle == warmUp, start == nil {
                    inFlight.forEach(retire)
                    inFlight.removeAll()
                    Thread.sleep(forTimeInterval: seconds(options.grace))
                    start = Self.usage()
                }
                let ad = plugin.create(request, check: check)
                guard let object = ad.object else { nulls += 1; continue }
                _ = plugin.load(ad.id, object)
                inFlight.append((ad.id, object, Date() + seconds(request.timeout)))
                if inFlight.count >= 32 { retire(inFlight.removeFirst()) }
                if stuck > 10 { break }
            }
            inFlight.forEach(retire)
            inFlight.removeAll()
            Thread.sleep(forTimeInterval: seconds(options.grace))
            var end = Self.usage()
            // A network client may hold an idle keep-alive connection for a moment after its
            // last request: a leak is a descriptor that stays, so look again for up to 2 s.
            for _ in 0..<20 where end.fds > (start?.fds ?? .max) {
                Thread.sleep(forTimeInterval: 0.1)
                end = Self.usage()
            }
            return end
        }
        var end = cycles(warmUp + options.iterations, warmUp: warmUp)
        // Still more: a client's connection pool (vast's URLSession, under load) may keep one
        // more for as long as it likes, once; a leak grows again over as many cycles again.
        var once: Int?, settled = false
        if let first = start, end.fds > first.fds, stuck <= 10 {
            once = end.fds
            end = cycles(options.iterations)
            settled = end.fds <= once!
        }
        guard let start else {
            return add(check, .fail, "\(stuck) loads never completed within \(ms(request.timeout)): the cycles stopped in the warm-up")
        }
        var problems = violations(check, Rule.allCases)
        if stuck > 0 { problems.append("\(stuck) loads never completed") }
        if nulls > 0 { problems.append("ad_create returned NULL \(nulls) times") }
        if end.fds > start.fds, !settled {
            problems.append("open fds grew from \(start.fds) to \(once.map { "\($0), then to " } ?? "")\(end.fds)")
        }
        let memory = Self.memoryMeasure.name
        if end.memory - start.memory > options.memorySlack {
            problems.append(String(format: "%@ grew %.1f MB (from %.1f to %.1f MB), more than the %.0f MB allowed",
                                   memory, mb(end.memory - start.memory), mb(start.memory), mb(end.memory), mb(options.memorySlack)))
        }
        var numbers = String(format: "%@ load, show, destroy: %@ %.1f → %.1f MB, fds %d → %d (after %d to warm up)",
                             format.rawValue, memory, mb(start.memory), mb(end.memory), start.fds, end.fds, warmUp)
        if settled, let once {
            numbers += "; fds rose to \(once) once and grew no more through \(options.iterations) cycles more: a pool, not a leak"
        }
        add(check, problems.isEmpty ? .pass : .fail, problems.isEmpty ? numbers : summary(problems) + "; " + numbers)
    }

    static func usage() -> (memory: Int, fds: Int) {
        let fds = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count
        return (memoryMeasure.bytes(), fds)
    }

    /// RSS, unless the validator runs under AddressSanitizer or ThreadSanitizer: their
    /// quarantine and shadow memory grow RSS with no leak at all, so there it is the heap in
    /// use as their allocator counts it (bytes allocated and not yet freed).
    static let memoryMeasure: (name: String, bytes: @Sendable () -> Int) = {
        if let allocated = Sanitizer.allocatedBytes { return ("heap in use", { allocated() }) }
        return ("RSS", {
            let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
            let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        })
    }()
}

private func mb(_ bytes: Int) -> Double { Double(bytes) / 1_048_576 }
