#!/usr/bin/env bash
# patch.sh - a whole GPU patch through gpuboxd's API (PATCH
# /api/v1/replicaSet/{name}: new container created, old one stopped, system
# disk carried, new one started, old one removed, journal and store
# updated), side by side in one run with
#   - gpu-docker-api's way of carrying the disk: `cp -a` of the old
#     container's merged directory, from a warm page cache (the copy's best
#     case) and from a cold one (sync; echo 3 > /proc/sys/vm/drop_caches;
#     needs root: without it only warm rows are printed);
#   - Docker's floor: create + start + stop + rm of a container with the
#     very config gpuboxd gave the set's container, straight through the
#     Engine API, no gpubox: what any patch pays Docker.
# Cases: 0 B, 100 MB, 1 GB and 4 GB (when the disk has room for it twice)
# written into the system disk as one big file, and the same sizes as many
# small files (SMALL_FILE_KB, 50 KB: 1 GB is 20971 files in nested
# directories, like a pip or conda environment), plus a set whose command
# is an interactive shell (CMD /bin/sh), whose stop Docker would make wait
# 10 s. Each cell is the median of ROUNDS patches (cold: each after a
# cache drop, which also makes Docker and gpuboxd read their own files
# again). bench/patch.py does the work; bench/carry.sh times the carry
# step alone over more rounds.
#
# Columns: patch (whole patch, request to answer), carry (the carry step
# alone, as the patch reports it), cp -a, cp/patch, floor, gda est (floor +
# cp -a: gpu-docker-api's whole patch, estimated), gda/patch, cp/carry; and
# per journal step, the median ms (GET /api/v1/operations/{id}).
#
# Targets (reported, never enforced):
#   growth: the patch at 1 GB within 2x of the patch at 0 B;
#   20x:    read against cp/patch, the copy alone over our whole patch (as
#           the issue words it: the patch at least 20x faster than the copy
#           at 1 GB). It is printed met or missed for every case. Our patch
#           cannot go below Docker's floor (about 0.3 s here), so it is met
#           only where the copy takes 20 times that; cp/carry, the carry
#           step against the copy, is where the 20x holds everywhere.
#
# Usage: bench/patch.sh BUILD_DIR
#   env: ROUNDS=5, SIZES_MB="0 100 1024 [4096]", SHAPES="big small",
#        SMALL_FILE_KB=50, SHELL_CASE=1, GPUBOX_TEST_IMAGE,
#        CARRY_METHOD=auto (gpuboxd's --carry-method)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: patch.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
DOCKER=${DOCKER:-/usr/bin/docker}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
rounds=${ROUNDS:-5}
tag=gbbenchpatch$$ # every set and container of this run is named tag...

work=$(mktemp -d /var/tmp/gbbench-patch.XXXXXX)
cleanup() {
    gpuboxd_stop
    local ids
    ids=$("$DOCKER" ps -aq --filter "name=^/$tag" 2>/dev/null || true)
    [ -n "$ids" ] && "$DOCKER" rm -f $ids >/dev/null 2>&1
    testimage_remove_if_created "$image"
    rm -rf "$work"
}
trap cleanup EXIT

docker_root=$("$DOCKER" info --format '{{.DockerRootDir}}')
avail_mb=$(df --output=avail -BM "$docker_root" | tail -n1 | tr -dc 0-9)
sizes=${SIZES_MB:-}
if [ -z "$sizes" ]; then
    sizes="0 100 1024"
    if [ "$avail_mb" -gt $((4096 * 2 + 4096)) ]; then
        sizes="$sizes 4096"
    else
        echo "(4 GB skipped: ${avail_mb} MB free under $docker_root)"
    fi
fi

testimage_ensure "$image"
gpuboxd_start "$build" "$work" --simulate-gpus 2xA100-80GB --port-range 64400-64409 \
    --carry-method "${CARRY_METHOD:-auto}"

export ROUNDS=$rounds SIZES_MB=$sizes BENCH_TAG=$tag
/usr/bin/python3 "$here/patch.py" "$GPUBOXD_URL" "$image" "$work"
