#!/usr/bin/env bash
# fuzz.sh - build gpubox's libFuzzer targets (tests/fuzz/fuzz_*.c) with clang
# in their own CMake configuration and run each for a set time, starting from
# the checked-in seed corpus (tests/fuzz/corpus/<target>/).
#
# New inputs libFuzzer finds go to BUILD/corpus/<target>/, never into the
# checked-in seeds; a crash leaves its input as BUILD/artifacts/<target>-crash-*
# and fails the run. Turn such an input into a unit test (see docs/security.md,
# "Fuzzing") before fixing the bug.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   env FUZZ_BUILD (default build/fuzz), JOBS (default 2)
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$gpubox_root"
seconds=${1:-60}
shift || true
build=${FUZZ_BUILD:-$gpubox_root/build/fuzz}

if ! command -v clang >/dev/null; then
    echo "fuzz: clang is missing; scripts/install-deps.sh test installs it" >&2
    exit 1
fi
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUBOX_FUZZ=ON -DGPUBOX_TESTS=OFF >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target fuzz_targets >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for src in tests/fuzz/fuzz_*.c; do
        targets+=("$(basename "$src" .c)")
    done
fi

mkdir -p "$build/artifacts"
failed=()
for t in "${targets[@]}"; do
    mkdir -p "$build/corpus/$t"
    log="$build/$t.log"
    # -rss_limit_mb and -timeout turn a memory blow-up or a hang into a
    # failure with an input to replay, like a crash.
    if "$build/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 \
        "$build/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        printf 'fuzz: %-16s ok, %s inputs in %ss\n' "$t" "${runs:-?}" "$seconds"
    else
        echo "fuzz: $t FAILED; the end of $log:" >&2
        tail -n 40 "$log" >&2
        ls "$build/artifacts/$t-"* 2>/dev/null | sed 's/^/fuzz: input: /' >&2 || true
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
    exit 1
fi
