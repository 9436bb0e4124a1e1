#!/usr/bin/env bash
# Builds the Debian package from a release build: whatever `make install-files` installs with
# PREFIX=/usr is packaged, stripped, given man pages, a copyright and changelog, a computed
# Depends and the maintainer scripts of packaging/deb, then checked to need nothing of the Swift
# toolchain. `make deb` runs it after `swift build -c release`.
#   usage: scripts/mkdeb.sh [OUTDIR]      (default .build-deb; prints the .deb's path)
#   DEB_REVISION (1): the Debian revision after the daemon's version; DEB_XZ_LEVEL: see below.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/.build-deb}" && cd "${1:-$root/.build-deb}" && pwd)
pkg=$root/packaging/deb
[ -x "$root/.build/release/adorchd" ] || { echo "mkdeb: no release build in .build/release: swift build -c release (make deb does)" >&2; exit 1; }

# The daemon's own version (adorchd --version) is the package's upstream version.
upstream=$(sed -n 's/^ *public static let current = "\(.*\)"$/\1/p' "$root/Sources/AdorchPaths/Version.swift")
[ -n "$upstream" ] || { echo "mkdeb: no version in Sources/AdorchPaths/Version.swift" >&2; exit 1; }
version=$upstream-${DEB_REVISION:-1}
arch=$(dpkg --print-architecture)
deb=$out/adorch_${version}_$arch.deb
# The changelog's date: the commit's, so that a rebuild of one commit gives the same package.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}

# The tree where dpkg-shlibdeps expects a package's files: debian/PACKAGE.
tree=$out/debian/adorch
rm -rf "$out/debian"
# The C client library and its pkg-config file go to the multiarch directory, as Debian's do.
make -s -C "$root" install-files CONFIGURATION=release PREFIX=/usr SYSCONFDIR=/etc DESTDIR="$tree" \
    CLIENT_LIBDIR="/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"

# Executables and shared objects: stripped as dh_strip does, and none may need the toolchain's
# Swift runtime (libswift*, libFoundation*, libdispatch, libBlocksRuntime) or look in /opt/swift.
elfs=()
while IFS= read -r -d '' f; do
    if [ "$(head -c4 "$f")" = $'\x7fELF' ]; then elfs+=("$f"); fi
done < <(find "$tree" -type f -print0)
for f in "${elfs[@]}"; do
    strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    if grep -E '^lib(swift|Foundation|_Foundation|dispatch|BlocksRuntime)' <<<"$needed"; then
        echo "mkdeb: ${f#"$tree"} needs the Swift toolchain's runtime" >&2; exit 1
    fi
    # SwiftPM writes a RUNPATH ($ORIGIN) into every link: the packaged files find their
    # libraries in the system's paths only.
    if readelf -d "$f" | grep -qE '\((RUNPATH|RPATH)\)'; then
        chrpath -d "$f" >/dev/null
    fi
done

# Man pages from --help, for the three commands.
declare -A summary=(
    [adorchd]="ad inventory daemon: preloads ads from network plugins, serves apps over Varlink"
    [adorchctl]="control adorchd: status, slots, ads, reload, rewards"
    [adorch-plugin-validate]="check an adorch network plugin against the plugin contract"
)
man=$tree/usr/share/man/man1
mkdir -p "$man"
for cmd in "${!summary[@]}"; do
    help2man --no-info --no-discard-stderr --version-string="$upstream" --name="${summary[$cmd]}" "$tree/usr/bin/$cmd" \
        | gzip -9n >"$man/$cmd.1.gz"
done

doc=$tree/usr/share/doc/adorch
install -m644 "$pkg/copyright" "$doc/copyright"
{
    echo "adorch ($version) unstable; urgency=medium"
    echo
    echo "  * Built from the adorch source tree, commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)."
    echo
    echo " -- $(sed -n 's/^Maintainer: //p' "$pkg/control.in")  $(date -R -u -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.Debian.gz"
install -Dm644 "$pkg/lintian-overrides" "$tree/usr/share/lintian/overrides/adorch"

# Depends: what dpkg-shlibdeps finds the binaries need (it knows the package's root by its
# DEBIAN folder), and systemd for the maintainer scripts' tools.
mkdir -p "$tree/DEBIAN"
printf 'Source: adorch\n\nPackage: adorch\nArchitecture: any\n' >"$out/debian/control"
shlibs=$(cd "$out" && dpkg-shlibdeps -O "${elfs[@]#"$out/"}" | sed -n 's/^shlibs:Depends=//p')
# systemd for the maintainer scripts; procps for the unit's ExecReload=/bin/kill.
depends="$shlibs, systemd, procps"
# libcurl4 for the notice outbox and the openrtb plugin, which open it at run time (dlopen,
# Sources/CAdorchHTTP): dpkg-shlibdeps cannot see that.
case ", $shlibs," in *", libcurl4"[\ ,]*) ;; *) depends="$depends, libcurl4" ;; esac
# The Python client: python3, and no byte code in the package (Debian compiles it on install).
if [ -d "$tree/usr/lib/python3/dist-packages" ]; then
    depends="$depends, python3"
    find "$tree" -name __pycache__ -type d -prune -exec rm -rf {} +
fi

# Public shared libraries (the C client's): a shlibs entry, so that other packages' Depends
# name this one, and ldconfig run once dpkg is done.
for f in "${elfs[@]}"; do
    case ${f#"$tree"} in /usr/lib/adorch/*) continue ;; /usr/lib/*.so.*) ;; *) continue ;; esac
    soname=$(readelf -d "$f" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [[ $soname == *.so.* ]]; then echo "${soname%%.so.*} ${soname##*.so.} adorch (>= $version)"; fi
done | sort -u >"$tree/DEBIAN/shlibs"
if [ -s "$tree/DEBIAN/shlibs" ]; then
    echo "activate-noawait ldconfig" >"$tree/DEBIAN/triggers"
else
    rm "$tree/DEBIAN/shlibs"
fi

install -m755 "$pkg/postinst" "$pkg/prerm" "$pkg/postrm" "$tree/DEBIAN/"
find "$tree/etc" -type f -printf '/etc/%P\n' | sort >"$tree/DEBIAN/conffiles"
chmod 644 "$tree/DEBIAN/conffiles"
(cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
size=$(du -sk --exclude=DEBIAN "$tree" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@INSTALLED_SIZE@|$size|" -e "s|@DEPENDS@|$depends|" \
    "$pkg/control.in" >"$tree/DEBIAN/control"

# xz (lintian refuses zstd): at its default level 66 MB and a minute of compression, at
# DEB_XZ_LEVEL=0 81 MB in 5 s (the package test's).
dpkg-deb --build --root-owner-group -Zxz -z"${DEB_XZ_LEVEL:-6}" "$tree" "$deb" >/dev/null
echo "$deb"
