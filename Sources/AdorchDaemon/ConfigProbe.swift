import Foundation

/// Reads a config file first in a child process, so that a file which crashes the TOML
/// parser cannot take the daemon down with it.
///
/// TOMLKit's toml++ asserts (abort, even in release builds) on some malformed table headers,
/// such as `[[[slots]]` or `[ [a]]`, instead of returning an error (LebJe/TOMLKit#30; the
/// config fuzzer finds it at once). The child is this same adorchd with `--check-config`;
/// if it dies by a signal, the file is refused with a named error, and the running daemon
/// (on `systemctl reload`) keeps its config, as for any other bad file.
public enum ConfigProbe {
    /// Set in the child's environment: it parses for itself, without probing again.
    public static let childVariable = "ADORCH_CONFIG_PROBE"

    public static func check(_ path: String) throws(ConfigError) {
        guard ProcessInfo.processInfo.environment[childVariable] == nil,
              let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: executable)
        child.arguments = ["--check-config", "--config", path]
        child.environment = ProcessInfo.processInfo.environment.merging([childVariable: "1"]) { $1 }
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        do { try child.run() } catch { return }  // cannot probe: parse in-process as before
        child.waitUntilExit()
        guard child.terminationReason == .uncaughtSignal else { return }  // valid, or an error load() will name
        throw ConfigError(file: path, location: "file", message: """
            the TOML parser crashed on it (signal \(child.terminationStatus)), a known toml++ defect with \
            malformed table headers such as [[[slots]] or [ [a]]: check its [headers] (and its drop-ins')
            """)
    }
}
