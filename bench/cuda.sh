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
#
# Then the same three rows for kernel launches (cuLaunchKernel through
# cuGetProcAddress_v2, `bench_launch kernel N`, ns per launch): "limited"
# is a card with a compute share (cores=50) that NVML reports idle, so no
# launch is delayed and what is measured is the gate itself (the current
# device, the share, the rate limiter's token, a utilization sample every
# 100 ms); "unlimited" a card without a share (a coarse clock read).
#
# Last, the start-up cost (`init`: the wall time from loading the driver
# through cuInit, cuCtxCreate and the first allocation, free and launch,
# in a fresh process each round): with the library that includes its
# first-call work (reading the limits file, mapping the budget, the card's
# UUID). Target: under 1 ms added (HAMi-core's is about 84 ms in
# GPU-Virt-Bench).
# The fake NVML lists the process with 300 MiB of context memory on each
# card (its `context` lines), so "limited" also pays for the context
# memory (NVML's per-process list asked at the first allocation, then at
# most once a second: a coarse clock read and a lock per call). As in a
# gpuboxd container, NVML lists it under a host PID (the fake's hostpids
# line) that the library finds through the pids file (limits/pids, read
# when NVML is asked: a stat when it did not change).
# The budget is a file on tmpfs when /dev/shm exists (as gpuboxd's
# per-container directory would be), else in the temporary directory.
#
# Targets (reported, never enforced): under 1 us added per call, under
# 1 ms added to start-up.
# On a GPU host the real driver's own time dominates; this is the
# library's share of it.
#
# Usage: bench/cuda.sh BUILD_DIR
#   BUILD_DIR must have the fake driver: a non-Debug build or a test build.
#   env: PAIRS=200000 (per round), LAUNCHES=1000000 (per round), ROUNDS=7
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
launches=${LAUNCHES:-1000000}
rounds=${ROUNDS:-7}

base=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
work=$(mktemp -d "$base/gpubox-cuda-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/limits" "$work/budget"
cat >"$work/gpus" <<'GPUS'
0 GPU-aaaaaaaa-0000-4000-8000-000000000000 81920 ok Fake A100
1 GPU-bbbbbbbb-1111-4000-8000-000000000001 81920 ok Fake A100
usage 0 0 0
context 0 300
context 1 300
GPUS
echo "hostpids $work/hostpids" >>"$work/gpus"
echo "GPU-aaaaaaaa-0000-4000-8000-000000000000 40960 cores=50" >"$work/limits/limits"

# run ROW KIND: one round's ns per pair (KIND mem, create), per launch
# (launch) or for start-up (init).
run() {
    local row=$1 kind=$2 dev=0 preload="" step
    case $row in
        limited) preload=$lib ;;
        unlimited) preload=$lib dev=1 ;;
    esac
    case $kind in
        launch) step="bench_launch kernel $launches" ;;
        init) step="init" ;;
        *) step="bench $kind $pairs" ;;
    esac
    # the process's host PID, made up (4100000): in the fake NVML's
    # hostpids file and in the pids file, as gpuboxd's monitor writes it
    # shellcheck disable=SC2016,SC2086 # $$ is the inner shell's; $step is words
    env -i LD_LIBRARY_PATH="$build/fakes" GPUBOX_FAKE_GPUS="$work/gpus" GPUBOX_CUDA_DIR="$work" \
        W="$work" ${preload:+LD_PRELOAD=$preload} /bin/sh -c \
        'echo "$$ 4100000" >"$W/hostpids"; printf "# HOSTPID PID\n4100000 %s\n" $$ >"$W/limits/pids"; exec "$0" "$@"' \
        "$probe" --device "$dev" $step |
        sed -n 's/^[a-z_]* //p'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-8s %-10s %12s %12s %8s\n' kind row ns added ratio
for kind in mem create launch init; do
    declare -A samples=()
    # start-up is one short wall-clock sample: take five a round
    reps=1
    [ "$kind" = init ] && reps=5
    for _ in $(seq 1 "$rounds"); do
        for row in baseline limited unlimited; do
            for _ in $(seq 1 "$reps"); do
                samples[$row]+="$(run "$row" "$kind") "
            done
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
echo "(mem, create: ns per allocation plus free, per call about half; launch: ns per"
echo " cuLaunchKernel; init: ns from loading the driver to the first allocation,"
echo " free and launch done, wall time)"
