#!/usr/bin/env bash
# cuda.sh - the time libgpubox-cuda.so (src/cuda/) adds to each CUDA
# allocation and free, measured against the fake driver
# (<build>/fakes/libcuda.so.1): cuda_probe's `bench KIND N` makes N
# alloc+free pairs of 1 MiB through cuGetProcAddress_v2's entry points, as
# a libcudart 12 program does, and prints nanoseconds of CPU time per pair
# (CPU time: the machine may be shared).
#
# Rows, in rounds interleaved so that machine noise hits all alike:
#   baseline   no library (the fake driver alone: a lock, a table entry)
#   limited    the library preloaded, the card named in the limits file:
#              limits stat, current device, budget lock and charge,
#              allocation table, then the refund on free
#   unlimited  the library preloaded, a card the limits file does not
#              name (a stat and the pass-through)
# for cuMemAlloc_v2/cuMemFree_v2 (KIND mem) and cuMemCreate/cuMemRelease
# (KIND create). Each row prints the median ns per pair over ROUNDS
# rounds, the ns the library adds to a pair, and the ratio to the baseline.
# The budget is a file on tmpfs when /dev/shm exists (as gpuboxd's
# per-container directory would be), else in the temporary directory.
#
# Target (reported, never enforced): under 1 us added per call.
# On a GPU host the real driver's own time dominates; this is the
# library's share of it.
#
# Usage: bench/cuda.sh BUILD_DIR
#   BUILD_DIR must have the fake driver: a non-Debug build or a test build.
#   env: PAIRS=200000 (per round), ROUNDS=7
set -euo pipefail
build=$(cd "${1:?usage: cuda.sh BUILD_DIR}" && pwd)
probe=$build/fakes/cuda_probe
lib=$build/cuda/libgpubox-cuda.so
if [ ! -x "$probe" ] || [ ! -f "$lib" ]; then
    echo "cuda.sh: $probe or $lib is missing: build a release tree, e.g." >&2
    echo "  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build/release" >&2
    exit 1
fi
pairs=${PAIRS:-200000}
rounds=${ROUNDS:-7}

base=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
work=$(mktemp -d "$base/gpubox-cuda-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/limits" "$work/budget"
cat >"$work/gpus" <<'GPUS'
0 GPU-aaaaaaaa-0000-4000-8000-000000000000 81920 ok Fake A100
1 GPU-bbbbbbbb-1111-4000-8000-000000000001 81920 ok Fake A100
GPUS
echo "GPU-aaaaaaaa-0000-4000-8000-000000000000 40960" >"$work/limits/limits"

# run ROW KIND: one round's ns per pair.
run() {
    local row=$1 kind=$2 dev=0 preload=""
    case $row in
        limited) preload=$lib ;;
        unlimited) preload=$lib dev=1 ;;
    esac
    env -i LD_LIBRARY_PATH="$build/fakes" GPUBOX_FAKE_GPUS="$work/gpus" GPUBOX_CUDA_DIR="$work" \
        ${preload:+LD_PRELOAD=$preload} "$probe" --device "$dev" bench "$kind" "$pairs" |
        sed -n 's/^bench //p'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-8s %-10s %12s %12s %8s\n' kind row ns/pair added/pair ratio
for kind in mem create; do
    declare -A samples=()
    for _ in $(seq 1 "$rounds"); do
        for row in baseline limited unlimited; do
            samples[$row]+="$(run "$row" "$kind") "
        done
    done
    b=$(echo "${samples[baseline]}" | tr ' ' '\n' | grep . | median)
    for row in baseline limited unlimited; do
        m=$(echo "${samples[$row]}" | tr ' ' '\n' | grep . | median)
        awk -v k="$kind" -v r="$row" -v m="$m" -v b="$b" \
            'BEGIN { printf "%-8s %-10s %12.1f %12.1f %8.2f\n", k, r, m, m - b, m / b }'
    done
    unset samples
done
echo "(added/pair is one allocation plus one free; per call it is about half)"
