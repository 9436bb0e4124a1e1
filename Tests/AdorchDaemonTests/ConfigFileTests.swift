import AdorchEngine
import Foundation
import XCTest

@testable import AdorchDaemon

/// The files of a config, and the files it names, are read with what went wrong in words.
final class ConfigFileTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("adorch-configfile-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(at: dir)
    }

    private let minimal = """
    [[slots]]
    id = "s"
    format = "interstitial"
      [[slots.waterfall]]
      plugin = "sim"
    """

    private func path(_ name: String) -> String { dir.appendingPathComponent(name).path }

    private func loadError(_ file: String) -> String? {
        do {
            _ = try DaemonConfig.load(path: file)
            return nil
        } catch {
            return error.description
        }
    }

    func testUnreadableConfigsAreSaidInWordsWithThePath() throws {
        try FileManager.default.createDirectory(atPath: path("dir.toml"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: path("a.toml"), withDestinationPath: path("b.toml"))
        try FileManager.default.createSymbolicLink(atPath: path("b.toml"), withDestinationPath: path("a.toml"))
        try Data([0x5B, 0xFF, 0x5D]).write(to: dir.appendingPathComponent("binary.toml"))
        XCTAssertEqual(loadError(path("dir.toml")), "\(path("dir.toml")): file: cannot be read: is a directory")
        XCTAssertEqual(loadError(path("a.toml")), "\(path("a.toml")): file: cannot be read: too many levels of symbolic links")
        XCTAssertEqual(loadError(path("none.toml")), "\(path("none.toml")): file: cannot be read: no such file or directory")
        XCTAssertEqual(loadError(path("binary.toml")), "\(path("binary.toml")): file: cannot be read: is not UTF-8 text")
        XCTAssertEqual(loadError("/dev/null"), nil, "an empty file is an empty config")
        XCTAssertEqual(loadError("/dev/zero"), "/dev/zero: file: cannot be read: is more than 4 MiB, too large for a config or key file")
    }

    func testUnreadableDropInsAreSaidInWordsWithThePath() throws {
        let main = path("adorchd.toml")
        try minimal.write(toFile: main, atomically: true, encoding: .utf8)
        XCTAssertNil(loadError(main), "no drop-in folder: none")
        try FileManager.default.createDirectory(atPath: main + ".d/20-dir.toml", withIntermediateDirectories: true)
        try "[scheduler]\nbackoff_jitter = 0.5\n".write(toFile: main + ".d/10-ok.toml", atomically: true, encoding: .utf8)
        XCTAssertEqual(loadError(main), "\(main).d/20-dir.toml: file: cannot be read: is a directory")
        try FileManager.default.removeItem(atPath: main + ".d/20-dir.toml")
        try FileManager.default.createSymbolicLink(atPath: main + ".d/30-loop.toml", withDestinationPath: main + ".d/30-loop.toml")
        XCTAssertEqual(loadError(main), "\(main).d/30-loop.toml: file: cannot be read: too many levels of symbolic links")
        try FileManager.default.removeItem(atPath: main + ".d")
        try "not a folder".write(toFile: main + ".d", atomically: true, encoding: .utf8)
        XCTAssertEqual(loadError(main), "\(main).d: directory: cannot be read: not a directory")
    }

    func testCheckFilesReadsTheRewardKeyAsTheDaemonWould() throws {
        let key = path("reward.key")
        let config = try DaemonConfig.parse(toml: "[rewards]\nkey_file = \"\(key)\"\n" + minimal, source: "test.toml")
        func checkError() -> String? {
            do {
                try config.checkFiles(pluginDir: productsDirectory)
                return nil
            } catch {
                return error.description
            }
        }
        XCTAssertEqual(checkError(), "\(key): key rewards.key_file: cannot be read: no such file or directory")
        try "\n".write(toFile: key, atomically: true, encoding: .utf8)
        XCTAssertEqual(checkError(), "\(key): key rewards.key_file: the reward key file is empty")
        try "secret\n".write(toFile: key, atomically: true, encoding: .utf8)
        XCTAssertNil(checkError())
        XCTAssertEqual(try config.rewardKey(), "secret")
    }

    func testCheckFilesFindsEveryWaterfallPluginWhereTheDaemonWouldLoadIt() throws {
        func checkError(_ toml: String, pluginDir: String = productsDirectory) -> String? {
            do {
                try DaemonConfig.parse(toml: toml, source: "test.toml").checkFiles(pluginDir: pluginDir)
                return nil
            } catch {
                return error.description
            }
        }
        XCTAssertNil(checkError(minimal), "no [plugins]: sim is found in the plugin dir")
        XCTAssertNil(checkError("[plugins.sim]\n" + minimal))
        let ghost = minimal + "\n  [[slots.waterfall]]\n  plugin = \"ghost\"\n"
        XCTAssertEqual(checkError(ghost), "test.toml: key slots[0].waterfall[1].plugin: no plugin \"ghost\" is found in \(productsDirectory)"
                           + " (no libadorch-plugin-ghost.so or ghost.so there)")
        XCTAssertEqual(checkError("[plugins.sim]\n[plugins.ghost]\n" + ghost),
                       "test.toml: key slots[0].waterfall[1].plugin: plugin \"ghost\": libadorch-plugin-ghost.so not found in \(productsDirectory)")
        XCTAssertEqual(checkError("[plugins.sim]\npath = \"/nonexistent/sim.so\"\n" + minimal),
                       "test.toml: key slots[0].waterfall[0].plugin: plugin \"sim\": /nonexistent/sim.so does not exist")
        XCTAssertEqual(checkError(minimal, pluginDir: dir.path)?.contains("no plugin \"sim\" is found in \(dir.path)"), true)
    }

    /// The folder with the built plugins (the test bundle sits beside them).
    private var productsDirectory: String { Bundle.main.bundleURL.path }
}
