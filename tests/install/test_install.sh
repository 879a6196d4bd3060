#!/usr/bin/env bash
# test_install.sh - install gpubox as an operator would (docs/install.md),
# into scratch directories only: `make deb` and `make install` from a build
# directory, then every installed file checked.
#
# - the package: its control fields (version, architecture, Depends on the
#   libraries' packages, Recommends docker), conffiles, md5sums and
#   maintainer scripts (which never start, enable or restart gpuboxd);
# - its files, extracted with dpkg-deb -x: exactly the expected list; both
#   programs run from there and print the build's version; both man pages
#   render without a warning, gpuboxd.8 has an entry for every option of
#   `gpuboxd --help` and names no other, gpubox.1 is `gpubox help --man`;
#   bash sources the completion and it offers gpubox's commands; gpuboxd
#   accepts every key of the example config file;
# - the unit: `systemd-analyze verify` against a root made of the machine's
#   own systemd units and the package, with nothing to say (ExecStart must
#   resolve inside the root, man:gpuboxd(8) inside its man pages);
# - `make install DESTDIR=... PREFIX=/usr` installs the same files;
#   PREFIX=/usr/local gives a unit naming /usr/local's paths, which verifies
#   too; installing again keeps an edited config file.
#
# Needs no Docker and no root, and touches no file outside its scratch
# directory (except BUILD_DIR/install/gpuboxd.service, which every install
# rewrites). The `build` step of `make install` and `make deb` is skipped
# (make -o build): BUILD_DIR is installed as it is.
#
# Usage: tests/install/test_install.sh BUILD_DIR
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
cd "$gpubox_root"
started=$SECONDS

work=$(mktemp -d "${TMPDIR:-/tmp}/gpubox-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

failures=0
fail() {
    echo "test_install: FAIL: $*" >&2
    failures=$((failures + 1))
}
die() {
    echo "test_install: FAIL: $*" >&2
    exit 1
}
# same WHAT EXPECTED ACTUAL: a failure shows a diff (- expected, + actual).
same() {
    [ "$2" = "$3" ] || fail "$1:"$'\n'"$(diff -u <(echo "$2") <(echo "$3") | tail -n +4)"
}

for tool in dpkg-deb dpkg-shlibdeps systemd-analyze man md5sum; do
    command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh test installs it)"
done
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
[ -n "$version" ] || die "no project version in $build/CMakeCache.txt"

# The files a package (and make install PREFIX=/usr) puts in place.
expected_files="/etc/gpubox/gpuboxd.conf
/usr/bin/gpubox
/usr/lib/gpubox/libgpubox-cuda.so
/usr/lib/systemd/system/gpuboxd.service
/usr/sbin/gpuboxd
/usr/share/bash-completion/completions/gpubox
/usr/share/doc/gpubox/examples/gpuboxd.conf
/usr/share/man/man1/gpubox.1
/usr/share/man/man8/gpuboxd.8"
files_under() { (cd "$1" && find . -path ./DEBIAN -prune -o \( -type f -o -type l \) -print | sed 's|^\.||' | sort); }

# ---- make deb ----
echo "test_install: make deb ($build)"
make --no-print-directory -o build deb BUILD_RELEASE="$build" DEB_DIR="$work/deb" >"$work/deb.log" 2>&1 ||
    { cat "$work/deb.log" >&2; die "make deb failed"; }
deb=$work/deb/gpubox_${version}_${arch}.deb
[ -f "$deb" ] || die "make deb made no $deb: $(ls "$work/deb")"

field() { dpkg-deb -f "$deb" "$1"; }
same "Package" gpubox "$(field Package)"
same "Version" "$version" "$(field Version)"
same "Architecture" "$arch" "$(field Architecture)"
same "Recommends" "docker.io | docker-ce" "$(field Recommends)"
depends=$(field Depends)
for pkg in libc6 libcurl4 libjansson4 libmicrohttpd12 libsqlite3-0 e2fsprogs; do
    [[ ", $depends," =~ ,\ ${pkg}[\ ,] ]] || fail "Depends lacks $pkg: $depends"
done
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
[ -n "$(field Description)" ] || fail "no Description"
dpkg-deb -c "$deb" | awk '$2 != "root/root" { print; bad = 1 } END { exit bad }' ||
    fail "files in the package not owned by root/root (above)"

dpkg-deb -e "$deb" "$work/control"
same "conffiles" /etc/gpubox/gpuboxd.conf "$(cat "$work/control/conffiles")"
for script in postinst prerm postrm; do
    f=$work/control/$script
    if [ ! -x "$f" ]; then
        fail "no executable $script"
        continue
    fi
    sh -n "$f" || fail "$script: sh -n"
    ! grep -Ev '^\s*(#|echo)' "$f" | grep -E 'systemctl +(-[-a-z]+ +)*(start|enable|restart|try-restart|reload-or-restart)' ||
        fail "$script starts, enables or restarts gpuboxd (above); the operator does"
    grep -q -- '-d /run/systemd/system' "$f" || fail "$script calls systemctl without checking systemd runs"
