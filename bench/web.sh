#!/usr/bin/env bash
# web.sh - the web console's budgets (docs/web.md), measured in Debian's
# chromium driven by playwright-core (web/e2e/bench.mjs) against a real
# gpuboxd and dockerd:
#   - all JavaScript and CSS, gzipped as gpuboxd sends them (budget 150 KB);
#   - the instances page with N instances (default 500) until every row is
#     drawn, against the same page with one instance measured in the same
#     run (the baseline; budget 500 ms);
#   - axe-core's serious and critical accessibility violations on every page
#     (budget 0).
# The instances are real replica sets (busybox, no GPU), made through the
# API by 8 clients at once and removed afterwards.
#
# Usage: bench/web.sh BUILD_DIR   (env: INSTANCES=500 ROUNDS=5 GPUBOX_TEST_IMAGE=gpubox-test:latest)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: web.sh BUILD_DIR}" && pwd)
gpubox_root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
instances=${INSTANCES:-500}
image=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}

work=$(mktemp -d)
cleanup() {
    [ -n "${GPUBOXD_URL:-}" ] && /usr/bin/python3 "$here/web_sets.py" "$GPUBOXD_URL" "$image" 0 || true
    gpuboxd_stop
    testimage_remove_if_created "$image"
    rm -rf "$work"
}
trap cleanup EXIT

testimage_ensure "$image"
[ -d "$gpubox_root/web/node_modules" ] || (cd "$gpubox_root/web" && npm ci --no-audit --no-fund --loglevel=error)
gpuboxd_start "$build" "$work" --simulate-gpus 8xA100-80GB --port-range 61300-61399
/usr/bin/python3 "$here/web_sets.py" "$GPUBOXD_URL" "$image" 1
(cd "$gpubox_root/web" && node e2e/bench.mjs "$GPUBOXD_URL" baseline "$work/web-baseline.json")
echo "making $instances instances..."
/usr/bin/python3 "$here/web_sets.py" "$GPUBOXD_URL" "$image" "$instances"
(cd "$gpubox_root/web" && node e2e/bench.mjs "$GPUBOXD_URL" full "$work/web-baseline.json")
