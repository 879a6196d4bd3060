#!/usr/bin/env bash
# store.sh - store operations per second, SQLite and etcd side by side in
# one run: puts, gets and compare-and-swap transactions, from one thread and
# from eight (bench/store_bench.c does the work).
#
# A temporary etcd (Debian's etcd-server) is started on free loopback ports
# with its data in a temporary directory; the SQLite file lives in the same
# directory, so both write to the same filesystem. Both fsync every commit
# (SQLite's synchronous=FULL in WAL mode, etcd's WAL). Takes about 30 s.
#
# Usage: bench/store.sh BUILD_DIR   (env: SECONDS_PER_OP=2 ETCD=etcd)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: store.sh BUILD_DIR}" && pwd)
. "$here/lib.sh"
seconds=${SECONDS_PER_OP:-2}
etcd_bin=${ETCD:-etcd}

work=$(mktemp -d)
etcd_pid=""
cleanup() {
    if [ -n "$etcd_pid" ]; then
        kill "$etcd_pid" 2>/dev/null || true
        wait "$etcd_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

client_port=$(free_port)
peer_port=$(free_port)
client=http://127.0.0.1:$client_port
peer=http://127.0.0.1:$peer_port
"$etcd_bin" --name bench --data-dir "$work/etcd" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "bench=$peer" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
for _ in $(seq 1 200); do
    curl -fsS -o /dev/null -d '{"key":"AA=="}' "$client/v3/kv/range" 2>/dev/null && break
    kill -0 "$etcd_pid" 2>/dev/null || { echo "store.sh: etcd exited:" >&2; cat "$work/etcd.log" >&2; exit 1; }
    sleep 0.1
done

echo "filesystem: $(df -T "$work" | awk 'NR==2 {print $2 " on " $1}'), $seconds s per cell"
"$build/store_bench" --seconds "$seconds" \
    "sqlite=sqlite://$work/state.db" "etcd=etcd://127.0.0.1:$client_port/bench"
