#!/usr/bin/env bash
# test.sh - gpubox's whole test suite, as `make test` runs it (and CI through
# .ci/run): the C unit tests (cmocka, through ctest), a short run of each
# libFuzzer target (scripts/fuzz.sh) and the end-to-end tests (pytest,
# driving the real gpuboxd over HTTP against the real dockerd).
#
# It starts a dockerd if none answers (with the fake
# nvidia-container-runtime-hook on its PATH), imports the busybox-static test
# image if absent, and afterwards removes only what it created.
#
# Usage: scripts/test.sh BUILD_DIR [pytest args...]
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: test.sh BUILD_DIR}" && pwd)
shift
cd "$gpubox_root"

. scripts/lib/dockerd.sh
. scripts/lib/testimage.sh

export GPUBOX_TEST_IMAGE=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
export GPUBOXD="$build/gpuboxd"
export GPUBOX_CLI="$build/gpubox"
export GPUBOX_BUILD_DIR="$build"
export GPUBOX_SOURCE_DIR="$gpubox_root"
# LeakSanitizer needs ptrace-like access that some sandboxes refuse; it runs
# wherever it can and reports through the exit status.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

cleanup() {
    local rc=$?
    testimage_remove_if_created "$GPUBOX_TEST_IMAGE"
    dockerd_stop_if_started
    exit $rc
}
trap cleanup EXIT

dockerd_ensure "$build/dockerd.log" --fake-hook
testimage_ensure "$GPUBOX_TEST_IMAGE"
if ! dockerd_has_nvidia_driver "$GPUBOX_TEST_IMAGE"; then
    cat >&2 <<MSG
test: the dockerd that answers has no "nvidia" device driver, so GPU attach
cannot be tested. Stop it and let the tests start their own, or restart it with
$gpubox_root/tests/fakes/bin on its PATH (the fake nvidia-container-runtime-hook).
MSG
    exit 1
fi

echo "== OpenAPI document (tools/openapi) =="
# The validator and a full YAML parser, pinned in tools/openapi's lock file;
# installed once per checkout. The e2e tests use them too.
if [ ! -d tools/openapi/node_modules ]; then
    (cd tools/openapi && npm ci --no-audit --no-fund --loglevel=error)
fi
(cd tools/openapi && npx --no-install swagger-cli validate ../../docs/openapi.yaml)

echo "== unit tests (ctest) =="
ctest --test-dir "$build" --output-on-failure -j2

# A short run of every libFuzzer target (scripts/fuzz.sh builds them with
# clang in build/fuzz the first time); `make fuzz` runs them longer.
echo "== fuzz targets (libFuzzer, ${FUZZ_SECONDS_TEST:-5}s each) =="
scripts/fuzz.sh "${FUZZ_SECONDS_TEST:-5}"

echo "== end-to-end tests (pytest) =="
/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e "$@"
