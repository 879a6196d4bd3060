#!/usr/bin/env bash
# queue.sh - the queue's two numbers (issue 29, docs/queue.md):
#   1. from a card's release to the queued instance's container running,
#      against a direct create made at that moment (bench/queue.py; target
#      <= 1.2x), through a gpuboxd with one simulated card and a dockerd
#      with the fake nvidia hook (as bench/create.sh);
#   2. the dispatcher's decision time with 10,000 queued requests on 1,000
#      nodes of 8 cards (bench/queue_bench.c: sched/placement_queue.h's
#      order and pass; target <= 10 ms), no gpuboxd and no Docker.
#
# Usage: bench/queue.sh BUILD_DIR   (env: ROUNDS=10 GPUBOX_TEST_IMAGE=gpubox-test:latest,
#   ONLY=release|decide to run one of the two)
#   queue_bench is built only in a non-Debug tree; without it part 2 says so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: queue.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
rounds=${ROUNDS:-10}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
only=${ONLY:-}

work=$(mktemp -d)
cleanup() {
    gpuboxd_stop
    [ "$only" = decide ] || testimage_remove_if_created "$image"
    rm -rf "$work"
}
trap cleanup EXIT

if [ "$only" != decide ]; then
    testimage_ensure "$image"
    gpuboxd_start "$build" "$work" --simulate-gpus 1xA100-80GB --port-range 61300-61349
    /usr/bin/python3 "$here/queue.py" "$GPUBOXD_URL" "$image" "$rounds"
    gpuboxd_stop
fi
if [ "$only" != release ]; then
    if [ -x "$build/queue_bench" ]; then
        "$build/queue_bench"
    else
        echo "queue.sh: $build/queue_bench is missing (a non-Debug build makes it)" >&2
    fi
fi
