# adorch: `make run` builds and runs the daemon on its embedded default config;
# `make test` runs every test. Both install what they need first.

SWIFT ?= swift
BUILD := .build/debug
# Extra arguments for adorchd under `make run`, e.g. ARGS="--log-level debug".
ARGS ?=

# `make install`: PREFIX and DESTDIR as usual; CONFIGURATION=debug skips the release build,
# BUILD_PATH is SwiftPM's --build-path (a sanitizer build's, say).
PREFIX ?= /usr/local
DESTDIR ?=
CONFIGURATION ?= release
BUILD_PATH ?= .build
SYSCONFDIR ?= /etc
BINDIR := $(PREFIX)/bin
# adorch-plugin-host, which adorchd starts for each isolated plugin (docs/isolation.md).
LIBEXECDIR := $(PREFIX)/libexec/adorch
PLUGINDIR := $(PREFIX)/lib/adorch/plugins
DOCDIR := $(PREFIX)/share/doc/adorch
UNITDIR ?= $(PREFIX)/lib/systemd/system
CATALOGDIR ?= $(PREFIX)/lib/systemd/catalog
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
# libadorch-client (clients/c): the library, and its pkg-config file beside it (arch-dependent).
CLIENT_LIBDIR ?= $(PREFIX)/lib
# Header only, so arch-independent: share/pkgconfig, on pkg-config's default path.
PKGCONFIGDIR ?= $(PREFIX)/share/pkgconfig
ABI_VERSION := $(shell sed -n 's/^\#define ADORCH_PLUGIN_ABI_MAJOR //p' Sources/CAdorchPlugin/include/adorch/plugin.h).$(shell sed -n 's/^\#define ADORCH_PLUGIN_ABI_MINOR //p' Sources/CAdorchPlugin/include/adorch/plugin.h)

# Seconds of fuzzing per target: a smoke run in `make test`, a long one in `make fuzz`.
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_SECONDS ?= 300
# The soak's length in minutes, and how many load → show → destroy cycles `make cycles` runs.
SOAK_MINUTES ?= 30
# The chaos run's length in minutes (`make test` runs it for 45 s).
CHAOS_MINUTES ?= 10
CYCLES ?= 1000000

.PHONY: run test hostile chaos bench footprint fuzz soak cycles asan tsan build deps clean help install install-files deb

help:
	@echo "make run    build and run adorchd in the foreground on the embedded default config"
	@echo "make test   build and run every test (unit and integration)"
	@echo "make hostile  only the hostile-client tests: each attack against a polite client"
	@echo "make bench  run the benchmarks (release build); the tables also go to BENCHMARKS.md"
	@echo "make footprint  the idle daemon's memory, by mapping, and exec -> READY=1 (release build, no redis)"
	@echo "make fuzz   fuzz the Varlink decoder, the config parser and the reward callback [FUZZ_SECONDS=300 per target]"
	@echo "make chaos  three apps as three uids show rewarded ads while the daemon is killed and its disk filled; nothing earned lost or doubled, no cap passed [CHAOS_MINUTES=10; root]"
	@echo "make soak   200 clients against misbehaving plugins with a reload every minute [SOAK_MINUTES=30]"
	@echo "make cycles a million load -> show -> destroy cycles: no ad object may pile up [CYCLES=1000000]"
	@echo "make asan   every test on an AddressSanitizer build (leaks too); fails on any report"
	@echo "make tsan   every test on a ThreadSanitizer build; fails on any report"
	@echo "make build  build the daemon, adorchctl and the plugins"
	@echo "make install [PREFIX=/usr/local] [DESTDIR=]  binaries, plugins, headers and pkg-config files, libadorch-client, units, catalog, config"
	@echo "make deb    the Debian package, .build-deb/adorch_VERSION_ARCH.deb, from a release build (docs/packaging.md)"

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

run: build
	$(BUILD)/adorchd $(ARGS)

# The release build too: DebPackageTests packs it into the Debian package.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) build -c release
	SWIFT=$(SWIFT) scripts/run-tests.sh
	scripts/fuzz.sh --seconds $(FUZZ_SMOKE_SECONDS)

# Part of `make test`; alone, to iterate on the daemon's budgets without the rest.
hostile: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing --filter 'Hostile'

# Part of `make test` (45 s); alone, for CHAOS_MINUTES. Needs root: the apps run as other
# uids and the full disk is a tmpfs.
chaos: deps
	$(SWIFT) build --build-tests
	ADORCH_CHAOS_SECONDS=$$(( $(CHAOS_MINUTES) * 60 )) $(SWIFT) test --skip-build --disable-swift-testing --filter ChaosTests

fuzz: deps
	scripts/fuzz.sh --seconds $(FUZZ_SECONDS)

soak: deps
	$(SWIFT) build -c release
	.build/release/adorch-bench soak --minutes $(SOAK_MINUTES)

