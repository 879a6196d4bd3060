#!/usr/bin/env bash
# create.sh - replica-set create latency through gpuboxd against the same
# container created and started by direct Docker Engine API calls, side by
# side in one run (bench/create.py does the timing and prints the ratio).
#
# gpuboxd runs with 8 simulated GPUs (the dockerd needs the fake nvidia hook,
# as bench/run.sh and scripts/test.sh start it); every container made is
# removed afterwards.
#
# Usage: bench/create.sh BUILD_DIR   (env: ROUNDS=20 GPUBOX_TEST_IMAGE=gpubox-test:latest)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: create.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
rounds=${ROUNDS:-20}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}

work=$(mktemp -d)
cleanup() {
    gpuboxd_stop
    testimage_remove_if_created "$image"
    rm -rf "$work"
}
trap cleanup EXIT

testimage_ensure "$image"
gpuboxd_start "$build" "$work" --simulate-gpus 8xA100-80GB --port-range 61200-61299
/usr/bin/python3 "$here/create.py" "$GPUBOXD_URL" "$image" "$rounds"
