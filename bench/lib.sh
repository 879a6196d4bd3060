# lib.sh - helpers shared by the benchmarks: start a gpuboxd from a build dir
# on a free loopback port and wait for its ready line.

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
