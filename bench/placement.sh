#!/usr/bin/env bash
# placement.sh - how long choosing a node for a create takes
# (sched/placement.h) at 10, 100 and 1000 nodes of 8 cards each, mixed
# models, half held, with the nodes' capacity records in a real etcd
# (bench/placement_bench.c does the work; no gpuboxd, no Docker).
#
# A temporary single-member etcd (Debian's etcd-server) is started on free
# loopback ports with its data in a temporary directory, and the records are
# written into it with gpubox's own store (store_txn).
#
# Baseline, in the same run, in rounds interleaved with the measured work:
# one store_range of every capacity record - the read the deciding daemon
# makes anyway. Measured: parsing every record read
# (placement_node_parse) plus placement_rank, and placement_rank alone on
# records parsed beforehand. Each row prints the medians and
# parse+rank / baseline, for three requests: an 8 GB share with 2 host
# ports (binpack), one whole card (spread), and a 96 GB share no card takes
# (the refusal and its message).
#
# Usage: bench/placement.sh BUILD_DIR
#   BUILD_DIR must be a non-Debug build (placement_bench is built only there).
#   env: SECONDS_PER_ROW=1.5, NODES=10,100,1000, ETCD=etcd
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: placement.sh BUILD_DIR}" && pwd)
. "$here/lib.sh"
bench=$build/placement_bench
if [ ! -x "$bench" ]; then
    echo "placement.sh: $bench is missing: build a release tree, e.g." >&2
    echo "  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build/release" >&2
    exit 1
fi

work=$(mktemp -d)
cleanup() {
    etcd_stop
    rm -rf "$work"
}
trap cleanup EXIT
etcd_start "$work"

"$bench" --store "etcd://127.0.0.1:$ETCD_CLIENT_PORT/bench" \
    --seconds "${SECONDS_PER_ROW:-1.5}" --nodes "${NODES:-10,100,1000}"
