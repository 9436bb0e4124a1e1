// swift-tools-version:6.0
import PackageDescription

// This manifest's folder: the linker is given scripts/adorchd.order by absolute path.
let packageDirectory = String(#filePath.dropLast("/Package.swift".count))

// The Swift runtime and Foundation as static archives, for every release binary and Swift plugin
// (the Debian package runs without the toolchain). The archives the static Foundation needs are
// named, as the objects (built against the shared runtime) do not ask for them; lld resolves
// them in any order (gold wants each archive after its users).
let staticSwiftRuntime = [
    "-static-stdlib",
    "-lswiftSynchronization", "-l_FoundationICU", "-lCoreFoundation", "-l_FoundationCShims", "-l_FoundationCollections",
    "-use-ld=lld",
]

// adorchd's release link, for its idle footprint (BENCHMARKS.md, 4. Footprint; scripts/footprint.py
// shows where the memory is). With the Swift runtime, Foundation and ICU as shared objects, an
// idle daemon held 30 MB of their pages: dynamic symbol tables and relocations (2 MB a library),
// and 64 KB of code around every function the start-up touches (the kernel's fault-around).
// Linked in statically (staticSwiftRuntime): no symbol lookup, and the linker keeps only what
// is used. lld packs the relative relocations (DT_RELR, glibc 2.36), and
// the order file puts every function the start-up and idle run call side by side, so they
// fault in as a few hundred KB instead of spread over 10 MB. No symbol is exported: plugins
// call the host only through the adorch_host table, and a Swift plugin (swift-example, vast)
// brings its own Swift runtime (swiftPluginReleaseLink). scripts/adorchd-order.sh writes the order file again.
let daemonReleaseLink: [LinkerSetting] = [
    .unsafeFlags(staticSwiftRuntime + [
        "-Xlinker", "--no-export-dynamic",
        "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
        "-Xlinker", "--symbol-ordering-file=\(packageDirectory)/scripts/adorchd.order",
        "-Xlinker", "--no-warn-symbol-ordering",
    ], .when(configuration: .release)),
]

// adorchctl and adorch-plugin-validate: the static runtime too, so that a release build (the
// Debian package, `make deb`) runs on a machine without the Swift toolchain.
let toolReleaseLink: [LinkerSetting] = [.unsafeFlags(staticSwiftRuntime, .when(configuration: .release))]

// A Swift plugin in release brings its own Swift runtime (and Foundation, for vast), linked in
// statically, so that it loads into the static adorchd where no toolchain is installed. The two
// runtimes never meet: adorchd exports nothing, and --exclude-libs hides every symbol of the
// archives, so the plugin exports only its entry and binds its runtime calls to its own copy.
// nodelete: a refused plugin's dlclose must not unmap a runtime whose initializers have run.
let swiftPluginReleaseLink: [LinkerSetting] = [
    .unsafeFlags(staticSwiftRuntime + ["-Xlinker", "--exclude-libs=ALL", "-Xlinker", "-z", "-Xlinker", "nodelete"], .when(configuration: .release)),
]
// vast's URLSession and XMLParser: the static FoundationNetworking and FoundationXML, and the
// libcurl and libxml2 under them (their -dev packages, for the link).
let vastPluginReleaseLink: [LinkerSetting] = swiftPluginReleaseLink + [
    .unsafeFlags(["-lFoundationNetworking", "-l_CFURLSessionInterface", "-lcurl", "-lFoundationXML", "-l_CFXMLInterface", "-lxml2"],
                 .when(configuration: .release)),
]

// A C plugin needs no Swift runtime, but swiftc links libswiftCore.so and swiftrt.o into every
// library: 2 MB of a runtime the static adorchd does not otherwise load. Without the start-up
// object, the static runtime archives add nothing (no symbol of theirs is used).
let cPluginReleaseLink: [LinkerSetting] = [.unsafeFlags(["-static-stdlib", "-nostartfiles"], .when(configuration: .release))]

let package = Package(
    name: "adorch",
    products: [
        .executable(name: "adorchd", targets: ["adorchd"]),
        .executable(name: "adorchctl", targets: ["adorchctl"]),
        .executable(name: "adorch-bench", targets: ["adorch-bench"]),
        .executable(name: "adorch-plugin-validate", targets: ["adorch-plugin-validate"]),
        .executable(name: "adorch-plugin-host", targets: ["adorch-plugin-host"]),
        // The app-side Swift library (Sources/AdorchClient/README.md); it does not pull the daemon in.
        .library(name: "AdorchClient", targets: ["AdorchClient"]),
        // Plugins are shared objects the daemon dlopens; the file names are libadorch-plugin-NAME.so.
        .library(name: "adorch-plugin-sim", type: .dynamic, targets: ["AdorchSimPlugin"]),
        .library(name: "adorch-plugin-example", type: .dynamic, targets: ["AdorchExamplePlugin"]),
        .library(name: "adorch-plugin-swift-example", type: .dynamic, targets: ["AdorchSwiftExamplePlugin"]),
        .library(name: "adorch-plugin-vast", type: .dynamic, targets: ["AdorchVASTPlugin"]),
        .library(name: "adorch-plugin-openrtb", type: .dynamic, targets: ["AdorchOpenRTBPlugin"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", exact: "0.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.0.0"),
    ],
    targets: [
        // The plugin ABI: one C header, adorch/plugin.h, the whole contract with plugin authors.
        .target(name: "CAdorchPlugin", path: "Sources/CAdorchPlugin"),
        // The pure engine: slots, ad state machine, preload scheduler. No I/O, time passed in.
        // It takes the ABI's values (formats, events, errors) from plugin.h's enums, and a
        // viewer's decoded consent strings from AdorchPrivacy for its privacy classes.
        .target(name: "AdorchEngine", dependencies: ["CAdorchPlugin", "AdorchPrivacy"]),
        .target(name: "AdorchLocking"),
        // Where things live when nobody said (the socket rule the client libraries share, the
        // state and plugin folders) and the release: what adorchctl needs without the daemon.
        .target(name: "AdorchPaths"),
        // Everything that touches a plugin, in a room per execution context (docs/architecture.md):
        // the in-process loader (dlopen, ABI checks, a serial queue per plugin), the daemon's proxy of
        // an isolated plugin, the host process's own loop, and the wire between the two (which
        // bounds a load's consent strings as AdorchPrivacy's decoders do).
        .target(
            name: "AdorchPluginHost",
            dependencies: ["CAdorchPlugin", "AdorchEngine", "AdorchJSON", "AdorchLocking", "AdorchPrivacy", "CAdorchSandbox", .product(name: "Logging", package: "swift-log")]
        ),
        // The plugin host's confinement (docs/confinement.md): rlimits, no_new_privs, Landlock,
        // and a seccomp filter through Debian's libseccomp (libseccomp-dev).
        .target(name: "CAdorchSandbox", linkerSettings: [.linkedLibrary("seccomp")]),
        // The plugin host's answer to libdispatch's /proc/TID/stat in a box (worker_stat.c says
        // why): its own `open`, so linked into adorch-plugin-host alone.
        .target(name: "CAdorchWorkerStat"),
        // Holds a plugin to plugin.h's contract: adorch-plugin-validate's checks.
        .target(name: "AdorchPluginValidator", dependencies: ["AdorchPluginHost", "AdorchLocking", "CAdorchPlugin", "AdorchEngine"]),
        // An isolated plugin's process (docs/isolation.md): adorchd starts one per plugin.
        .executableTarget(
            name: "adorch-plugin-host",
            dependencies: ["AdorchPluginHost", "CAdorchWorkerStat", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            linkerSettings: toolReleaseLink
        ),
        .executableTarget(
            name: "adorch-plugin-validate",
            dependencies: ["AdorchPluginValidator", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            linkerSettings: toolReleaseLink
        ),
        // libsystemd from Debian's libsystemd-dev, and the daemon's small Swift layer over it.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "AdorchSystemd", dependencies: ["CSystemd", .product(name: "Logging", package: "swift-log")]),
        // Rewards: the durable ledger (SQLite through GRDB) and the server callback's signature.
        .target(
            name: "AdorchRewards",
            dependencies: ["AdorchStateDatabase", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto")]
        ),
        // A state directory's SQLite file, opened one way for each store: WAL, one connection, migrated, its schema checked.
        .target(name: "AdorchStateDatabase", dependencies: [.product(name: "GRDB", package: "GRDB.swift")]),
        // Frequency caps: the impression history the rules count, kept in the state directory (SQLite through GRDB).
        .target(name: "AdorchCapStore", dependencies: ["AdorchStateDatabase", .product(name: "GRDB", package: "GRDB.swift")]),
        // Privacy: the viewers' signals apps set with SetPrivacy, kept in the state directory (SQLite through GRDB).
        .target(name: "AdorchPrivacyStore", dependencies: ["AdorchStateDatabase", .product(name: "GRDB", package: "GRDB.swift")]),
        // Bidders' notices: the durable outbox the daemon sends them from (SQLite through GRDB).
        .target(name: "AdorchNoticeStore", dependencies: ["AdorchEngine", "AdorchStateDatabase", .product(name: "GRDB", package: "GRDB.swift")]),
        // One HTTP transfer through Debian's libcurl, its time and body bounded: the notice
        // outbox's GETs and the openrtb plugin's exchanges.
        .target(name: "CAdorchHTTP", linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "AdorchHTTP", dependencies: ["CAdorchHTTP"]),
        // Varlink: framing, a server on its own epoll loop, a blocking client, the service interface.
        .target(name: "AdorchVarlink", dependencies: ["AdorchJSON", "CEpoll", "CGlibcMalloc", .product(name: "Logging", package: "swift-log")]),
        // JSON values, a strict parser and a writer over bytes: the wire's and the plugin host's.
        .target(name: "AdorchJSON"),
        // Consent strings decoded (docs/privacy.md): TCF v2 TC strings, GPP strings, US Privacy.
        // Pure: text in, values or a typed refusal out.
        .target(name: "AdorchPrivacy"),
        // <sys/epoll.h>, for the Varlink server's socket watcher.
        .systemLibrary(name: "CEpoll"),
        // The daemon's wiring: config, runtime (engine queue, timers), the io.adorch.* handlers.
        .target(
            name: "AdorchDaemon",
            dependencies: [
                "AdorchEngine", "AdorchLocking", "AdorchPaths", "AdorchPluginHost", "AdorchVarlink", "AdorchSystemd", "AdorchRewards", "AdorchCapStore",
                "AdorchPrivacy", "AdorchPrivacyStore", "AdorchStateDatabase", "AdorchNoticeStore", "AdorchHTTP", .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // A link to etc/adorch/adorchd.toml: the shipped config is the embedded default.
            resources: [.embedInCode("Config/adorchd.toml")]
        ),
        // glibc's <malloc.h>, for the daemon's allocator tuning.
        .systemLibrary(name: "CGlibcMalloc"),
        .executableTarget(
            name: "adorchd",
            dependencies: [
                "AdorchDaemon", "AdorchPaths", "AdorchSystemd", "CGlibcMalloc",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: daemonReleaseLink
        ),
        // Apps' Swift client of io.adorch.*: Foundation, Glibc sockets, AdorchJSON, AdorchLocking (a lock
        // ThreadSanitizer sees, where it cannot see Mutex), AdorchPaths and swift-log only, so a package that depends on it builds quickly.
        .target(name: "AdorchClient", dependencies: ["AdorchJSON", "AdorchLocking", "AdorchPaths", .product(name: "Logging", package: "swift-log")], exclude: ["README.md"]),
        .executableTarget(
            name: "adorchctl",
            dependencies: [
                "AdorchVarlink", "AdorchPaths", "AdorchRewards",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: toolReleaseLink
        ),
        // The control API's load generator: an epoll client in C, as cheap as redis-benchmark.
        .target(name: "CAdorchLoad"),
        // A counting malloc, for the wire benchmark's allocations per message.
        .target(name: "CAdorchMallocCount"),
        // Benchmarks: the standard day against the reference preload policies; the real daemon
        // against redis, its footprint and how Show scales.
        .target(
            name: "AdorchBench",
            dependencies: ["AdorchEngine", "AdorchLocking", "AdorchPluginHost", "AdorchVarlink", "CAdorchLoad", "CAdorchMallocCount", .product(name: "TOMLKit", package: "TOMLKit")]
        ),
        .executableTarget(
            name: "adorch-bench",
            dependencies: ["AdorchBench", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .target(name: "AdorchSimPlugin", dependencies: ["CAdorchPlugin"], path: "plugins/sim", publicHeadersPath: ".", linkerSettings: cPluginReleaseLink),
        .target(name: "AdorchExamplePlugin", dependencies: ["CAdorchPlugin"], path: "plugins/example", publicHeadersPath: ".", linkerSettings: cPluginReleaseLink),
        .target(name: "AdorchSwiftExamplePlugin", dependencies: ["CAdorchPlugin", "AdorchLocking"], path: "plugins/swift-example",
                linkerSettings: swiftPluginReleaseLink),
        // The VAST plugin: the protocol (parse, wrapper chains, media choice, macros), then its ABI glue.
        .target(name: "VAST", dependencies: ["AdorchLocking"], path: "plugins/vast/VAST"),
        .target(name: "AdorchVASTPlugin", dependencies: ["CAdorchPlugin", "AdorchLocking", "VAST"], path: "plugins/vast/Plugin",
                linkerSettings: vastPluginReleaseLink),
        // The OpenRTB 2.6 bidder's protocol: BidRequests, strict BidResponse reading, notice macros.
        .target(name: "OpenRTB", dependencies: ["AdorchJSON", "CAdorchPlugin"], path: "plugins/openrtb/OpenRTB"),
        .target(name: "AdorchOpenRTBPlugin", dependencies: ["CAdorchPlugin", "AdorchLocking", "AdorchJSON", "AdorchHTTP", "OpenRTB", "VAST"], path: "plugins/openrtb/Plugin",
                linkerSettings: vastPluginReleaseLink),
        // Fuzz targets: libFuzzer when built with -sanitize=fuzzer -DFUZZING (make fuzz), corpus
        // replayers otherwise, so the committed corpus runs in the tests.
        .target(name: "CFuzzDriver", path: "Fuzz/CFuzzDriver"),
        .target(name: "AdorchFuzzSupport", dependencies: ["CFuzzDriver"], path: "Fuzz/Support"),
        .executableTarget(name: "adorch-fuzz-varlink", dependencies: ["AdorchVarlink", "AdorchFuzzSupport"], path: "Fuzz/varlink"),
        .executableTarget(name: "adorch-fuzz-config", dependencies: ["AdorchDaemon", "AdorchFuzzSupport"], path: "Fuzz/config"),
        .executableTarget(name: "adorch-fuzz-rewards", dependencies: ["AdorchRewards", "AdorchFuzzSupport"], path: "Fuzz/rewards"),

        // What every test target's waits share: how much longer to wait under a sanitizer.
        .target(name: "AdorchTestSupport", dependencies: ["AdorchPluginHost"], path: "Tests/TestSupport"),
        .testTarget(name: "AdorchEngineTests", dependencies: ["AdorchEngine", "AdorchPrivacy"]),
        // The plugin host's own units: the wire between daemon and host, the ABI's numbers.
        .testTarget(name: "AdorchPluginHostTests", dependencies: ["AdorchPluginHost", "AdorchEngine", "AdorchPrivacy", "CAdorchPlugin"]),
        .testTarget(name: "AdorchVarlinkTests", dependencies: ["AdorchVarlink", "AdorchLocking", "AdorchTestSupport", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "AdorchDaemonTests", dependencies: ["AdorchDaemon", "AdorchEngine", "AdorchLocking", "AdorchPluginHost", "AdorchPrivacy",
                                                             "AdorchPrivacyStore", "AdorchVarlink", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "AdorchSystemdTests", dependencies: ["AdorchSystemd"]),
        .testTarget(name: "AdorchRewardsTests", dependencies: ["AdorchRewards"]),
        .testTarget(name: "AdorchNoticeStoreTests", dependencies: ["AdorchNoticeStore", "AdorchEngine"]),
        .testTarget(name: "AdorchPrivacyStoreTests", dependencies: ["AdorchPrivacyStore", "AdorchStateDatabase", .product(name: "GRDB", package: "GRDB.swift")]),
        // The consent decoders against the vectors in shared/data/consent and, differentially,
        // against PyPI's iab-tcf (Reference/ holds the Python side).
        .testTarget(name: "AdorchPrivacyTests", dependencies: ["AdorchPrivacy"], exclude: ["Reference"]),
        .target(name: "VASTFixtures", path: "Tests/VASTFixtures"),
        .testTarget(name: "AdorchBenchTests", dependencies: ["AdorchBench"]),
        // The OpenRTB module; Tests/openrtb holds the Python side (schema validation, the mock exchange).
        .testTarget(name: "OpenRTBTests", dependencies: ["OpenRTB", "AdorchJSON"]),
        .testTarget(name: "VASTTests", dependencies: ["VAST", "VASTFixtures", "AdorchEngine", "AdorchLocking"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["AdorchVarlink", "AdorchLocking", "VASTFixtures", "AdorchBench", "AdorchPluginHost", "AdorchClient", "AdorchPaths", "AdorchTestSupport",
                           "AdorchPrivacy",
                           .product(name: "Logging", package: "swift-log")],
            exclude: ["Fixtures"]
        ),
    ]
)
