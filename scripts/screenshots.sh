#!/usr/bin/env bash
# screenshots.sh BUILD_DIR - refresh the console's screenshots in docs/img
# (docs/web.md shows them): the browser scenario "screenshots" of
# tests/e2e/test_console.py sets up a lab (instances, shares, volumes, a
# second user) on a gpuboxd with four fake cards and photographs each page.
# Starts a dockerd if none answers, as scripts/test.sh does.
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: screenshots.sh BUILD_DIR}" && pwd)
cd "$gpubox_root"

. scripts/lib/dockerd.sh
. scripts/lib/testimage.sh

export GPUBOX_TEST_IMAGE=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
export GPUBOXD="$build/gpuboxd" GPUBOX_CLI="$build/gpubox"
export GPUBOX_BUILD_DIR="$build" GPUBOX_SOURCE_DIR="$gpubox_root"
export GPUBOX_SCREENSHOTS="$gpubox_root/docs/img"
cleanup() {
    local rc=$?
    testimage_remove_if_created "$GPUBOX_TEST_IMAGE"
    dockerd_stop_if_started
    exit $rc
}
trap cleanup EXIT
dockerd_ensure "$build/dockerd.log" --fake-hook
testimage_ensure "$GPUBOX_TEST_IMAGE"
mkdir -p "$GPUBOX_SCREENSHOTS"
/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e/test_console.py -k photographed
ls -l "$GPUBOX_SCREENSHOTS"
