import AdorchPluginHost
import AdorchVarlink
import Foundation
import XCTest

/// The outside tester's defect: sim's file under a second plugin name shared sim's globals,
/// and the second init took over sim's callbacks. The daemon refuses it at start and at a
/// reload (which then changes nothing), and the loader refuses a library a plugin still holds.
final class PluginFileOnceTests: XCTestCase {
    private let sim = productsDirectory.appendingPathComponent("libadorch-plugin-sim.so").path
    private let why = "a process loads a shared object once, so both names would share its globals and the later init would take over"
        + " the earlier one's callbacks"

    private func slot(_ id: String, _ plugin: String) -> String {
        """
        [[slots]]
        id = "\(id)"
        format = "interstitial"
        buffer = 2
          [[slots.waterfall]]
          plugin = "\(plugin)"
          server_parameter = "fill=1 latency_ms=0..5"

        """
    }

    /// sim under its own name and, with the same file, as simb.
    private var simTwice: String { "[plugins.sim]\n[plugins.simb]\npath = \"libadorch-plugin-sim.so\"\n" + slot("s", "sim") + slot("b", "simb") }

    /// As `stat -L -c 'device %d, inode %i'` says it.
    private func fileID(_ path: String) -> String {
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0, path)
        return "device \(info.st_dev), inode \(info.st_ino)"
    }

    func testADaemonConfiguredWithOneFileUnderTwoNamesDoesNotStart() throws {
        XCTAssertThrowsError(try DaemonProcess(config: simTwice)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("adorchd exited (78) before serving"), text)
            XCTAssertTrue(text.contains("cannot start: "), text)
            XCTAssertTrue(text.contains("adorchd.toml: key plugins.simb: [plugins.sim] (\(sim)) and [plugins.simb] (\(sim)) are one file"
                + " (\(fileID(sim))): \(why)"), text)
            XCTAssertFalse(text.contains("plugin sim loaded"), "refused before any plugin is loaded: \(text)")
        }
    }

    func testAReloadThatWouldLoadALoadedFileUnderAnotherNameChangesNothingAndSaysWhy() throws {
        let daemon = try DaemonProcess(config: simConfig(slots: slot("s", "sim")))
        try daemon.waitFor("s full") { try daemon.allSlotsFull() }
        let ready = try daemon.slotStatus("s")["ready_ads"]
        let config = daemon.dir.appendingPathComponent("adorchd.toml")
        func unchanged(_ what: String) throws {
            XCTAssertEqual(try daemon.slots().map { $0["id"]?.stringValue }, ["s"], what)
            XCTAssertEqual(try daemon.status()["plugins"]?.arrayValue?.map { $0["name"]?.stringValue }, ["sim"], what)
            XCTAssertEqual(try daemon.slotStatus("s")["waterfall"]?.arrayValue?.first?["plugin"]?.stringValue, "sim", what)
            XCTAssertEqual(try daemon.slotStatus("s")["ready_ads"], ready, "\(what): the very same ads")
        }

        // simb beside sim: the new config alone says it.
        try simTwice.write(to: config, atomically: true, encoding: .utf8)
        let (beside, besideParameters) = try daemon.callExpectingError("io.adorch.Manager.Reload")
        XCTAssertEqual(beside, "io.adorch.Manager.ReloadFailed")
        let besideMessage = besideParameters["message"]?.stringValue ?? ""
        XCTAssertTrue(besideMessage.hasSuffix("adorchd.toml: key plugins.simb: [plugins.sim] (\(sim)) and [plugins.simb] (\(sim)) are one file"
            + " (\(fileID(sim))): \(why); name it once, or give each name its own copy of the file"), besideMessage)
        try unchanged("simb beside sim")

        // simb in place of sim, a rename: simb's init would run before sim's deinit.
        try ("[plugins.simb]\npath = \"libadorch-plugin-sim.so\"\n" + slot("s", "simb")).write(to: config, atomically: true, encoding: .utf8)
        let (renamed, renamedParameters) = try daemon.callExpectingError("io.adorch.Manager.Reload")
        XCTAssertEqual(renamed, "io.adorch.Manager.ReloadFailed")
        let renamedMessage = renamedParameters["message"]?.stringValue ?? ""
        XCTAssertTrue(renamedMessage.hasSuffix("adorchd.toml: key plugins.simb: [plugins.simb] (\(sim)) is the file plugin sim has loaded"
            + " (\(fileID(sim))): \(why); to rename a plugin, remove it in one reload and add it in the next, or restart adorchd"), renamedMessage)
        try unchanged("simb in place of sim")
        XCTAssertEqual(daemon.log.components(separatedBy: "reload failed, keeping the running config: ").count - 1, 2, daemon.log)
        XCTAssertFalse(daemon.log.contains("plugin simb loaded"), daemon.log)

        // sim still has its callbacks: a Show is refilled, and nothing reported went astray.
        XCTAssertNotNil(try daemon.call("io.adorch.Ads.Show", ["slot": "s"])["ad"]?["id"]?.stringValue)
        try daemon.waitFor("s refilled") { try daemon.allSlotsFull() }
        XCTAssertEqual(try daemon.status()["unattributed_callbacks"]?.intValue, 0)
        XCTAssertEqual(try daemon.slotStatus("s")["counters"]?["timeouts"]?.intValue, 0)

        // The rename the message advises: sim out in one reload, simb in at the next.
        try ("[plugins.example]\n" + slot("e", "example")).write(to: config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try daemon.call("io.adorch.Manager.Reload")["summary"]?.stringValue?.hasPrefix("1 slots"), true)
        try ("[plugins.example]\n[plugins.simb]\npath = \"libadorch-plugin-sim.so\"\n" + slot("e", "example") + slot("s", "simb"))
            .write(to: config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try daemon.call("io.adorch.Manager.Reload")["summary"]?.stringValue?.hasPrefix("2 slots"), true)
        try daemon.waitFor("s full from simb") { try daemon.allSlotsFull() }
        XCTAssertEqual(try daemon.pluginStatus("simb")["state"]?.stringValue, "loaded")
        XCTAssertEqual(try daemon.status()["unattributed_callbacks"]?.intValue, 0)
    }

    /// What the config checks cannot see: dlopen also matches the path a library was opened
    /// from, after the file there was replaced. The loader refuses a library a PluginLibrary
    /// still holds, and hands it out again once that one is gone.
    func testTheLoaderRefusesALibraryAnotherPluginStillHolds() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-once-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("libadorch-plugin-sim.so").path, hardLink = dir.appendingPathComponent("hard.so").path
        let other = dir.appendingPathComponent("other.so").path, fresh = dir.appendingPathComponent("fresh.so").path
        for copy in [path, other, fresh] { try FileManager.default.copyItem(atPath: sim, toPath: copy) }
        XCTAssertEqual(link(path, hardLink), 0, String(cString: strerror(errno)))

        var holder: PluginLibrary? = try PluginLibrary(path: path)
        let handle = try XCTUnwrap(holder?.handle)
        XCTAssertEqual(rename(fresh, path), 0, "a new file at the held path, as a package upgrade leaves it")
        for second in [hardLink, path] {
            XCTAssertThrowsError(try PluginLibrary(path: second)) { error in
                XCTAssertEqual("\(error)", "plugin \(second) refused: it is the library a loaded plugin holds, opened from \(path): \(why)")
            }
        }
        XCTAssertNotEqual(try PluginLibrary(path: other).handle, handle, "a copy is a library of its own")
        holder = nil
        XCTAssertEqual(try PluginLibrary(path: hardLink).handle, handle, "let go, the library is there for the next plugin")
    }
}
