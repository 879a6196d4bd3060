#!/usr/bin/env bash
# list.sh - GET /api/v1/replicaSet with N instances (default 500), against
# dockerd's own GET /containers/json?all=1 measured in the same run (the
# baseline: what listing Docker's containers costs on every request, which
# the list no longer does: it answers from the store and the container
# cache kept by Docker's events, src/service/container_watch.c).
# With BEFORE=OTHER_BUILD_DIR the same list is timed on that build's
# gpuboxd too, over the same store and containers (a "before" row).
# The instances are real replica sets (busybox, no GPU), made through the
# API by 8 clients at once and removed afterwards. Numbers are printed,
# never checked.
#
# Usage: bench/list.sh BUILD_DIR   (env: INSTANCES=500 ROUNDS=20 BEFORE=
#        GPUBOX_TEST_IMAGE=gpubox-test:latest)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: list.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
instances=${INSTANCES:-500}
rounds=${ROUNDS:-20}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
before=${BEFORE:-}

work=$(mktemp -d)
flags=(--simulate-gpus 8xA100-80GB --port-range 61400-61499)
cleanup() {
    gpuboxd_stop
    if gpuboxd_start "$build" "$work" "${flags[@]}" 2>/dev/null; then
        /usr/bin/python3 "$here/list.py" make "$GPUBOXD_URL" "$image" 0 || true
        gpuboxd_stop
    fi
    testimage_remove_if_created "$image"
    rm -rf "$work"
}
trap cleanup EXIT

testimage_ensure "$image"
gpuboxd_start "$build" "$work" "${flags[@]}"
echo "making $instances instances..."
/usr/bin/python3 "$here/list.py" make "$GPUBOXD_URL" "$image" "$instances"
/usr/bin/python3 "$here/list.py" time "$GPUBOXD_URL" "$rounds" "this build" | tee "$work/after.txt"
if [ -n "$before" ]; then
    gpuboxd_stop
    gpuboxd_start "$(cd "$before" && pwd)" "$work" "${flags[@]}"
    /usr/bin/python3 "$here/list.py" time "$GPUBOXD_URL" "$rounds" "BEFORE build" | tee "$work/before.txt"
fi
