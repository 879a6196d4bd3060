#!/usr/bin/env bash
# terminal.sh - the terminal's keystroke-to-echo round trip (docs/access.md):
# one byte through gpuboxd's WebSocket to a Docker exec with a TTY and its
# echo back, against the same exec reached through Docker's own hijacked
# stream, measured in the same run (bench/terminal.py does the timing and
# prints the ratio; target: at most 1.2x). Measure a release build (make
# build-opt): the ASan test build adds its own cost to every message.
# gpuboxd is one more hop each way; docs/access.md ("How fast") gives the
# figures and what a trace of the terminal's thread shows.
#
# Usage: bench/terminal.sh BUILD_DIR   (env: ROUNDS=500 GPUBOX_TEST_IMAGE=gpubox-test:latest)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: terminal.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
rounds=${ROUNDS:-500}
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

testimage_ensure "$image"
gpuboxd_start "$build" "$work" --simulate-gpus 1xA100-80GB --port-range 61300-61309
curl -fsS -o /dev/null -H 'Content-Type: application/json' -d \
    "{\"imageName\":\"$image\",\"replicaSetName\":\"$name\",\"cmd\":[\"sleep\",\"3600\"]}" \
    "$GPUBOXD_URL/api/v1/replicaSet"
/usr/bin/python3 "$here/terminal.py" "$GPUBOXD_URL" "$name" "$name-1" "$rounds"
