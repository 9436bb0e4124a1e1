import AdorchVarlink
import Foundation
import XCTest

/// Issue 8, acceptance 3: a plugin file someone else could have replaced is refused before
/// dlopen, with the path and the reason; --insecure-plugins loads it and says so.
final class PluginTrustTests: XCTestCase {
    private var root: URL!
    private let sim = productsDirectory.appendingPathComponent("libadorch-plugin-sim.so").path

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-trust-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: root)
    }

    /// A copy of the sim plugin in `folder` (created 0755), with the file's mode set.
    private func plant(_ folder: String, mode: Int = 0o755) throws -> String {
        let dir = root.appendingPathComponent(folder)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let path = dir.appendingPathComponent("libadorch-plugin-sim.so").path
        try FileManager.default.copyItem(atPath: sim, toPath: path)
        XCTAssertEqual(chmod(path, mode_t(mode)), 0)
        return path
    }

    private func config(_ plugins: [(String, String)], slotPlugin: String) -> String {
        plugins.map { "[plugins.\($0.0)]\npath = \"\($0.1)\"\n" }.joined(separator: "\n") + """

        [[slots]]
        id = "s"
        format = "interstitial"
        buffer = 1
          [[slots.waterfall]]
          plugin = "\(slotPlugin)"
          server_parameter = "latency_ms=0"
        """
    }

    func testPluginsOthersCouldReplaceAreRefusedWithTheReason() throws {
        let worldWritableFile = try plant("file-0666", mode: 0o666)
        let worldWritableFolder = try plant("folder-0777")
        XCTAssertEqual(chmod(root.appendingPathComponent("folder-0777").path, 0o777), 0)
        let groupWritableFolder = try plant("folder-0775")
        XCTAssertEqual(chmod(root.appendingPathComponent("folder-0775").path, 0o775), 0)
        let foreign = try plant("foreign")
        XCTAssertEqual(chown(foreign, 4321, 4321), 0, "the tests run as root so they can give a file away")
        let escapeDir = root.appendingPathComponent("escape")
        try FileManager.default.createDirectory(at: escapeDir, withIntermediateDirectories: true)
        let escape = escapeDir.appendingPathComponent("libadorch-plugin-sim.so").path
        try FileManager.default.createSymbolicLink(atPath: escape, withDestinationPath: sim)
        // A symlink that stays inside its folder is fine, as the link farms of packagers are.
        _ = try plant("good")
        let alias = root.appendingPathComponent("good/alias.so").path
        try FileManager.default.createSymbolicLink(atPath: alias, withDestinationPath: "libadorch-plugin-sim.so")

        let daemon = try DaemonProcess(config: config([
            ("wwfile", worldWritableFile), ("wwfolder", worldWritableFolder), ("gwfolder", groupWritableFolder),
            ("foreign", foreign), ("escape", escape), ("good", alias),
        ], slotPlugin: "good"))
        try daemon.waitFor("s full from the trusted plugin") { try daemon.allSlotsFull() }

        let plugins = try daemon.status()["plugins"]?.arrayValue ?? []
        func state(_ name: String) -> (String?, String?) {
            let p = plugins.first { $0["name"]?.stringValue == name }
            return (p?["state"]?.stringValue, p?["error"]?.stringValue)
        }
        let expected: [(String, String, String)] = [
            ("wwfile", worldWritableFile, "the file is writable by anyone (mode 666)"),
            ("wwfolder", worldWritableFolder, "the folder \(root.appendingPathComponent("folder-0777").path) is writable by anyone (mode 777)"),
            ("gwfolder", groupWritableFolder, "the folder \(root.appendingPathComponent("folder-0775").path) is writable by its group (gid 0) (mode 775)"),
            ("foreign", foreign, "the file is owned by uid 4321, not by uid 0"),
            ("escape", escape, "it leads to \(sim) through a symlink, outside the plugin folder \(escapeDir.path)"),
        ]
        for (name, path, reason) in expected {
            let (s, error) = state(name)
            XCTAssertEqual(s, "refused", name)
            XCTAssertEqual(error, "plugin \(path) refused: \(reason) (adorchd --insecure-plugins skips this check, for development only)", name)
            XCTAssertTrue(daemon.log.contains("plugin \(path) refused: \(reason)"), "\(name) is named in the log:\n\(daemon.log)")
        }
        XCTAssertEqual(state("good").0, "loaded")
        XCTAssertFalse(daemon.log.contains("--insecure-plugins: plugin files are loaded without checking"))
    }

    func testInsecurePluginsLoadsThemAndSaysSoLoudly() throws {
        let worldWritableFile = try plant("file-0666", mode: 0o666)
        let daemon = try DaemonProcess(config: config([("wwfile", worldWritableFile)], slotPlugin: "wwfile"),
                                       extraArguments: ["--insecure-plugins"])
        try daemon.waitFor("s full from the unchecked plugin") { try daemon.allSlotsFull() }
        XCTAssertTrue(daemon.log.contains("warning"), daemon.log)
        XCTAssertTrue(daemon.log.contains("--insecure-plugins: plugin files are loaded without checking who owns them or who may write them"), daemon.log)
        XCTAssertTrue(daemon.log.contains("plugin wwfile loaded"), daemon.log)
    }
}
