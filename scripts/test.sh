#!/usr/bin/env bash
# test.sh - gpubox's whole test suite, as `make test` runs it (and CI through
# .ci/run): the C unit tests (cmocka, through ctest), a short run of each
# libFuzzer target (scripts/fuzz.sh) and the end-to-end tests (pytest,
# driving the real gpuboxd over HTTP against the real dockerd).
#
# The end-to-end tests run twice: all of them with the SQLite store, then
# the replica-set, older-route, patch and volume modules again with etcd
# (tests/e2e/conftest.py starts one etcd for that run; the etcd outage,
# compaction and migration tests start their own in the first run).
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

echo "== end-to-end tests (pytest), ${GPUBOX_E2E_STORE:-sqlite} store =="
# Both runs report even when the first fails; the status says whether both passed.
e2e_rc=0
/usr/bin/python3 -m pytest -q -p no:cacheprovider --store-backend "${GPUBOX_E2E_STORE:-sqlite}" tests/e2e "$@" || e2e_rc=$?

# The modules whose behaviour lives in the store, again on etcd: replica
# sets, the older routes, patch / restart / rollback, volumes. A pattern
# that matches no module (yet) is left out.
etcd_modules=()
for m in tests/e2e/test_replicasets*.py tests/e2e/test_legacy_routes.py tests/e2e/test_patch*.py \
    tests/e2e/test_restart_rollback*.py tests/e2e/test_volumes*.py; do
    [[ -e $m ]] && etcd_modules+=("$m")
done
echo "== end-to-end tests (pytest), etcd store: ${etcd_modules[*]#tests/e2e/} =="
/usr/bin/python3 -m pytest -q -p no:cacheprovider --store-backend etcd "${etcd_modules[@]}" "$@" || e2e_rc=$?
exit $e2e_rc
