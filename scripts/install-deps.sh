#!/usr/bin/env bash
# Installs what building, running and testing adorch need, and nothing that is already
# there. Safe to run again. Debian packages come from apt, Python ones from PyPI.
set -euo pipefail

apt_packages=()
command -v cc >/dev/null 2>&1 || apt_packages+=(gcc)
command -v python3 >/dev/null 2>&1 || apt_packages+=(python3 python3-pip)
# The hostile-client tests run attackers as other uids under setpriv: the system's python3,
# which any uid may execute (a python3 under root's home, as pyenv's, is not).
[ -x /usr/bin/python3 ] || apt_packages+=(python3)
# libsystemd for sd_notify, socket activation and the journal; pkg-config finds it.
pkg-config --exists libsystemd 2>/dev/null || apt_packages+=(libsystemd-dev pkg-config)
# SQLite for the reward ledger (GRDB links the system's).
pkg-config --exists sqlite3 2>/dev/null || apt_packages+=(libsqlite3-dev)
# The system tests: a standalone journald, systemd-analyze, systemd-socket-activate, a real systemd.
[ -x /lib/systemd/systemd-journald ] && command -v systemd-socket-activate >/dev/null 2>&1 || apt_packages+=(systemd)
command -v unshare >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1 && command -v prlimit >/dev/null 2>&1 \
    && command -v setpriv >/dev/null 2>&1 || apt_packages+=(util-linux)
# The vast plugin: Foundation's HTTP client and XML parser load libcurl and libxml2.
[ -n "$(ldconfig -p | grep -F libcurl.so.4)" ] || apt_packages+=(libcurl4)
[ -n "$(ldconfig -p | grep -F libxml2.so.2)" ] || apt_packages+=(libxml2)
# A release build's vast plugin links the static FoundationNetworking and FoundationXML, so
# libcurl's and libxml2's link files (Package.swift, vastPluginReleaseLink).
pkg-config --exists libcurl 2>/dev/null || apt_packages+=(libcurl4-openssl-dev)
pkg-config --exists libxml-2.0 2>/dev/null || apt_packages+=(libxml2-dev)
# `make deb`: the package is put together by dpkg-deb, its Depends by dpkg-shlibdeps, its man
# pages by help2man, chrpath drops SwiftPM's RUNPATHs, and lintian checks it.
command -v dpkg-shlibdeps >/dev/null 2>&1 || apt_packages+=(dpkg-dev)
for tool in help2man chrpath lintian; do command -v $tool >/dev/null 2>&1 || apt_packages+=($tool); done
# The benchmarks (and their smoke run in the tests): redis-server and redis-benchmark, the reference.
command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 || apt_packages+=(redis-server)

if [ ${#apt_packages[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing ${apt_packages[*]}; run: sudo apt-get install ${apt_packages[*]}" >&2
        exit 1
    fi
    echo "install-deps: apt-get install ${apt_packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

# The Varlink client from PyPI: the tests call the daemon through it, as outside tools do.
if ! python3 -c 'import varlink' >/dev/null 2>&1; then
    echo "install-deps: pip install varlink"
    python3 -m pip install --quiet --disable-pip-version-check varlink 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages varlink
fi

command -v swift >/dev/null 2>&1 || { echo "install-deps: swift is not on PATH (Swift 6 is needed)" >&2; exit 1; }
