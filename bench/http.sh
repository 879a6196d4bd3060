#!/usr/bin/env bash
# http.sh - HTTP throughput of gpuboxd against nginx, side by side in one run.
#
# wrk loads GET /api/v1/resources/gpus on gpuboxd (8 simulated GPUs), then the
# same path on nginx serving the identical response bytes as a static file.
# Prints requests/s and p99 latency of each and gpuboxd's share of nginx's
# throughput. Both servers get the same machine, connections and duration.
#
# Usage: bench/http.sh BUILD_DIR   (env: DURATION=10s CONNECTIONS=32 THREADS=2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: http.sh BUILD_DIR}" && pwd)
. "$here/lib.sh"
duration=${DURATION:-10s}
conns=${CONNECTIONS:-32}
threads=${THREADS:-2}
path=/api/v1/resources/gpus

work=$(mktemp -d)
chmod 755 "$work" # nginx's workers (user nobody) must read the files served
nginx_pid=""
cleanup() {
    gpuboxd_stop
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

gpuboxd_start "$build" "$work" --simulate-gpus 8xA100-80GB
mkdir -p "$work/www$(dirname $path)"
curl -fsS "$GPUBOXD_URL$path" -o "$work/www$path"
bytes=$(stat -c %s "$work/www$path")

nginx_port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes auto;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
daemon off;
events { worker_connections 1024; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$nginx_port;
        root $work/www;
        default_type application/json;
        location / { }
    }
}
CONF
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
nginx_pid=$!
for _ in $(seq 1 50); do curl -fsS "http://127.0.0.1:$nginx_port$path" >/dev/null 2>&1 && break; sleep 0.1; done

run_wrk() { # URL -> "rps p99_ms"
    local out
    out=$(wrk -t"$threads" -c"$conns" -d"$duration" --latency "$1")
    local rps p99
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}' <<<"$out")
    local errors
    errors=$(awk '/Non-2xx|Socket errors/' <<<"$out")
    [ -n "$errors" ] && echo "  wrk: $errors" >&2
    echo "$rps $p99"
}

echo "HTTP throughput: GET $path ($bytes bytes), wrk -t$threads -c$conns -d$duration"
read -r g_rps g_p99 < <(run_wrk "$GPUBOXD_URL$path")
read -r n_rps n_p99 < <(run_wrk "http://127.0.0.1:$nginx_port$path")
printf '  %-10s %12s %10s\n' server 'requests/s' 'p99 ms'
printf '  %-10s %12.0f %10.2f\n' gpuboxd "$g_rps" "$g_p99"
printf '  %-10s %12.0f %10.2f\n' nginx "$n_rps" "$n_p99"
awk -v g="$g_rps" -v n="$n_rps" 'BEGIN { printf "  ratio gpuboxd/nginx: %.2f (target >= 0.50)\n", g / n }'
