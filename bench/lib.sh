# lib.sh - helpers shared by the benchmarks: start a gpuboxd from a build dir
# on a free loopback port and wait for its ready line; start a temporary etcd.

# gpuboxd_start BUILD_DIR WORKDIR [flags...]: sets GPUBOXD_PID and GPUBOXD_URL.
gpuboxd_start() {
    local build=$1 work=$2
    shift 2
    mkdir -p "$work/data"
    "$build/gpuboxd" --listen 127.0.0.1:0 --data-dir "$work/data" --log-level warn "$@" \
        >"$work/gpuboxd.out" 2>"$work/gpuboxd.log" &
    GPUBOXD_PID=$!
    GPUBOXD_URL=""
    for _ in $(seq 1 100); do
        # No match yet is normal: under pipefail grep's status 1 must not end the script.
        GPUBOXD_URL=$(grep -ho 'ready on http://[0-9.:]*' "$work/gpuboxd.out" "$work/gpuboxd.log" \
            2>/dev/null | head -n1 | sed 's/^ready on //' || true)
        [ -n "$GPUBOXD_URL" ] && return 0
        kill -0 "$GPUBOXD_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "bench: gpuboxd did not start; its log:" >&2
    cat "$work/gpuboxd.log" >&2
    return 1
}

gpuboxd_stop() {
    [ -n "${GPUBOXD_PID:-}" ] || return 0
    kill -TERM "$GPUBOXD_PID" 2>/dev/null || true
    wait "$GPUBOXD_PID" 2>/dev/null || true
    GPUBOXD_PID=""
}

# free_port: a TCP port nothing listens on.
free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# etcd_start WORKDIR: a temporary single-member etcd (Debian's etcd-server,
# or $ETCD) on free loopback ports, its data in WORKDIR/etcd; sets ETCD_PID
# and ETCD_CLIENT_PORT once it answers. etcd_stop ends it.
etcd_start() {
    local work=$1 peer_port client
    ETCD_CLIENT_PORT=$(free_port)
    peer_port=$(free_port)
    client=http://127.0.0.1:$ETCD_CLIENT_PORT
    "${ETCD:-etcd}" --name bench --data-dir "$work/etcd" \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "bench=http://127.0.0.1:$peer_port" >"$work/etcd.log" 2>&1 &
    ETCD_PID=$!
    for _ in $(seq 1 200); do
        curl -fsS -o /dev/null -d '{"key":"AA=="}' "$client/v3/kv/range" 2>/dev/null && return 0
        kill -0 "$ETCD_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "bench: etcd did not start; its log:" >&2
    cat "$work/etcd.log" >&2
    return 1
}

etcd_stop() {
    [ -n "${ETCD_PID:-}" ] || return 0
    kill "$ETCD_PID" 2>/dev/null || true
    wait "$ETCD_PID" 2>/dev/null || true
    ETCD_PID=""
}
