#!/usr/bin/env bash
# proxy.sh - the service proxy (docs/services.md) against a direct
# connection to the container's own address and against a bare relay
# (the floor), side by side in one run.
#
# gpuboxd runs with --proxy-listen and one set running services_echo
# (tests/e2e/services_echo.c, built here with gcc -static and bound into
# the busybox test image). Two bare relays (bench/proxy_floor.c, built
# here with cc: a TCP forwarder on a loopback port to the container's
# address that only splices bytes through a pipe each way, with large
# socket buffers; one with a thread per direction, one polling) give the
# floor: the better of the two is what any process between the client
# and the container costs on this machine. bench/proxy.py then measures,
# in interleaved rounds, through the proxy (with a bearer token, as a
# program sends it), through each relay and directly:
#   - the latency of small requests with a new connection each, on each
#     path (two TCP handshakes through the proxy or a relay against one);
#   - the latency of small requests over one kept connection, on each
#     path (what a browser sees: the proxy authorises every request and
#     keeps its own connection to the container);
#   - the throughput of one large streamed answer (down) and of one large
#     request body (up), both moved by splice through the proxy (and the
#     relays).
# Targets (reported, never enforced): throughput >= 0.8x, latency <= 1.2x
# (keep-alive); for each it prints the ratios proxy/direct, floor/direct
# and proxy/floor (the last is gpuboxd's cost over what any relay costs).
# It also prints the proxy's own round trip (a 404 it answers alone, no
# container): what a request through it pays on top.
# The throughput ratio depends on spare cores: through the proxy three
# processes (client, gpuboxd, service) share the CPUs instead of two, so
# on a small, busy machine run it several times (RUNS=N: each run prints
# the load before it) and note the load.
# Measure a release build (make build-opt): the ASan test build is several
# times slower in the proxy's own work and says little about it.
#
# Needs a dockerd whose bridge networks this machine reaches (as
# scripts/test.sh's or a test sandbox's). The set is deleted afterwards.
#
# Usage: bench/proxy.sh BUILD_DIR   e.g. RUNS=3 bench/proxy.sh build/opt-Release
#   env: ROUNDS=5 MB=256 RUNS=1 GPUBOX_TEST_IMAGE=gpubox-test:latest
#        FLOOR_BUF (bytes each relay asks for every socket buffer; default
#        4 MiB, 0 leaves them to the kernel's tuning)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: proxy.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
set_name=benchproxy$$

work=$(mktemp -d)
chmod 755 "$work"
cleanup() {
    [ -n "${GPUBOXD_URL:-}" ] && curl -fsS -X DELETE -H "Authorization: Bearer $token" \
        "$GPUBOXD_URL/api/v1/replicaSet/$set_name?purge=true" >/dev/null 2>&1 || true
    for pid in ${floor_pids:-}; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    gpuboxd_stop
    testimage_remove_if_created "$image"
    rm -rf "$work"
}
token=bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
trap cleanup EXIT

testimage_ensure "$image"
mkdir -p "$work/bin"
gcc -static -O2 -o "$work/bin/services_echo" "$gpubox_root/tests/e2e/services_echo.c"
${CC:-cc} -O2 -std=c11 -Wall -Wextra -pthread -o "$work/proxy_floor" "$here/proxy_floor.c"
printf 'bench:admin:%s\n' "$token" >"$work/tokens"
chmod 600 "$work/tokens"
proxy_port=$(free_port)
gpuboxd_start "$build" "$work" --simulate-gpus 1xA100-80GB --port-range 61300-61309 \
    --token-file "$work/tokens" --bind-prefixes "$work/bin" --proxy-listen "127.0.0.1:$proxy_port"
curl -fsS -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    "$GPUBOXD_URL/api/v1/replicaSet" -d @- >/dev/null <<JSON
{"replicaSetName": "$set_name", "imageName": "$image", "gpuCount": 0,
 "cmd": ["/opt/svc/services_echo", "9000"],
 "binds": [{"src": "$work/bin", "dest": "/opt/svc", "readOnly": true}],
 "services": [{"name": "echo", "port": 9000}]}
JSON
ip=$("$DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$set_name-1")
proxy="http://127.0.0.1:$proxy_port/s/$set_name/echo"
for _ in $(seq 1 50); do
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$proxy/" 2>/dev/null && break
    sleep 0.1
done
floor_pids=""
floor_bases=()
for mode in thread poll; do
    "$work/proxy_floor" "$mode" "$ip" 9000 ${FLOOR_BUF:-} >"$work/floor-$mode.port" &
    floor_pids="$floor_pids $!"
    for _ in $(seq 1 50); do
        [ -s "$work/floor-$mode.port" ] && break
        sleep 0.1
    done
    floor_bases+=("http://127.0.0.1:$(head -n1 "$work/floor-$mode.port")/s/$set_name/echo")
done
for run in $(seq 1 "${RUNS:-1}"); do
    echo "run $run/${RUNS:-1}, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    /usr/bin/python3 "$here/proxy.py" "$proxy" "http://$ip:9000/s/$set_name/echo" "$token" \
        "${ROUNDS:-5}" "${MB:-256}" "${floor_bases[@]}"
done
