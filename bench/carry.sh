#!/usr/bin/env bash
# carry.sh - carrying a system disk, the step of a patch between stopping the
# old container and starting the new one, against gpu-docker-api's way of
# doing it: `cp -a` of the old container's merged directory.
#
# For each size (0 B, 100 MB, 1 GB, and 4 GB when the disk has room for it
# twice), a container writes that much random data into its system disk.
# The baseline copies its merged directory, as Docker mounts it while the
# container runs, into a fresh directory (from a warm page cache, which
# favours the copy). Then the container stops, a new one is created from
# the same image, and carry_bench times carry_system_disk the overlay way:
# the median of ROUNDS carries (the disk goes back and forth between the
# two containers, so each carry moves all of it).
#
# Targets (reported, never enforced): the carry time does not grow with the
# data (1 GB within 2x of 0 B), and it is at least 20x faster than cp -a at
# 1 GB.
#
# Usage: bench/carry.sh BUILD_DIR
#   BUILD_DIR must be a non-Debug build (carry_bench is built only there).
#   env: ROUNDS=5, SIZES_MB="0 100 1024 [4096]", GPUBOX_TEST_IMAGE
set -euo pipefail
build=$(cd "${1:?usage: carry.sh BUILD_DIR}" && pwd)
DOCKER=${DOCKER:-/usr/bin/docker}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
rounds=${ROUNDS:-5}
bench=$build/carry_bench
if [ ! -x "$bench" ]; then
    echo "carry.sh: $bench is missing: build a release tree, e.g." >&2
    echo "  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release && cmake --build build/release" >&2
    exit 1
fi

label=gbbench.carry=$$
work=$(mktemp -d /var/tmp/gbbench-carry.XXXXXX)
cleanup() {
    local ids
    ids=$("$DOCKER" ps -aq --filter "label=$label" 2>/dev/null || true)
    [ -n "$ids" ] && "$DOCKER" rm -f $ids >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

docker_root=$("$DOCKER" info --format '{{.DockerRootDir}}')
avail_mb=$(df --output=avail -BM "$docker_root" | tail -n1 | tr -dc 0-9)
sizes=${SIZES_MB:-}
if [ -z "$sizes" ]; then
    sizes="0 100 1024"
    # 4 GB written, 4 GB copied, and room to spare.
    if [ "$avail_mb" -gt $((4096 * 2 + 4096)) ]; then
        sizes="$sizes 4096"
    else
        echo "(4 GB skipped: ${avail_mb} MB free under $docker_root)"
    fi
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
human() { # MB -> "0 B", "100 MB", "1 GB"
    if [ "$1" -eq 0 ]; then echo "0 B"
    elif [ $(($1 % 1024)) -eq 0 ]; then echo "$(($1 / 1024)) GB"
    else echo "$1 MB"; fi
}

declare -A carry_s copy_s
for mb in $sizes; do
    old=gbbench-carry-$$-$mb-old
    new=gbbench-carry-$$-$mb-new
    "$DOCKER" run -d --name "$old" --label "$label" "$image" sh -c \
        "dd if=/dev/urandom of=/payload bs=1048576 count=$mb 2>/dev/null; touch /.ready; exec sleep 3600" \
        >/dev/null
    merged=$("$DOCKER" inspect -f '{{.GraphDriver.Data.MergedDir}}' "$old")
    for _ in $(seq 1 1200); do [ -e "$merged/.ready" ] && break; sleep 0.25; done
    [ -e "$merged/.ready" ] || { echo "carry.sh: $old did not finish writing" >&2; exit 1; }
    sync

    start=$(now)
    cp -a "$merged" "$work/copy"
    end=$(now)
    copy_s[$mb]=$(elapsed "$start" "$end")
    rm -rf "$work/copy"
    sync

    "$DOCKER" stop -t 0 "$old" >/dev/null
    "$DOCKER" create --name "$new" --label "$label" "$image" sleep 3600 >/dev/null
    read -r median min max used entries bytes < <("$bench" "$old" "$new" "$rounds" overlay)
    [ "$used" = overlay ] || { echo "carry.sh: carried the $used way, not overlay" >&2; exit 1; }
    carry_s[$mb]=$median
    # The new container must start with the data in it.
    "$DOCKER" start "$new" >/dev/null
    got=$("$DOCKER" exec "$new" stat -c %s /payload)
    [ "$got" -eq $((mb * 1048576)) ] || { echo "carry.sh: /payload is $got bytes in $new" >&2; exit 1; }
    "$DOCKER" rm -f "$old" "$new" >/dev/null
    echo "  $(human "$mb"): carry median ${median}s (min ${min}s, max ${max}s, $entries entries moved), cp -a ${copy_s[$mb]}s"
done

echo
printf '%-8s %14s %14s %10s\n' size "carry (s)" "cp -a (s)" "cp/carry"
for mb in $sizes; do
    printf '%-8s %14.4f %14.4f %9.0fx\n' "$(human "$mb")" "${carry_s[$mb]}" "${copy_s[$mb]}" \
        "$(awk -v c="${copy_s[$mb]}" -v k="${carry_s[$mb]}" 'BEGIN { print (k > 0 ? c / k : 0) }')"
done
echo
if [ -n "${carry_s[1024]:-}" ] && [ -n "${carry_s[0]:-}" ]; then
    awk -v z="${carry_s[0]}" -v g="${carry_s[1024]}" -v c="${copy_s[1024]}" 'BEGIN {
        printf "1 GB carry / 0 B carry: %.2fx (target <= 2x): %s\n", g / z, (g <= 2 * z ? "met" : "missed")
        printf "cp -a / carry at 1 GB: %.0fx (target >= 20x): %s\n", c / g, (c >= 20 * g ? "met" : "missed")
    }'
fi
