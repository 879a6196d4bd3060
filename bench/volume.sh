#!/usr/bin/env bash
# volume.sh - resizing a volume that holds 1 GB of data through gpuboxd's API
# (PATCH /api/v1/volumes/{name}/size), side by side with what gpu-docker-api
# does to resize: make a new volume of the new size and copy the data into
# it (`cp -a`, then a sync of the copy, since gpubox's resize is durable
# when it answers).
#
# Rows, each on a fresh volume with 1 GB written into it (960 MB in one file
# and 1024 files of 64 KB, random bytes):
#   ext4 grow, offline   2GB -> 3GB, no container uses it
#   ext4 grow, online    2GB -> 3GB under a running replica set; only with
#                        CAP_SYS_RESOURCE (without it gpuboxd answers 409)
#   xfs grow, online     2GB -> 3GB under a running replica set
#                        (--volume-fs xfs); the container is checked to be
#                        the same one, and df inside to show the new size
#   ext4 shrink          3GB -> 2.5GB, offline (resize2fs moves blocks)
#   xfs shrink           3GB -> 2GB, offline: a copy into a smaller image,
#                        which is what the baseline does too
# The data is checked (md5 of the big file) after every resize. The page
# cache is warm for both sides, which favours the copy.
#
# Target (reported, never enforced): a grow takes under a second whatever
# the data.
#
# Usage: bench/volume.sh BUILD_DIR
#   env: GPUBOX_TEST_IMAGE, DATA_MB=1024 (data written into each volume)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: volume.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
DOCKER=${DOCKER:-/usr/bin/docker}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
data_mb=${DATA_MB:-1024}
set_name=gbbenchvolset$$

