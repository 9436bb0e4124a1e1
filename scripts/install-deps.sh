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
# The Python client's install test: a venv of /usr/bin/python3 whose system setuptools and wheel build it offline.
/usr/bin/python3 -c 'import ensurepip, venv, setuptools, wheel' >/dev/null 2>&1 || apt_packages+=(python3-venv python3-setuptools python3-wheel)
# libsystemd for sd_notify, socket activation and the journal; pkg-config finds it.
pkg-config --exists libsystemd 2>/dev/null || apt_packages+=(libsystemd-dev pkg-config)
# libseccomp for the plugin host's system call filter (Sources/CAdorchSandbox).
pkg-config --exists libseccomp 2>/dev/null || apt_packages+=(libseccomp-dev)
# SQLite for the reward ledger (GRDB links the system's).
pkg-config --exists sqlite3 2>/dev/null || apt_packages+=(libsqlite3-dev)
# libadorch-client (clients/c) parses JSON with jansson; pkg-config finds it.
pkg-config --exists jansson 2>/dev/null || apt_packages+=(libjansson-dev)
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

# The metrics tests: Debian's prometheus (the scraper) and promtool. The tests start their own;
# its postinst would start the packaged service and enable it for every boot: a policy-rc.d
# refuses the start while it installs (unless one is there already), and it is disabled after.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || { echo "install-deps: missing prometheus; run: sudo $0" >&2; exit 1; }
    echo "install-deps: apt-get install prometheus (its service not started)"
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || { [ -z "$policy" ] || rm -f "$policy"; exit 1; }
    [ -z "$policy" ] || rm -f "$policy"
    deb-systemd-helper disable prometheus.service >/dev/null 2>&1 || true
fi

# A Python module from PyPI, unless python3 already has it: pip_install MODULE PACKAGE.
pip_install() {
    python3 -c "import $1" >/dev/null 2>&1 && return 0
    echo "install-deps: pip install $2"
    python3 -m pip install --quiet --disable-pip-version-check "$2" 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$2"
}
# The Varlink client: the tests call the daemon through it, as outside tools do.
pip_install varlink varlink
# The consent decoders' differential test (Tests/AdorchPrivacyTests) decodes the same TC strings
# with iab-tcf, an independent implementation.
pip_install iab_tcf iab-tcf
# The OpenRTB tests validate every BidRequest against IAB's JSON Schema (Draft 2020-12: jsonschema 4.18 or later).
pip_install "jsonschema, referencing" "jsonschema>=4.18"

command -v swift >/dev/null 2>&1 || { echo "install-deps: swift is not on PATH (Swift 6 is needed)" >&2; exit 1; }
