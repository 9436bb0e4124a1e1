import AdorchDaemon
import AdorchPaths
import AdorchSystemd
import ArgumentParser
import CGlibcMalloc
import Dispatch
import Foundation
import Logging

// First of all: a reader that goes away (`adorchd 2>&1 | head`, a journal stream that
// closed) must cost a log line, never the daemon. Writes then fail with EPIPE, which the
// log handlers drop.
signal(SIGPIPE, SIG_IGN)

/// SIGTERM, SIGINT and SIGHUP: blocked in every thread and taken by sigwait in run().
func handledSignals() -> sigset_t {
    var set = sigset_t()
    sigemptyset(&set)
    for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, signal) }
    return set
}

// Blocked before any thread starts (plugins' own pthreads included), so every thread
// inherits the mask and the signals stay pending for sigwait.
var blockedSignals = handledSignals()
pthread_sigmask(SIG_BLOCK, &blockedSignals, nil)

// glibc gives a thread that finds its arena locked an arena of its own, up to eight per
// core. Dispatch's workers then scatter freed memory over a dozen arenas that keep it: over
// 400,000 Show cycles RSS grew 5 % and settled only later, with 14 arenas holding 15.9 MB
// free of 27.5 MB. One arena per core (no more threads run at once) kept it flat and 8 MB
// lower. An operator's MALLOC_ARENA_MAX still wins.
if getenv("MALLOC_ARENA_MAX") == nil {
    mallopt(M_ARENA_MAX, Int32(max(2, ProcessInfo.processInfo.activeProcessorCount)))
}
// A fixed mmap threshold turns off glibc's sliding one, which after the first large buffer
// is freed serves later ones (a client's megabyte message, a slow reader's unread replies)
// from the heap, where they fragment and stay resident after the clients are gone: 300
// never-reading subscribers left RSS 20 % up. Mapped, each goes back to the system on free.
if getenv("MALLOC_MMAP_THRESHOLD_") == nil {
    mallopt(M_MMAP_THRESHOLD, 128 << 10)
}

// Every connection is a descriptor, and systemd's soft limit (1024) is below the default
// max_connections (4096). A process that uses no select() raises its soft limit to the hard
// one itself, as systemd.exec(5) advises.
var fileLimit = rlimit()
if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &fileLimit) == 0, fileLimit.rlim_cur < fileLimit.rlim_max {
    fileLimit.rlim_cur = fileLimit.rlim_max
    setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &fileLimit)
}

AdorchD.main()

struct AdorchD: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adorchd",
        abstract: "Keeps ad inventory ready for the apps on this host and serves it over Varlink.",
        discussion: """
        With no --config, adorchd runs on its embedded default: the sim plugin (found next to \
        the adorchd binary in a build) and the demo slots rewarded_main, fullscreen_main and \
        interstitial_main. The config format is documented in etc/adorch/adorchd.toml.

        Signals: SIGTERM or SIGINT end every ad and stop; SIGHUP reloads the config.
        """,
        version: AdorchVersion.current
    )

    @Option(help: ArgumentHelp("The config file (TOML); drop-ins in FILE.d/*.toml are merged over it.", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("The Varlink socket to serve on (overrides the config).", valueName: "path"))
    var socket: String?

    @Option(help: ArgumentHelp("Where state that survives restarts is kept (overrides the config).", valueName: "dir"))
    var stateDir: String?

    @Option(help: ArgumentHelp("Where plugins are found (overrides the config).", valueName: "dir"))
    var pluginDir: String?

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (overrides the config).", valueName: "level"))
    var logLevel: String?

    @Option(help: ArgumentHelp("""
        auto, journal or console. auto writes native journal entries when stderr is the journal \
        stream (started by systemd) or journald is there and stderr is not a terminal; \
        otherwise readable lines on stderr.
        """, valueName: "target"))
    var logTarget: LogTarget = .auto

    @Flag(help: "Check the config, print a summary and exit (0 if it is valid, 78 if not).")
    var checkConfig = false

    @Flag(help: .hidden)
    var debugInterface = false

    @Flag(help: """
        Load plugins even when they, or a folder above them, are owned by another user or \
        writable by others. For builds in a home folder; logged as a warning at every load.
        """)
    var insecurePlugins = false

    enum LogTarget: String, ExpressibleByArgument, CaseIterable {
        case auto, journal, console

        /// auto: the journal when systemd connected stderr to it, or when journald is there
        /// and nobody is watching a terminal; a person at a terminal gets readable lines.
        var usesJournal: Bool {
            switch self {
            case .journal: true
            case .console: false
            case .auto: JournalLogHandler.stderrIsJournalStream || (JournalLogHandler.journalIsAvailable && isatty(2) == 0)
            }
        }
    }

    func validate() throws {
        if let logLevel, !DaemonConfig.validLogLevels.contains(logLevel) {
            throw ValidationError("--log-level must be one of \(DaemonConfig.validLogLevels.joined(separator: ", ")), not \(logLevel)")
        }
    }

    func run() throws {
        let settings: DaemonConfig
        do throws(ConfigError) {
            settings = try config.map { path throws(ConfigError) in try DaemonConfig.load(path: path) } ?? .embeddedDefault()
            if checkConfig { try settings.checkFiles(pluginDir: pluginDir) }
        } catch {
            // write(contentsOf:) throws where write(_:) would trap: a closed stderr changes nothing here.
            try? FileHandle.standardError.write(contentsOf: Data("adorchd: bad config, not starting: \(error)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }
        if checkConfig {
            print("\(settings.source): valid, \(settings.slots.count) slots, \(settings.plugins.count) plugins")
            return
        }

        let level = Logger.Level(rawValue: logLevel ?? settings.logLevel ?? "info") ?? .info
        if logTarget.usesJournal {
            LoggingSystem.bootstrap { _ in JournalLogHandler(identifier: "adorchd", level: level) }
        } else {
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
        let logger = Logger(label: "adorchd")
        let daemon = Daemon(
            config: settings,
            options: DaemonOptions(configPath: config, socketPath: socket, stateDir: stateDir, pluginDir: pluginDir,
                                   debugInterface: debugInterface, insecurePlugins: insecurePlugins),
            logger: logger
        )
        do {
            try daemon.start()
        } catch let error as StateDirectoryError {
            logger.critical("cannot start: \(error)")
            throw ExitCode(78)  // EX_CONFIG
        } catch let error as ConfigError {
            logger.critical("cannot start: \(error)")
            throw ExitCode(78)  // EX_CONFIG
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        print("adorchd: serving on \(daemon.socketPath)")
        fflush(nil)

        // The main thread waits for the signals blocked above; the daemon itself runs on its
        // Dispatch queues. (Dispatch's signal sources lost a SIGTERM that the kernel queued on
        // one of its worker threads: sigwait takes it wherever it is pending for the process.)
        var handled = handledSignals()
        while true {
            var number: Int32 = 0
            guard sigwait(&handled, &number) == 0 else { continue }
            if number == SIGHUP {
                logger.notice("SIGHUP: reloading \(config ?? "the embedded default config")")
                daemon.reload()
            } else {
                logger.notice("\(number == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
                daemon.stop()
                Foundation.exit(0)
            }
        }
    }
}
