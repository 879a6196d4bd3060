#!/usr/bin/env bash
# usage.sh - what live usage sampling costs (docs/usage.md): gpuboxd's CPU
# time over a window with the monitor reading 8 cards carrying 200 compute
# processes once a second, against the same daemon with sampling off
# (--usage-interval 0) measured in the same run. The cards are the fake
# NVML's (the same code path as a GPU host: the sampler, /proc/<pid>/cgroup
# for each new PID, the allocator's foreign memory, the answers); the 200
# processes are real ones (sleep), so every PID has a /proc to read.
# Budget: under 1% of one core.
#
# Usage: bench/usage.sh BUILD_DIR   (env: SECONDS_EACH=30 SOURCE=nvml|nvidia-smi)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: usage.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
window=${SECONDS_EACH:-30}
source=${SOURCE:-nvml}
fake_nvml="$build/fakes/libnvidia-ml.so.1"
[ -e "$fake_nvml" ] || fake_nvml="$gpubox_root/build/test/fakes/libnvidia-ml.so.1"
[ -e "$fake_nvml" ] || { echo "bench usage: no fake NVML (make build-test builds it)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
    gpuboxd_stop
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for i in $(seq 0 199); do
    sleep 3600 &
    pids+=($!)
done
{
    echo "driver_version 535.104.05"
    for c in $(seq 0 7); do
        printf '%d GPU-%08d-0000-0000-0000-%012d 81920 ok NVIDIA A100-SXM4-80GB\n' "$c" "$c" "$c"
        echo "usage $c 40000 55"
    done
    for i in $(seq 0 199); do
        echo "process $((i % 8)) ${pids[$i]} 150 $((i % 7))"
    done
} >"$work/gpus.txt"
export GPUBOX_FAKE_GPUS="$work/gpus.txt"

# cpu_ticks PID: user + system clock ticks the process used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# measure INTERVAL: CPU seconds gpuboxd spends over the window.
measure() {
    gpuboxd_start "$build" "$work/run-$1" --gpu-source "$source" --nvml-library "$fake_nvml" \
        --nvidia-smi "$gpubox_root/tests/fakes/nvidia-smi" --usage-interval "$1" \
        --port-range 61500-61509
    sleep 3 # start-up done, first readings taken
    local t0 c0 c1
    c0=$(cpu_ticks "$GPUBOXD_PID")
    t0=$(date +%s.%N)
    sleep "$window"
    c1=$(cpu_ticks "$GPUBOXD_PID")
    local elapsed
    elapsed=$(echo "$(date +%s.%N) - $t0" | bc -l)
    gpuboxd_stop
    echo "scale=6; ($c1 - $c0) / $(getconf CLK_TCK) / $elapsed" | bc -l
}

off=$(measure 0)
on=$(measure 1)
cost=$(echo "scale=4; ($on - $off) * 100" | bc -l)
printf 'usage sampling (%s, 8 cards, 200 processes, every 1 s, %ss each):\n' "$source" "$window"
printf '  gpuboxd CPU, sampling off (baseline): %.3f%% of one core\n' "$(echo "$off * 100" | bc -l)"
printf '  gpuboxd CPU, sampling on:             %.3f%% of one core\n' "$(echo "$on * 100" | bc -l)"
printf '  cost of sampling: %.3f%% of one core (budget 1%%)\n' "$cost"