done

# ---- the package's files ----
root=$work/root
dpkg-deb -x "$deb" "$root"
same "files in the package" "$expected_files" "$(files_under "$root")"
(cd "$root" && md5sum --quiet -c "$work/control/md5sums") || fail "md5sums do not match the files"

same "gpuboxd --version" "gpuboxd $version (API v1)" "$("$root/usr/sbin/gpuboxd" --version)"
# `gpubox version` prints the client's version even when no gpuboxd answers.
cli_version=$(GPUBOX_HOST=http://127.0.0.1:9 "$root/usr/bin/gpubox" version 2>/dev/null | head -1) || true
same "gpubox version" "client   gpubox $version" "$cli_version"

# Man pages: they render without a warning and start as they should.
for page in man1/gpubox.1 man8/gpuboxd.8; do
    f=$root/usr/share/man/$page
    name=$(basename "${page%.*}")
    out=$(MANWIDTH=80 man --warnings -l "$f" 2>"$work/man.err") || fail "man -l $page failed"
    [ ! -s "$work/man.err" ] || fail "man -l $page warns: $(cat "$work/man.err")"
    grep -qE "^ +$name - " <<<"$out" || fail "$page: no NAME line '$name - ...'"
done
same "gpubox.1 (gpubox help --man)" "$("$root/usr/bin/gpubox" help --man)" \
    "$(cat "$root/usr/share/man/man1/gpubox.1")"
# gpuboxd.8: an entry (a .TP tag) for each option of --help, no other option named.
page=$root/usr/share/man/man8/gpuboxd.8
help_flags=$("$root/usr/sbin/gpuboxd" --help | grep -oE '^  --[a-z0-9-]+' | sed 's/^ *//' | sort -u)
man_opts() { grep -oE '\\-\\-[a-z0-9]+(\\-[a-z0-9]+)*' | sed 's/\\//g' | sort -u; }
tagged=$(awk 'tag { print; tag = 0 } /^\.TP/ { tag = 1 }' "$page" | man_opts)
same "options with an entry in gpuboxd.8 (vs gpuboxd --help)" "$help_flags" "$tagged"
# (in the examples, only the lines running gpuboxd: not `systemctl --now`)
unknown=$(comm -13 <(echo "$help_flags") <(awk '/^\.EX/ { ex = 1 } /^\.EE/ { ex = 0 }
    !ex || /^gpuboxd / { print }' "$page" | man_opts))
[ -z "$unknown" ] || fail "gpuboxd.8 names options gpuboxd does not have: $unknown"

# The completion: bash sources it without a word, and `gpubox <TAB>` offers
# the commands of `gpubox --help` (and the global options).
completion=$root/usr/share/bash-completion/completions/gpubox
complete_words() {
    bash --norc --noprofile -c 'source "$1" || exit 1; complete -p gpubox >/dev/null || exit 1
        COMP_WORDS=(gpubox "${@:2}"); COMP_CWORD=$(($# - 1)); COMP_LINE="gpubox ${*:2}"
        _gpubox; printf "%s\n" "${COMPREPLY[@]}"' completion "$completion" "$@" 2>&1 >"$work/words" |
        sed 's/^/bash: /'
    grep -v '^-' "$work/words" | sort -u
}
help_text=$("$root/usr/bin/gpubox" --help)
commands=$(sed -n '/^Commands:/,/^$/p' <<<"$help_text" | awk 'NR > 1 && NF { print $1 }' | sort -u)
same "gpubox <TAB> (vs gpubox --help)" "$commands" "$(complete_words "")"
volume_subs=$(awk '$1 == "volume" { print $2 }' <<<"$help_text" | sort -u)
same "gpubox volume <TAB> (vs gpubox --help)" "$volume_subs" "$(complete_words volume "")"

# The config file: the same as the example; gpuboxd accepts every default
# (the `#key = value` lines, uncommented) and knows every key of the
# `# e.g. key = value` lines. A good file gets gpuboxd as far as its data
# dir (here one that cannot be made), a bad one stops it before.
conf=$root/etc/gpubox/gpuboxd.conf
cmp -s "$conf" "$root/usr/share/doc/gpubox/examples/gpuboxd.conf" ||
    fail "etc/gpubox/gpuboxd.conf differs from the example in share/doc"
sed -E 's/^#([a-z])/\1/' "$conf" >"$work/defaults.conf"
grep -qE '^[a-z]' "$work/defaults.conf" || fail "the config file shows no default"
rc=0
timeout 20 "$root/usr/sbin/gpuboxd" --config "$work/defaults.conf" --data-dir /dev/null/gpubox \
    >/dev/null 2>"$work/conf.err" || rc=$?
if [ $rc != 2 ] || ! grep -q 'cannot create data dir /dev/null/gpubox' "$work/conf.err"; then
    fail "gpuboxd refuses the config file's defaults (exit $rc): $(cat "$work/conf.err")"
fi
example_keys=$(sed -nE 's/^# e\.g\. ([a-z0-9-]+) = .*/--\1/p' "$conf" | sort -u)
[ -n "$example_keys" ] || fail "the config file has no '# e.g. key = value' line"
unknown=$(comm -13 <(echo "$help_flags") <(echo "$example_keys"))
[ -z "$unknown" ] || fail "the config file's examples use keys gpuboxd does not have: $unknown"

# verify_unit LABEL INSTALL_ROOT UNIT_PATH: systemd-analyze verify UNIT_PATH
# (as seen inside the root) against the machine's systemd units plus
# INSTALL_ROOT; any message fails.
verify_unit() {
    local sysroot=$work/sysroot-$1 units
    for units in /usr/lib/systemd/system /lib/systemd/system; do
        [ -e "$units/sysinit.target" ] && break
    done
    [ -e "$units/sysinit.target" ] || die "no systemd units on this machine (package systemd)"
    mkdir -p "$sysroot/usr/lib/systemd"
    cp -a "$units" "$sysroot/usr/lib/systemd/"
    cp -a "$2/." "$sysroot/"
    local out rc=0
    out=$(MANPATH=$sysroot/usr/share/man:$sysroot/usr/local/share/man \
        systemd-analyze verify --root="$sysroot" "$3" 2>&1) || rc=$?
    echo "test_install: systemd-analyze verify ($1): exit $rc${out:+, }${out:-, nothing to say}"
    [ $rc = 0 ] && [ -z "$out" ] && return
    fail "systemd-analyze verify $3 ($1): exit $rc: $out"
}
unit=$root/usr/lib/systemd/system/gpuboxd.service
grep -qx 'ExecStart=/usr/sbin/gpuboxd --config /etc/gpubox/gpuboxd.conf' "$unit" ||
    fail "the unit's ExecStart: $(grep ExecStart= "$unit")"
verify_unit package "$root" /usr/lib/systemd/system/gpuboxd.service

# ---- make install ----
echo "test_install: make install DESTDIR=... PREFIX=/usr"
inst=$work/install-usr
make --no-print-directory -o build install BUILD_RELEASE="$build" DESTDIR="$inst" PREFIX=/usr \
    >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; die "make install failed"; }
same "files of make install PREFIX=/usr (vs the package)" "$expected_files" "$(files_under "$inst")"
while read -r f; do
    if [[ $f == *.so ]]; then # stripped in the package; a library, not a program
        [ -r "$inst$f" ] || fail "make install: $f is not readable"
    elif [[ $f == */bin/* || $f == */sbin/* ]]; then # stripped in the package
        [ -x "$inst$f" ] || fail "make install: $f is not executable"
    else
        cmp -s "$inst$f" "$root$f" || fail "make install: $f differs from the package's"
    fi
done <<<"$expected_files"

echo "test_install: make install DESTDIR=... PREFIX=/usr/local, twice"
local_root=$work/install-local
make --no-print-directory -o build install BUILD_RELEASE="$build" DESTDIR="$local_root" \
    PREFIX=/usr/local >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; die "make install failed"; }
unit=$local_root/usr/local/lib/systemd/system/gpuboxd.service
grep -qx 'ExecStart=/usr/local/sbin/gpuboxd --config /usr/local/etc/gpubox/gpuboxd.conf' "$unit" ||
    fail "PREFIX=/usr/local: the unit's ExecStart: $(grep ExecStart= "$unit" 2>&1)"
[ -f "$local_root/usr/local/etc/gpubox/gpuboxd.conf" ] || fail "PREFIX=/usr/local: no etc/gpubox/gpuboxd.conf"
verify_unit usr-local "$local_root" /usr/local/lib/systemd/system/gpuboxd.service
echo "listen = 127.0.0.1:2379" >>"$local_root/usr/local/etc/gpubox/gpuboxd.conf"
make --no-print-directory -o build install BUILD_RELEASE="$build" DESTDIR="$local_root" \
    PREFIX=/usr/local >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; die "make install failed"; }
grep -qx 'listen = 127.0.0.1:2379' "$local_root/usr/local/etc/gpubox/gpuboxd.conf" ||
    fail "installing again replaced the edited etc/gpubox/gpuboxd.conf"

if [ $failures -gt 0 ]; then
    echo "test_install: $failures check(s) FAILED" >&2
    exit 1
fi
echo "test_install: passed in $((SECONDS - started))s"
