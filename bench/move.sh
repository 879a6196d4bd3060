#!/usr/bin/env bash
# move.sh - moving a replica set to another node (docs/fleet.md, "Moving a
# replica set") against `tar | nc` of the same data between the same two
# network namespaces, in the same run (bench/move.py does the timing).
#
# Set-up, as bench/fleet.sh makes it: a hub network namespace with one etcd
# member (its data on a tmpfs), two test sandboxes a and b (a netns each
# with its own dockerd, the fake nvidia hook and the test image) joined to
# the hub by a bridge, and on each node a gpuboxd of BUILD_DIR
# (--move-compress as MOVE_COMPRESS says, default auto).
#
# The set: one on node a binding a volume, with SIZE_MB of random data
# written on its system disk and SIZE_MB in its volume (random: no side
# gains from compression; auto declines it). Then, in the same run:
#   baseline  tar of the set's system disk (its overlay upper directory) and
#             of the volume's directory, in node a's namespace, to a socket
#             (bash's /dev/tcp) read in node b's namespace (python's socket
#             in 1 MiB reads, as nc does) into tar -x on the disk
#   stopped   POST .../move {"node": "b"} of the set, stopped: until the
#             answer (the data extracted, the records written; node a
#             removes its old copy after it); "the copy" is the data alone
#             as node b timed it, "outside the copy" the rest
#   running   the set started on b, then moved back to a while it runs:
#             on the tree way (both nodes overlay2, docs/fleet.md) it is
#             copied while it runs, then stopped and only what changed
#             sent; its downtime is measured from the dockerds (polled
#             every 10 ms: no container of the set running on b, until
#             one runs on a) and printed against the pre-copy's time
# Prints each side's MB/s over the file data (2 x SIZE_MB) and the ratio.
# Target (reported, never enforced; the issue's words): the move at least
# 0.8x the baseline's throughput, and a running set's downtime no more than
# the transfer of what changed plus Docker's start.
#
# Usage: bench/move.sh BUILD_DIR   (a non-Debug build is fairer; any works)
#   needs what scripts/test-fleet.sh needs (root, iproute2, nsenter,
#   dockerd, etcd, busybox-static)
#   env: SIZE_MB=1024 MOVE_COMPRESS=auto GPUBOX_TEST_IMAGE=gpubox-test:latest
#        PERF_OUT=FILE (perf record -a -g of the whole machine during the stopped move)
#        KEEP_LOGS=DIR (the nodes' gpuboxd logs copied there at the end)
#        FLEET_NET=10.77.0 ETCD=etcd
# An EXIT trap ends the gpuboxd, etcd, the dockerds and the namespaces it
# started, by their pids (netns-dockerd.sh's nsd_destroy).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: move.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$gpubox_root/scripts/lib/dockerd.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
. "$gpubox_root/scripts/lib/netns-dockerd.sh"
. "$gpubox_root/scripts/lib/fleet-net.sh"
size_mb=${SIZE_MB:-1024}
compress=${MOVE_COMPRESS:-auto}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
etcd_bin=${ETCD:-etcd}
api_port=2378
etcd_port=2379

for tool in ip bridge nsenter dockerd "$etcd_bin" curl; do
    if ! command -v "$tool" >/dev/null; then
        echo "move.sh: $tool is missing; run scripts/install-deps.sh test" >&2
        exit 1
    fi
done
[ -x "$build/gpuboxd" ] || { echo "move.sh: no $build/gpuboxd; make build first" >&2; exit 1; }
if ! unshare --net true 2>/dev/null; then
    echo "move.sh: skipped: cannot make a network namespace here (root and CAP_SYS_ADMIN needed)"
    exit 0
fi

# Names at most 40 characters, unique per run (never another run's).
tag=$$
hub="gpubox-bmove-hub-$tag"
labels=(a b)
nodes=("gpubox-bmove-a-$tag" "gpubox-bmove-b-$tag")
work=$(mktemp -d /var/tmp/gbbench-move.XXXXXX)
hub_addr=$(fleet_hub_addr)

