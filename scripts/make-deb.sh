#!/usr/bin/env bash
# make-deb.sh - build the Debian package of gpubox from a build directory, as
# `make deb` does: `cmake --install` (prefix /usr, stripped) into a staging
# root, then packaging/deb/ (control, maintainer scripts) and dpkg-deb.
#
# Depends lists the packages of the shared libraries the programs link,
# found by dpkg-shlibdeps (dpkg-dev), plus e2fsprogs, whose mkfs.ext4,
# e2fsck and resize2fs make the default (loop, ext4) volumes. Docker is
# only recommended: gpuboxd may use one on another host (--docker-host).
# /etc/gpubox/gpuboxd.conf is a conffile.
#
# Usage: scripts/make-deb.sh BUILD_DIR OUT_DIR   (prints the package's path)
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: make-deb.sh BUILD_DIR OUT_DIR}" && pwd)
out=${2:?usage: make-deb.sh BUILD_DIR OUT_DIR}
umask 022

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
[ -n "$version" ] || { echo "make-deb: no project version in $build/CMakeCache.txt" >&2; exit 1; }
arch=$(dpkg --print-architecture)

# The staging root is where dpkg-shlibdeps expects a package's files:
# debian/gpubox, with its DEBIAN, beside a debian/control (a minimal one
# will do).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/debian/gpubox
DESTDIR=$root cmake --install "$build" --prefix /usr --strip >"$work/install.log" ||
    { cat "$work/install.log" >&2; exit 1; }
mkdir -p "$root/DEBIAN"

printf 'Source: gpubox\n\nPackage: gpubox\nArchitecture: any\n' >"$work/debian/control"
shlibs=$(cd "$work" &&
    dpkg-shlibdeps -O debian/gpubox/usr/sbin/gpuboxd debian/gpubox/usr/bin/gpubox | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "make-deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$size/" \
    -e "s/@SHLIBS@/$shlibs/" "$gpubox_root/packaging/deb/control.in" >"$root/DEBIAN/control"
(cd "$root" && find etc -type f | sed 's|^|/|' | sort) >"$root/DEBIAN/conffiles"
install -m 0755 "$gpubox_root"/packaging/deb/{postinst,prerm,postrm} "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort |
    xargs md5sum) >"$root/DEBIAN/md5sums"

mkdir -p "$out"
deb=$out/gpubox_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
