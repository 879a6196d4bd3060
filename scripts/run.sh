#!/usr/bin/env bash
# run.sh - start gpuboxd in the foreground, as `make run` does.
#
# Starts a dockerd if none answers. On a host with no NVIDIA GPU (no working
# nvidia-smi and no libnvidia-ml.so.1) it runs gpuboxd with a simulated
# inventory of 8 A100 80GB cards and says so; the dockerd it starts then gets
# the fake nvidia-container-runtime-hook, so GPU requests can be tried out.
# State lives in .run/ in the checkout unless GPUBOX_DATA_DIR says otherwise.
# The service proxy (docs/services.md) listens on 127.0.0.1:2380 unless a
# --proxy-listen flag says otherwise.
#
# Usage: scripts/run.sh BUILD_DIR [gpuboxd flags...]
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
shift
cd "$gpubox_root"
. scripts/lib/dockerd.sh

data_dir=${GPUBOX_DATA_DIR:-$gpubox_root/.run/data}
mkdir -p "$data_dir"

gpu_flags=()
has_gpu=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    has_gpu=1
elif ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then
    has_gpu=1
fi
case " $* " in
*" --gpu-source"* | *" --simulate-gpus"*) has_gpu=given ;;
esac

if [ -z "$has_gpu" ]; then
    cat <<'MSG'
************************************************************************
* No NVIDIA GPU on this host: starting gpuboxd with SIMULATED GPUs     *
* (--simulate-gpus 8xA100-80GB). Containers are real; the cards not.   *
************************************************************************
MSG
    gpu_flags=(--simulate-gpus 8xA100-80GB)
    dockerd_ensure "$gpubox_root/.run/dockerd.log" --fake-hook
else
    dockerd_ensure "$gpubox_root/.run/dockerd.log"
fi
trap dockerd_stop_if_started EXIT

proxy_flags=(--proxy-listen 127.0.0.1:2380)
case " $* " in
*" --proxy-listen"*) proxy_flags=() ;;
esac

"$build/gpuboxd" --data-dir "$data_dir" "${gpu_flags[@]}" "${proxy_flags[@]}" "$@" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null' INT TERM
wait $daemon || true
wait $daemon 2>/dev/null || true