work=$(mktemp -d /var/tmp/gbbench-vol.XXXXXX)
cleanup() {
    if [ -n "${GPUBOXD_URL:-}" ]; then
        curl -s -X DELETE "$GPUBOXD_URL/api/v1/replicaSet/$set_name?purge=true" >/dev/null || true
        for v in $(curl -s "$GPUBOXD_URL/api/v1/volumes" | /usr/bin/python3 -c \
            'import json,sys; print(" ".join(v["name"] for v in json.load(sys.stdin)["data"]["volumes"]))' \
            2>/dev/null || true); do
            curl -s -X DELETE "$GPUBOXD_URL/api/v1/volumes/$v" >/dev/null || true
        done
    fi
    gpuboxd_stop
    local ids
    ids=$("$DOCKER" ps -aq --filter "label=gpubox.replicaset=$set_name" 2>/dev/null || true)
    [ -n "$ids" ] && "$DOCKER" rm -f $ids >/dev/null 2>&1
    testimage_remove_if_created "$image"
    for m in $(awk -v w="$work" '$2 ~ "^"w { print $2 }' /proc/self/mounts | sort -r); do
        umount "$m" 2>/dev/null || true
    done
    chattr -i "$work"/data/volumes/*/ 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

avail_mb=$(df --output=avail -BM /var/tmp | tail -n1 | tr -dc 0-9)
if [ "$avail_mb" -lt $((data_mb * 4 + 2048)) ]; then
    echo "volume.sh: needs $((data_mb * 4 + 2048)) MB free under /var/tmp, has $avail_mb; skipped"
    exit 0
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# api METHOD PATH [BODY]: the answer's body; fails unless code is 200.
api() {
    local out
    out=$(curl -s -X "$1" "$GPUBOXD_URL$2" ${3:+-H 'Content-Type: application/json' -d "$3"})
    case "$out" in
    '{"code":200,'*) printf '%s' "$out" ;;
    *) echo "volume.sh: $1 $2: $out" >&2; return 1 ;;
    esac
}
field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['data']$1)"; }
mnt() { echo "$work/data/volumes/$1"; }

# fill NAME: data_mb of random data into the volume; prints the big file's md5.
fill() {
    local dir small=1024
    dir=$(mnt "$1")
    dd if=/dev/urandom of="$dir/big" bs=1M count=$((data_mb - small / 16)) status=none
    /usr/bin/python3 -c "
import os, sys
d = os.path.join(sys.argv[1], 'small'); os.mkdir(d)
for i in range(int(sys.argv[2])):
    with open(os.path.join(d, 'f%d' % i), 'wb') as f: f.write(os.urandom(65536))" "$dir" "$small"
    sync -f "$dir/big"
    md5sum "$dir/big" | cut -d' ' -f1
}

check() { # check NAME MD5
    [ "$(md5sum "$(mnt "$1")/big" | cut -d' ' -f1)" = "$2" ] ||
        { echo "volume.sh: volume $1 lost its data" >&2; exit 1; }
}

# baseline NAME SIZE: gpu-docker-api's resize - a new volume of SIZE, cp -a,
# sync; its seconds. The new volume is deleted afterwards.
baseline() {
    local start end copy=base$$
    start=$(now)
    api POST /api/v1/volumes "{\"name\":\"$copy\",\"size\":\"$2\"}" >/dev/null
    cp -a "$(mnt "$1")/." "$(mnt "$copy")/"
    sync -f "$(mnt "$copy")"
    end=$(now)
    api DELETE "/api/v1/volumes/$copy" >/dev/null
    elapsed "$start" "$end"
}

# resize NAME SIZE: gpubox's PATCH; its seconds.
resize() {
    local start end
    start=$(now)
    # (|| return: set -e does not stop a function called in an if condition)
    api PATCH "/api/v1/volumes/$1/size" "{\"size\":\"$2\"}" >/dev/null || return 1
    end=$(now)
    elapsed "$start" "$end"
}

start_set() { # start_set VOLUME
    api POST /api/v1/replicaSet "{\"imageName\":\"$image\",\"replicaSetName\":\"$set_name\",
        \"gpuCount\":0,\"binds\":[{\"src\":\"$1\",\"dest\":\"/data\"}],
        \"cmd\":[\"sleep\",\"infinity\"]}" >/dev/null
}
started_at() { "$DOCKER" inspect -f '{{.Id}} {{.State.StartedAt}}' "$set_name-1"; }
df_in_set() {
    api POST "/api/v1/replicaSet/$set_name/execute" '{"cmd":["df","-k","/data"]}' |
        field "['stdout'].split()[-5]"
}

rows=()
row() { rows+=("$(printf '%s|%s|%s|%s|%s' "$@")"); }

# one CASE FS-LABEL NAME FROM TO [in-use]: fill, baseline, gpubox resize, check.
one() {
    local label=$1 name=$2 from=$3 to=$4 in_use=${5:-} sum base ours before after
    api POST /api/v1/volumes "{\"name\":\"$name\",\"size\":\"$from\"}" >/dev/null
    sum=$(fill "$name")
    base=$(baseline "$name" "$to")
    if [ -n "$in_use" ]; then
        start_set "$name"
        before=$(started_at)
        if [ "$in_use" = ext4 ] && ! ours=$(resize "$name" "$to" 2>"$work/err"); then
            grep -q CAP_SYS_RESOURCE "$work/err" || { cat "$work/err" >&2; exit 1; }
            echo "  $label: refused (409): gpuboxd lacks CAP_SYS_RESOURCE"
            row "$label" "$from -> $to" "409, no CAP_SYS_RESOURCE" "$base" "-"
            api DELETE "/api/v1/replicaSet/$set_name?purge=true" >/dev/null
            api DELETE "/api/v1/volumes/$name" >/dev/null
            return 0
        fi
        [ -n "${ours:-}" ] || ours=$(resize "$name" "$to")
        after=$(started_at)
        [ "$before" = "$after" ] || { echo "volume.sh: the container restarted" >&2; exit 1; }
        echo "  $label: df inside the running container now shows $(df_in_set) KiB"
        api DELETE "/api/v1/replicaSet/$set_name?purge=true" >/dev/null
    else
        ours=$(resize "$name" "$to")
    fi
    check "$name" "$sum"
    api DELETE "/api/v1/volumes/$name" >/dev/null
    echo "  $label $from -> $to: gpubox ${ours}s, new volume + cp -a ${base}s"
    row "$label" "$from -> $to" "$ours" "$base" "$(awk -v a="$base" -v b="$ours" \
        'BEGIN { printf (a / b < 10 ? "%.1fx" : "%.0fx"), a / b }')"
}

testimage_ensure "$image"
flags=(--simulate-gpus 1xA100-80GB --port-range 64410-64419)
echo "volume resize with $data_mb MB of data in the volume"
gpuboxd_start "$build" "$work" "${flags[@]}"
one "ext4 grow, offline" bvext 2GB 3GB
one "ext4 grow, online" bvexton 2GB 3GB ext4
one "ext4 shrink" bvextsh 3GB 2.5GB
gpuboxd_stop
gpuboxd_start "$build" "$work" "${flags[@]}" --volume-fs xfs
one "xfs grow, online" bvxfs 2GB 3GB xfs
one "xfs shrink (copy)" bvxfssh 3GB 2GB
gpuboxd_stop

echo
printf '%-20s %-14s %26s %24s %8s\n' case resize "gpubox (s)" "new volume + cp -a (s)" ratio
grow_max=0
for r in "${rows[@]}"; do
    IFS='|' read -r label sizes ours base ratio <<<"$r"
    case "$ours" in
    *[!0-9.]*) printf '%-20s %-14s %26s %24.3f %8s\n' "$label" "$sizes" "$ours" "$base" "$ratio" ;;
    *) printf '%-20s %-14s %26.3f %24.3f %8s\n' "$label" "$sizes" "$ours" "$base" "$ratio"
        case "$label" in *grow*) grow_max=$(awk -v a="$grow_max" -v b="$ours" \
            'BEGIN { print (b > a ? b : a) }') ;; esac ;;
    esac
done
echo
awk -v g="$grow_max" 'BEGIN {
    printf "slowest grow: %.3f s (target < 1 s whatever the data): %s\n", g, (g < 1 ? "met" : "missed") }'