cycles: deps
	$(SWIFT) build -c release
	.build/release/adorch-bench cycles --count $(CYCLES)

asan: deps
	scripts/sanitize.sh address

tsan: deps
	scripts/sanitize.sh thread

bench: deps
	$(SWIFT) build -c release
	scripts/bench.sh .build/release/adorch-bench

# The footprint part of `make bench` alone, then where the idle daemon's memory is.
footprint: deps
	$(SWIFT) build -c release
	.build/release/adorch-bench footprint
	scripts/footprint.py --adorchd .build/release/adorchd

install: deps
	$(SWIFT) build -c $(CONFIGURATION) --build-path $(BUILD_PATH)
	$(MAKE) install-files

deb: deps
	$(SWIFT) build -c release
	scripts/mkdeb.sh

# Copies an existing build (the tests install the debug build this way, without rebuilding).
install-files:
	install -Dm755 $(BUILD_PATH)/$(CONFIGURATION)/adorchd $(DESTDIR)$(BINDIR)/adorchd
	install -Dm755 $(BUILD_PATH)/$(CONFIGURATION)/adorchctl $(DESTDIR)$(BINDIR)/adorchctl
	install -Dm755 $(BUILD_PATH)/$(CONFIGURATION)/adorch-plugin-validate $(DESTDIR)$(BINDIR)/adorch-plugin-validate
	install -Dm755 $(BUILD_PATH)/$(CONFIGURATION)/adorch-plugin-host $(DESTDIR)$(LIBEXECDIR)/adorch-plugin-host
	install -d $(DESTDIR)$(PLUGINDIR)
	install -m644 $(BUILD_PATH)/$(CONFIGURATION)/libadorch-plugin-*.so $(DESTDIR)$(PLUGINDIR)/
	install -Dm644 Sources/CAdorchPlugin/include/adorch/plugin.h $(DESTDIR)$(PREFIX)/include/adorch/plugin.h
	install -d $(DESTDIR)$(PKGCONFIGDIR)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@PLUGINDIR@|$(PLUGINDIR)|g' -e 's|@ABI_VERSION@|$(ABI_VERSION)|g' plugins/adorch-plugin.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/adorch-plugin.pc
	# The docs at the paths the README links to, and the examples where Debian keeps them.
	install -Dm644 plugins/README.md $(DESTDIR)$(DOCDIR)/plugins/README.md
	install -Dm644 plugins/vast/README.md $(DESTDIR)$(DOCDIR)/plugins/vast/README.md
	install -d $(DESTDIR)$(DOCDIR)/docs
	install -m644 docs/*.md $(DESTDIR)$(DOCDIR)/docs/
	install -Dm644 clients/c/README.md $(DESTDIR)$(DOCDIR)/clients/c/README.md
	install -Dm644 clients/python/README.md $(DESTDIR)$(DOCDIR)/clients/python/README.md
	install -Dm644 examples/c/rewarded.c $(DESTDIR)$(DOCDIR)/examples/c/rewarded.c
	install -Dm644 examples/c/Makefile $(DESTDIR)$(DOCDIR)/examples/c/Makefile
	install -Dm644 examples/python/rewarded.py $(DESTDIR)$(DOCDIR)/examples/python/rewarded.py
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@PLUGINDIR@|$(PLUGINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' systemd/adorchd.service.in > $(DESTDIR)$(UNITDIR)/adorchd.service
	# The socket's and the catalog's links to the README, under this PREFIX's DOCDIR.
	sed -e 's|/usr/local/share/doc/adorch|$(DOCDIR)|g' systemd/adorchd.socket > $(DESTDIR)$(UNITDIR)/adorchd.socket
	install -d $(DESTDIR)$(CATALOGDIR)
	sed -e 's|/usr/local/share/doc/adorch|$(DOCDIR)|g' systemd/adorchd.catalog > $(DESTDIR)$(CATALOGDIR)/adorchd.catalog
	install -Dm644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -Dm644 systemd/adorch.sysusers $(DESTDIR)$(SYSUSERSDIR)/adorch.conf
	# An operator's edited config is never overwritten.
	test -e $(DESTDIR)$(SYSCONFDIR)/adorch/adorchd.toml || install -Dm644 etc/adorch/adorchd.toml $(DESTDIR)$(SYSCONFDIR)/adorch/adorchd.toml
	install -d $(DESTDIR)$(SYSCONFDIR)/adorch/adorchd.toml.d
	# The Python client (clients/python), in Debian's layout for pure-Python packages.
	install -d $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/adorch
	install -m644 clients/python/adorch/*.py clients/python/adorch/py.typed $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/adorch/
	# libadorch-client, adorch/client.h and adorch-client.pc: clients/c builds the library first (seconds).
	$(MAKE) -C clients/c install DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) LIBDIR=$(CLIENT_LIBDIR)

clean:
	rm -rf .build .build-asan .build-tsan .build-fuzz .build-examples-swift
	$(MAKE) -C clients/c clean
