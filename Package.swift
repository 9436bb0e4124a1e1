// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "adorch",
    products: [
        .executable(name: "adorchd", targets: ["adorchd"]),
        .executable(name: "adorchctl", targets: ["adorchctl"]),
        .executable(name: "adorch-bench", targets: ["adorch-bench"]),
        .executable(name: "adorch-plugin-validate", targets: ["adorch-plugin-validate"]),
        // Plugins are shared objects the daemon dlopens; the file names are libadorch-plugin-NAME.so.
        .library(name: "adorch-plugin-sim", type: .dynamic, targets: ["AdorchSimPlugin"]),
        .library(name: "adorch-plugin-example", type: .dynamic, targets: ["AdorchExamplePlugin"]),
        .library(name: "adorch-plugin-swift-example", type: .dynamic, targets: ["AdorchSwiftExamplePlugin"]),
        .library(name: "adorch-plugin-vast", type: .dynamic, targets: ["AdorchVASTPlugin"]),
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
        // It takes the ABI's values (formats, events, errors) from plugin.h's enums.
        .target(name: "AdorchEngine", dependencies: ["CAdorchPlugin"]),
        .target(name: "AdorchLocking"),
        // dlopen, ABI checks, one serial queue per plugin, callbacks hopped to the engine queue.
        .target(
            name: "AdorchPluginHost",
            dependencies: ["CAdorchPlugin", "AdorchEngine", "AdorchJSON", "AdorchLocking", .product(name: "Logging", package: "swift-log")]
        ),
        // Holds a plugin to plugin.h's contract: adorch-plugin-validate's checks.
        .target(name: "AdorchPluginValidator", dependencies: ["AdorchPluginHost", "AdorchLocking", "CAdorchPlugin", "AdorchEngine"]),
        .executableTarget(
            name: "adorch-plugin-validate",
            dependencies: ["AdorchPluginValidator", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // libsystemd from Debian's libsystemd-dev, and the daemon's small Swift layer over it.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "AdorchSystemd", dependencies: ["CSystemd", .product(name: "Logging", package: "swift-log")]),
        // Rewards: the durable ledger (SQLite through GRDB) and the server callback's signature.
        .target(
            name: "AdorchRewards",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto")]
        ),
        // Varlink: framing, a server on its own epoll loop, a blocking client, the service interface.
        .target(name: "AdorchVarlink", dependencies: ["AdorchJSON", "CEpoll", .product(name: "Logging", package: "swift-log")]),
        // JSON values, a strict parser and a writer over bytes: the wire's and the plugin host's.
        .target(name: "AdorchJSON"),
        // <sys/epoll.h>, for the Varlink server's socket watcher.
        .systemLibrary(name: "CEpoll"),
        // The daemon's wiring: config, runtime (engine queue, timers), the io.adorch.* handlers.
        .target(
            name: "AdorchDaemon",
            dependencies: [
                "AdorchEngine", "AdorchLocking", "AdorchPluginHost", "AdorchVarlink", "AdorchSystemd", "AdorchRewards",
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // A link to etc/adorch/adorchd.toml: the shipped config is the embedded default.
            resources: [.embedInCode("adorchd.toml")]
        ),
        // glibc's <malloc.h>, for the daemon's allocator tuning.
        .systemLibrary(name: "CGlibcMalloc"),
        .executableTarget(
            name: "adorchd",
            dependencies: [
                "AdorchDaemon", "AdorchSystemd", "CGlibcMalloc",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "adorchctl",
            dependencies: [
                "AdorchVarlink", "AdorchDaemon", "AdorchRewards",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The control API's load generator: an epoll client in C, as cheap as redis-benchmark.
        .target(name: "CAdorchLoad"),
        // A counting malloc, for the wire benchmark's allocations per message.
        .target(name: "CAdorchMallocCount"),
        // Benchmarks: the standard day against the reference preload policies; the real daemon
        // against redis, its footprint and how Show scales.
        .target(
            name: "AdorchBench",
            dependencies: ["AdorchEngine", "AdorchLocking", "AdorchVarlink", "CAdorchLoad", "CAdorchMallocCount", .product(name: "TOMLKit", package: "TOMLKit")]
        ),
        .executableTarget(
            name: "adorch-bench",
            dependencies: ["AdorchBench", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .target(name: "AdorchSimPlugin", dependencies: ["CAdorchPlugin"], path: "plugins/sim", publicHeadersPath: "."),
        .target(name: "AdorchExamplePlugin", dependencies: ["CAdorchPlugin"], path: "plugins/example", publicHeadersPath: "."),
        .target(name: "AdorchSwiftExamplePlugin", dependencies: ["CAdorchPlugin", "AdorchLocking"], path: "plugins/swift-example"),
        // The VAST plugin: the protocol (parse, wrapper chains, media choice, macros), then its ABI glue.
        .target(name: "VAST", dependencies: ["AdorchLocking"], path: "plugins/vast/VAST"),
        .target(name: "AdorchVASTPlugin", dependencies: ["CAdorchPlugin", "AdorchLocking", "VAST"], path: "plugins/vast/Plugin"),
        // Fuzz targets: libFuzzer when built with -sanitize=fuzzer -DFUZZING (make fuzz), corpus
        // replayers otherwise, so the committed corpus runs in the tests.
        .target(name: "CFuzzDriver", path: "Fuzz/CFuzzDriver"),
        .target(name: "AdorchFuzzSupport", dependencies: ["CFuzzDriver"], path: "Fuzz/Support"),
        .executableTarget(name: "adorch-fuzz-varlink", dependencies: ["AdorchVarlink", "AdorchFuzzSupport"], path: "Fuzz/varlink"),
        .executableTarget(name: "adorch-fuzz-config", dependencies: ["AdorchDaemon", "AdorchFuzzSupport"], path: "Fuzz/config"),
        .executableTarget(name: "adorch-fuzz-rewards", dependencies: ["AdorchRewards", "AdorchFuzzSupport"], path: "Fuzz/rewards"),

        .testTarget(name: "AdorchEngineTests", dependencies: ["AdorchEngine"]),
        .testTarget(name: "AdorchVarlinkTests", dependencies: ["AdorchVarlink"]),
        .testTarget(name: "AdorchDaemonTests", dependencies: ["AdorchDaemon"]),
        .testTarget(name: "AdorchSystemdTests", dependencies: ["AdorchSystemd"]),
        .testTarget(name: "AdorchRewardsTests", dependencies: ["AdorchRewards"]),
        .target(name: "VASTFixtures", path: "Tests/VASTFixtures"),
        .testTarget(name: "AdorchBenchTests", dependencies: ["AdorchBench"]),
        .testTarget(name: "VASTTests", dependencies: ["VAST", "VASTFixtures", "AdorchEngine", "AdorchLocking"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["AdorchVarlink", "AdorchLocking", "VASTFixtures", "AdorchBench", "AdorchPluginHost",
                           .product(name: "Logging", package: "swift-log")],
            exclude: ["Fixtures"]
        ),
    ]
)
