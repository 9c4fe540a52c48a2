#!/usr/bin/env bash
# tools/device-check-deps.sh DEBS_DIR ROOT: unpacks every Debian package of DEBS_DIR
# (tools/device-check-pack.sh's .device-check/debs) into the folder ROOT, never into /, and
# makes its pkg-config files point into ROOT. tools/device-check.sh then builds against ROOT
# (PKG_CONFIG, PKG_CONFIG_LIBDIR, LD_LIBRARY_PATH, LIBRARY_PATH, CPATH, -rpath-link).
# dpkg-deb where there is one, else ar and tar (a package is an ar archive holding data.tar.*).
set -eu
[ $# -eq 2 ] || { echo "usage: device-check-deps.sh DEBS_DIR ROOT" >&2; exit 2; }
debs=$1
root=$2
mkdir -p "$root"
root=$(cd "$root" && pwd)
count=0
for deb in "$debs"/*.deb; do
    [ -e "$deb" ] || { echo "device-check-deps: no .deb in $debs" >&2; exit 1; }
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$deb" "$root"
    else
        tmp=$(mktemp -d)
        (cd "$tmp" && ar x "$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")" &&
            tar -xf data.tar.* -C "$root")
        rm -rf "$tmp"
    fi
    count=$((count + 1))
done
# The .pc files say prefix=/usr: point them into ROOT. Requires.private names packages that
# only a static link needs (libmicrohttpd's gnutls) and that are not here: drop it.
pcs=$(find "$root" -name '*.pc' -path '*pkgconfig*')
for pc in $pcs; do
    sed -i -e "s|/usr|$root/usr|g" -e '/^Requires.private:/d' "$pc"
done
echo "device-check-deps: $count packages unpacked into $root; $(echo "$pcs" | wc -w) pkg-config files:"
for pc in $pcs; do basename "$pc" .pc; done | sort | tr '\n' ' '
echo
