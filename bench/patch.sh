#!/usr/bin/env bash
# patch.sh - a whole GPU patch through gpuboxd's API (PATCH
# /api/v1/replicaSet/{name}: new container created, old one stopped, system
# disk carried, new one started, old one removed, store updated) against
# what gpu-docker-api spends on its copy alone: `cp -a` of the merged
# directory of the old container.
#
# For each size (0 B, 100 MB, 1 GB, and 4 GB when the disk has room for it
# twice), a replica set writes that much random data into its system disk
# (through the execute API). The baseline copies its merged directory, as
# Docker mounts it while the container runs, into a fresh directory (from
# a warm page cache, which favours the copy). Then ROUNDS patches switch the
# set between 1 and 2 GPUs, each a new version that must carry all the
# data; the median is reported. The data is checked in the last version.
# bench/carry.sh measures the carry step alone.
#
# gpu-docker-api's whole patch makes the same Docker calls and copies on top
# of them, so it is estimated as our 0 B patch plus its copy ("gda est").
#
# Targets (reported, never enforced): the patch time does not grow with the
# data (1 GB within 2x of 0 B), and it is at least 20x faster than the copy
# at 1 GB. Most of a patch is Docker creating, stopping and starting
# containers, which any implementation pays; the carry itself is measured
# by bench/carry.sh.
#
# Usage: bench/patch.sh BUILD_DIR
#   env: ROUNDS=5, SIZES_MB="0 100 1024 [4096]", GPUBOX_TEST_IMAGE,
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
name=gbbenchpatch$$

work=$(mktemp -d /var/tmp/gbbench-patch.XXXXXX)
cleanup() {
    if [ -n "${GPUBOXD_URL:-}" ]; then
        curl -s -X DELETE "$GPUBOXD_URL/api/v1/replicaSet/$name?purge=true" >/dev/null || true
    fi
    gpuboxd_stop
    local ids
    ids=$("$DOCKER" ps -aq --filter "label=gpubox.replicaset=$name" 2>/dev/null || true)
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

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
human() {
    if [ "$1" -eq 0 ]; then echo "0 B"
    elif [ $(($1 % 1024)) -eq 0 ]; then echo "$(($1 / 1024)) GB"
    else echo "$1 MB"; fi
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# api METHOD PATH [BODY]: the answer's body; fails unless code is 200.
api() {
    local out
    out=$(curl -s -X "$1" "$GPUBOXD_URL$2" ${3:+-H 'Content-Type: application/json' -d "$3"})
    case "$out" in
    '{"code":200,'*) printf '%s' "$out" ;;
    *) echo "patch.sh: $1 $2: $out" >&2; return 1 ;;
    esac
}
field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['data']$1)"; }

testimage_ensure "$image"
gpuboxd_start "$build" "$work" --simulate-gpus 2xA100-80GB --port-range 64400-64409 \
    --carry-method "${CARRY_METHOD:-auto}"

declare -A patch_s copy_s method
for mb in $sizes; do
    api POST /api/v1/replicaSet "{\"imageName\":\"$image\",\"replicaSetName\":\"$name\",
        \"gpuCount\":1,\"cmd\":[\"sleep\",\"infinity\"]}" >/dev/null
    api POST "/api/v1/replicaSet/$name/execute" "{\"cmd\":[\"sh\",\"-c\",
        \"dd if=/dev/urandom of=/payload bs=1048576 count=$mb 2>/dev/null && sync\"],
        \"timeoutSeconds\":3600}" >/dev/null
    current=$(api GET "/api/v1/replicaSet/$name" | field "['info']['containerName']")
    merged=$("$DOCKER" inspect -f '{{.GraphDriver.Data.MergedDir}}' "$current")
    sync

    start=$(now)
    cp -a "$merged" "$work/copy"
    end=$(now)
    copy_s[$mb]=$(elapsed "$start" "$end")
    rm -rf "$work/copy"
    sync

    : >"$work/times"
    for round in $(seq 1 "$rounds"); do
        gpus=$((round % 2 + 1))
        start=$(now)
        answer=$(api PATCH "/api/v1/replicaSet/$name" "{\"gpuPatch\":{\"gpuCount\":$gpus}}")
        end=$(now)
        elapsed "$start" "$end" >>"$work/times"
        echo >>"$work/times"
        method[$mb]=$(printf '%s' "$answer" | field "['carry']['method']")
    done
    patch_s[$mb]=$(median <"$work/times")
    got=$(api POST "/api/v1/replicaSet/$name/execute" '{"cmd":["stat","-c","%s","/payload"]}' |
        field "['stdout'].strip()")
    [ "$got" -eq $((mb * 1048576)) ] || { echo "patch.sh: /payload is $got bytes" >&2; exit 1; }
    api DELETE "/api/v1/replicaSet/$name?purge=true" >/dev/null
    echo "  $(human "$mb"): patch median ${patch_s[$mb]}s over $rounds (carried by ${method[$mb]}), cp -a ${copy_s[$mb]}s"
done

echo
printf '%-8s %11s %11s %10s %13s %10s\n' size "patch (s)" "cp -a (s)" "cp/patch" \
    "gda est (s)" "gda/patch"
for mb in $sizes; do
    awk -v h="$(human "$mb")" -v p="${patch_s[$mb]}" -v c="${copy_s[$mb]}" \
        -v z="${patch_s[${sizes%% *}]}" 'BEGIN {
        printf "%-8s %11.3f %11.3f %9.2fx %13.3f %9.2fx\n", h, p, c, c / p, z + c, (z + c) / p }'
done
echo
if [ -n "${patch_s[1024]:-}" ] && [ -n "${patch_s[0]:-}" ]; then
    awk -v z="${patch_s[0]}" -v g="${patch_s[1024]}" -v c="${copy_s[1024]}" 'BEGIN {
        printf "1 GB patch / 0 B patch: %.2fx (target <= 2x): %s\n", g / z, (g <= 2 * z ? "met" : "missed")
        printf "cp -a / patch at 1 GB: %.2fx (target >= 20x): %s\n", c / g, (c >= 20 * g ? "met" : "missed")
    }'
fi
