#!/usr/bin/env bash
# install-deps.sh - install every Debian package gpubox needs to build, run,
# test and benchmark. Idempotent: packages already installed are skipped, and
# apt-get runs only when something is missing.
#
# Usage: scripts/install-deps.sh [build|run|test|bench|all]   (default: all)
set -euo pipefail

# libyaml-dev: the build converts docs/openapi.yaml to JSON with it
# (src/tools/yaml2json.c); gpuboxd itself does not link it. nettle-dev: the
# SHA-256 of API users' tokens (src/util/token.c). nodejs (and npm) build
# the web console (web/: `npm ci`, then Vite; scripts/web-build.sh), which
# gpuboxd embeds. libzstd-dev: a move's data compressed between the nodes
# of a fleet (--move-compress).
build_pkgs=(build-essential cmake pkg-config libmicrohttpd-dev libcurl4-openssl-dev
            libjansson-dev libsqlite3-dev libcmocka-dev libyaml-dev nettle-dev libzstd-dev nodejs)
run_pkgs=(docker.io e2fsprogs xfsprogs util-linux iproute2)
# clang brings libFuzzer (tests/fuzz); openssl makes the TLS tests' certificate;
# nodejs also runs the OpenAPI validator (tools/openapi, from the npm
# registry) and the console's tests (web/: Vitest, and playwright-core
# driving Debian's chromium headless; fonts-dejavu-core gives its pages a
# font);
# prometheus brings promtool, which checks GET /metrics. The install test
# (tests/install) renders the man pages with man-db and checks the unit
# with systemd-analyze against systemd's own units (package systemd; it is
# not started); `make deb` needs only dpkg-dev, from build-essential. The
# test sandboxes and the fleet tests (scripts/lib/netns-dockerd.sh,
# fleet-net.sh) need ip and bridge (iproute2) and nsenter (util-linux), in
# run_pkgs, and iptables (a partition of one node; docker.io pulls it in
# too, but the tests call it themselves). The image tests
# (tests/e2e/test_images.py) run a registry of their own (docker-registry)
# and write its htpasswd file with htpasswd -B (apache2-utils).
# tests/e2e/test_ssh.py builds an image around dropbear-bin's server and
# logs in with openssh-client's ssh.
test_pkgs=(busybox-static python3 python3-pytest etcd-server clang openssl prometheus
           man-db systemd iptables chromium fonts-dejavu-core docker-registry apache2-utils
           dropbear-bin openssh-client)
# The store, placement and fleet benchmarks start an etcd; the create and
# fleet ones import the busybox test image and drive gpuboxd from Python.
# The console's benchmark (bench/web.sh) drives chromium.
bench_pkgs=(wrk nginx-light curl etcd-server busybox-static python3 chromium fonts-dejavu-core)

case "${1:-all}" in
build) want=("${build_pkgs[@]}") ;;
run) want=("${build_pkgs[@]}" "${run_pkgs[@]}") ;;
test) want=("${build_pkgs[@]}" "${run_pkgs[@]}" "${test_pkgs[@]}") ;;
bench) want=("${build_pkgs[@]}" "${run_pkgs[@]}" "${bench_pkgs[@]}") ;;
all) want=("${build_pkgs[@]}" "${run_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
*) echo "usage: $0 [build|run|test|bench|all]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
# Debian's nodejs comes without npm (NodeSource's has it built in).
if [[ " ${want[*]} " == *" nodejs "* ]] && ! command -v npm >/dev/null &&
    ! printf '%s\n' "${missing[@]}" | grep -qx npm; then
    missing+=(npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}; run as root (or install them) and retry" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# nginx-light's post-install starts nginx on port 80; gpubox's benchmark starts
# its own instance, so keep the packaged one from starting where we can.
if printf '%s\n' "${missing[@]}" | grep -q '^nginx'; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -q --no-install-recommends "${missing[@]}"
