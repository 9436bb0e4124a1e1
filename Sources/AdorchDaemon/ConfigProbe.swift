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
        guard let crash = crash(running: executable, ["--check-config", "--config", path]) else { return }
        throw ConfigError(file: path, location: "file", message: """
            the TOML parser crashed on it (\(crash)), a known toml++ defect with \
            malformed table headers such as [[[slots]] or [ [a]]: check its [headers] (and its drop-ins')
            """)
    }

    /// Runs the child with its output discarded and waits for it with waitpid: not through
    /// Foundation's Process, whose exit monitoring hung (the child left a zombie) when the
    /// daemon's engine queue waited on it under AddressSanitizer. `--check-config` exits 0
    /// (valid) or 78 (an error load() will name); anything else is a crash: a signal, or the
    /// status a sanitizer exits with after reporting one.
    private static func crash(running executable: String, _ arguments: [String]) -> String? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd in [STDOUT_FILENO, STDERR_FILENO] { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0) }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environment = ProcessInfo.processInfo.environment.merging([childVariable: "1"]) { $1 }.map { strdup("\($0)=\($1)") } + [nil]
        defer { environment.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, executable, &actions, nil, argv, environment) == 0 else { return nil }  // cannot probe: parse in-process
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return nil }
        }
        // WTERMSIG and WEXITSTATUS, which the Glibc overlay does not import (they are macros).
        let signal = status & 0x7f, exitStatus = (status >> 8) & 0xff
        if signal != 0 { return "signal \(signal)" }
        return [0, 78].contains(exitStatus) ? nil : "exit status \(exitStatus)"
    }
}