daemon_pids=()
etcd_pid=""
py_pid=""
makers=()
cleanup() {
    local rc=$? pid name destroyers=()
    [ ${#makers[@]} -eq 0 ] || kill -TERM "${makers[@]}" 2>/dev/null || true
    [ ${#makers[@]} -eq 0 ] || wait "${makers[@]}" 2>/dev/null || true
    if [ -n "$py_pid" ]; then
        kill -TERM "$py_pid" 2>/dev/null || true
        wait "$py_pid" 2>/dev/null || true
    fi
    # gpuboxd first (SIGTERM: each takes its member keys away), while etcd runs
    for pid in ${daemon_pids[@]+"${daemon_pids[@]}"}; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in ${daemon_pids[@]+"${daemon_pids[@]}"}; do
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$etcd_pid" ]; then
        kill -TERM "$etcd_pid" 2>/dev/null || true
        wait "$etcd_pid" 2>/dev/null || true
    fi
    if [ -n "${KEEP_LOGS:-}" ]; then # the nodes' logs, for where the time went
        mkdir -p "$KEEP_LOGS"
        for l in "${labels[@]}"; do cp "$work/$l/gpuboxd.log" "$KEEP_LOGS/gpuboxd-$l.log" 2>/dev/null || true; done
    fi
    # the sandboxes at once: containers, dockerds, the tmpfs, the namespaces
    for name in ${NSD_CREATED[@]+"${NSD_CREATED[@]}"}; do
        nsd_destroy "$name" >/dev/null &
        destroyers+=($!)
    done
    [ ${#destroyers[@]} -eq 0 ] || wait "${destroyers[@]}" || true
    # volumes gpuboxd left mounted (a run cut short): their mounts and loops
    awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r |
        while read -r m; do umount "$m" 2>/dev/null || true; done
    losetup -a 2>/dev/null | awk -F: -v w="$work/" 'index($0, w) {print $1}' |
        while read -r dev; do losetup -d "$dev" 2>/dev/null || true; done
    # gpuboxd makes a volume's bare mount point immutable (writes must land in the volume)
    chattr -i "$work"/*/data/volumes/* 2>/dev/null || true
    rm -rf "$work"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "move: load average $(load) on $(nproc) cores at the start"

# ---- the sandboxes and the network ----

make_node() {
    nsd_up "$1" "$work/dockerd-$2.log" --fake-hook &&
        nsd_import_image "$1" "$image" || return 1
    if ! DOCKER_HOST=$(nsd_docker_host "$1") dockerd_has_nvidia_driver "$image"; then
        echo "move.sh: node $1: its dockerd has no \"nvidia\" device driver (see $work/dockerd-$2.log)" >&2
        return 1
    fi
}

nsd_create "$hub" >/dev/null
# Noted here: nsd_create's note in NSD_CREATED stays in make_node's subshell.
NSD_CREATED+=("${nodes[@]}")
for i in "${!nodes[@]}"; do
    make_node "${nodes[i]}" "${labels[i]}" >"$work/setup-${labels[i]}.log" 2>&1 &
    makers+=($!)
done
made=1
for i in "${!nodes[@]}"; do
    wait "${makers[i]}" || { made=0; cat "$work/setup-${labels[i]}.log" >&2; }
done
makers=()
[ $made = 1 ] || { echo "move.sh: cannot make the nodes; see above" >&2; exit 1; }
fleet_net_up "$hub" "${nodes[@]}" >/dev/null

in_ns() {
    local ns=$1
    shift
    nsenter --net="/var/run/netns/$ns" "$@"
}

# ---- etcd in the hub, its data on a tmpfs (nsd_destroy unmounts it) ----

etcd_dir="$NSD_RUN_BASE/$hub/etcd"
mkdir -p "$etcd_dir"
mount -t tmpfs -o size=256m,mode=0700 gpubox-bench "$etcd_dir" ||
    echo "move.sh: no tmpfs for etcd's data; it goes to disk" >&2
client=http://$hub_addr:$etcd_port
peer=http://$hub_addr:$((etcd_port + 1))
# nsenter execs: the pid is etcd's (a function run with & would be a
# subshell, and a TERM to it would not reach etcd)
nsenter --net="/var/run/netns/$hub" "$etcd_bin" --name bench --data-dir "$etcd_dir/data" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "bench=$peer" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
for n in $(seq 1 200); do
    in_ns "$hub" curl -fsS -o /dev/null -d '{"key":"AA=="}' "$client/v3/kv/range" 2>/dev/null && break
    if ! kill -0 "$etcd_pid" 2>/dev/null || [ "$n" = 200 ]; then
        echo "move.sh: etcd did not start; its log:" >&2
        cat "$work/etcd.log" >&2
        exit 1
    fi
    sleep 0.1
done

# ---- gpuboxd on each node ----

# The fleet's secret in a file both nodes read (as bench/fleet.sh gives it).
secret_file="$work/fleet-secret"
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret_file")

for i in "${!nodes[@]}"; do
    l=${labels[i]}
    addr=$(fleet_node_addr $((i + 1)))
    mkdir -p "$work/$l/data"
    # nsenter and env exec: the pid is gpuboxd's own
    nsenter --net="/var/run/netns/${nodes[i]}" env DOCKER_HOST="$(nsd_docker_host "${nodes[i]}")" \
        "$build/gpuboxd" --node "$l" --advertise "http://$addr:$api_port" \
        --listen "$addr:$api_port" --store "etcd://$hub_addr:$etcd_port/bench" \
        --simulate-gpus 8xA100-80GB --insecure-no-auth --data-dir "$work/$l/data" \
        --fleet-secret-file "$secret_file" \
        --port-range 61300-61399 --docker-wait 30 --log-level info --move-compress "$compress" \
        >"$work/$l/gpuboxd.out" 2>"$work/$l/gpuboxd.log" &
    daemon_pids+=($!)
done
for i in "${!nodes[@]}"; do
    l=${labels[i]}
    for n in $(seq 1 900); do
        grep -q 'ready on http://' "$work/$l/gpuboxd.out" 2>/dev/null && break
        if ! kill -0 "${daemon_pids[i]}" 2>/dev/null || [ "$n" = 900 ]; then
            echo "move.sh: gpuboxd on node $l did not start; its log:" >&2
            cat "$work/$l/gpuboxd.log" >&2
            exit 1
        fi
        sleep 0.1
    done
done

url_a="http://$(fleet_node_addr 1):$api_port"
url_b="http://$(fleet_node_addr 2):$api_port"
echo "move: hub $hub_addr (etcd), a $url_a, b $url_b; gpuboxd $build/gpuboxd"
# In the background and waited for: a TERM or INT to this script runs the
# trap at once (a foreground child would hold it until it ended).
nsenter --net="/var/run/netns/$hub" env SIZE_MB="$size_mb" PERF_OUT="${PERF_OUT:-}" NODE_A_NETNS="${nodes[0]}" \
    NODE_B_NETNS="${nodes[1]}" DOCKER_A="$(nsd_docker_host "${nodes[0]}")" \
    DOCKER_B="$(nsd_docker_host "${nodes[1]}")" \
    ADDR_B="$(fleet_node_addr 2)" WORK="$work" \
    /usr/bin/python3 "$here/move.py" "$url_a" "$url_b" "$image" </dev/null &
py_pid=$!
wait "$py_pid"
py_pid=""
echo "move: load average $(load) at the end"
