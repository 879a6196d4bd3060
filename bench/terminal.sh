#!/usr/bin/env bash
# terminal.sh - the terminal's keystroke-to-echo round trip (docs/access.md,
# "How fast"): one byte to a Docker exec of `cat` with a TTY and the TTY's
# echo back, four ways in the same run (bench/terminal_bench.c, built here
# with cc, does the timing in C and prints the ratios):
#   direct   Docker's own hijacked exec stream over its unix socket;
#   relay    the same through a bare forwarder process (TCP loopback to
#            Docker's socket, blocking recv/send, a thread per direction),
#   relay-poll  and through one with a single thread polling both sockets:
#            the better of the two is the floor for any server between a
#            TCP client and Docker;
#   gpuboxd  gpuboxd's terminal WebSocket (target: at most 1.2x direct).
# Measure a release build (make build-opt, or cmake -DCMAKE_BUILD_TYPE=Release):
# the ASan test build adds its own cost to every message. RUNS runs one
# after another, each reporting its own medians (note `uptime` with them).
#
# Usage: bench/terminal.sh BUILD_DIR      e.g. RUNS=5 bench/terminal.sh build/opt-Release
#   env: ROUNDS=1000 RUNS=1 GPUBOX_TEST_IMAGE=gpubox-test:latest
#        DOCKER_HOST (a unix:// socket; default /var/run/docker.sock)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: terminal.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
rounds=${ROUNDS:-1000}
runs=${RUNS:-1}
docker_host=${DOCKER_HOST:-unix:///var/run/docker.sock}
case $docker_host in
unix://*) docker_sock=${docker_host#unix://} ;;
*) echo "terminal.sh: DOCKER_HOST must be a unix:// socket" >&2; exit 1 ;;
esac
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
name=benchterm$$

work=$(mktemp -d)
cleanup() {
    [ -n "${GPUBOXD_URL:-}" ] && curl -fsS -o /dev/null -X DELETE \
        "$GPUBOXD_URL/api/v1/replicaSet/$name?purge=true" 2>/dev/null || true
    gpuboxd_stop
    testimage_remove_if_created "$image"
    rm -rf "$work"
}
trap cleanup EXIT

${CC:-cc} -O2 -std=c11 -Wall -Wextra -pthread -o "$work/terminal_bench" "$here/terminal_bench.c"
testimage_ensure "$image"
gpuboxd_start "$build" "$work" --simulate-gpus 1xA100-80GB --port-range 61300-61309
curl -fsS -o /dev/null -H 'Content-Type: application/json' -d \
    "{\"imageName\":\"$image\",\"replicaSetName\":\"$name\",\"cmd\":[\"sleep\",\"3600\"]}" \
    "$GPUBOXD_URL/api/v1/replicaSet"
for run in $(seq 1 "$runs"); do
    echo "run $run/$runs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$work/terminal_bench" "$docker_sock" "$name-1" "${GPUBOXD_URL#http://}" "$name" "$rounds"
done
