#!/usr/bin/env bash
# run.sh - every benchmark in bench/, each printing its own baseline ratio.
# Benchmarks are not tests: they never fail a build on a number.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: bench/run.sh BUILD_DIR}
gpubox_root=$(cd "$here/.." && pwd)
. "$gpubox_root/scripts/lib/dockerd.sh"
dockerd_ensure "$gpubox_root/.run/dockerd.log" --fake-hook
trap dockerd_stop_if_started EXIT
for b in "$here"/*.sh; do
    case "$(basename "$b")" in run.sh | lib.sh) continue ;; esac
    echo "== $(basename "$b") =="
    "$b" "$build"
done
