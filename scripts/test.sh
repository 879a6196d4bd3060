#!/usr/bin/env bash
# test.sh - gpubox's whole test suite, as `make test` runs it (and CI through
# .ci/run): the C unit tests (cmocka, through ctest), the install test
# (tests/install: `make deb` and `make install` into scratch roots), a short
# run of each libFuzzer target (scripts/fuzz.sh) and the end-to-end tests
# (pytest, driving the real gpuboxd over HTTP against the real dockerd).
#
# The end-to-end tests run in two groups: all of them with the SQLite store,
# and the replica-set, older-route, patch and volume modules again with etcd
# (tests/e2e/conftest.py starts one etcd for that group; the etcd outage,
# compaction and migration tests start their own in the first). The groups
# run side by side, each in a sandbox of its own (scripts/lib/netns-dockerd.sh:
# a network namespace with its own dockerd, loopback and bridge), each into
# its own log, printed whole when the group ends. Where no sandbox can be
# made (no `ip netns`), or with GPUBOX_E2E_PARALLEL=0, they run one after the
# other on the default dockerd.
#
# It starts a dockerd if none answers (with the fake
# nvidia-container-runtime-hook on its PATH) for the unit tests, imports the
# busybox-static test image if absent, and afterwards removes only what it
# created, sandboxes included.
#
# Usage: scripts/test.sh BUILD_DIR [pytest args...]
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: test.sh BUILD_DIR}" && pwd)
shift
cd "$gpubox_root"

. scripts/lib/dockerd.sh
. scripts/lib/testimage.sh
. scripts/lib/netns-dockerd.sh

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
    local rc=$? name destroyers=()
    # the sandboxes and what still runs in them (an interrupted run's tests);
    # waited for by pid: a bare `wait` would also wait for the dockerd that
    # dockerd_ensure started in the background, which never ends by itself
    for name in ${NSD_CREATED[@]+"${NSD_CREATED[@]}"}; do
        nsd_destroy "$name" &
        destroyers+=($!)
    done
    [ ${#destroyers[@]} -eq 0 ] || wait "${destroyers[@]}" || true
    testimage_remove_if_created "$GPUBOX_TEST_IMAGE"
    dockerd_stop_if_started
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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

# The package and `make install` of this build, into scratch directories
# (no Docker, nothing installed on the machine).
echo "== installing: make deb, make install (tests/install) =="
tests/install/test_install.sh "$build"

# A short run of every libFuzzer target (scripts/fuzz.sh builds them with
# clang in build/fuzz the first time); `make fuzz` runs them longer.
echo "== fuzz targets (libFuzzer, ${FUZZ_SECONDS_TEST:-5}s each) =="
scripts/fuzz.sh "${FUZZ_SECONDS_TEST:-5}"

e2e_store=${GPUBOX_E2E_STORE:-sqlite}
# The modules whose behaviour lives in the store, again on etcd: replica
# sets, the older routes, patch / restart / rollback, volumes. A pattern
# that matches no module (yet) is left out.
etcd_modules=()
for m in tests/e2e/test_replicasets*.py tests/e2e/test_daemon_restart*.py tests/e2e/test_legacy_routes.py \
    tests/e2e/test_patch*.py tests/e2e/test_volumes*.py; do
    [[ -e $m ]] && etcd_modules+=("$m")
done
pytest=(/usr/bin/python3 -m pytest -q -p no:cacheprovider)
# The two groups: a key (for sandbox and log names), a title, pytest's args.
keys=("$e2e_store" etcd)
[ "$e2e_store" = etcd ] && keys[0]=etcd-all
titles=("$e2e_store store" "etcd store: ${etcd_modules[*]#tests/e2e/}")
args0=(--store-backend "$e2e_store" tests/e2e "$@")
args1=(--store-backend etcd "${etcd_modules[@]}" "$@")

fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# sandbox_make NAME KEY: a sandbox with the test image, whose dockerd has
# the (fake) nvidia driver.
sandbox_make() {
    nsd_up "$1" "$build/dockerd-$2.log" --fake-hook &&
        nsd_import_image "$1" "$GPUBOX_TEST_IMAGE" || return 1
    if ! DOCKER_HOST=$(nsd_docker_host "$1") dockerd_has_nvidia_driver "$GPUBOX_TEST_IMAGE"; then
        echo "test: sandbox $1: its dockerd has no \"nvidia\" device driver (see $build/dockerd-$2.log)" >&2
        return 1
    fi
}

# e2e_group NAME LOG ARGS...: pytest in sandbox NAME, all output into LOG;
# "EXIT SECONDS" into LOG.status when it ends.
e2e_group() {
    local name=$1 log=$2 start=$SECONDS rc=0
    shift 2
    nsd_exec "$name" "${pytest[@]}" "$@" >"$log" 2>&1 </dev/null || rc=$?
    echo "$rc $((SECONDS - start))" >"$log.status"
    return "$rc"
}

parallel=1
if [ "${GPUBOX_E2E_PARALLEL:-1}" = 0 ]; then
    echo "== end-to-end tests: GPUBOX_E2E_PARALLEL=0, one group after the other on the default dockerd =="
    parallel=0
else
    echo "== end-to-end test sandboxes (network namespace + own dockerd per group) =="
    nsd_reap_stale || true
    names=()
    for i in 0 1; do
        names+=("gpubox-${keys[i]}-$$")
        if ! sandbox_make "${names[i]}" "${keys[i]}"; then
            parallel=0
            break
        fi
    done
    if [ $parallel = 0 ]; then
        nsd_destroy_all || true
        cat >&2 <<MSG

########################################################################
test: WARNING: cannot make a sandbox (a network namespace with its own
test: dockerd) for each end-to-end group; see the messages above. Running
test: the groups ONE AFTER THE OTHER on the default dockerd instead, which
test: takes longer (their times add up).
########################################################################

MSG
    fi
fi

e2e_rc=0
if [ $parallel = 0 ]; then
    # Both groups report even when the first fails; the status says whether both passed.
    echo "== end-to-end tests (pytest), ${titles[0]} =="
    "${pytest[@]}" "${args0[@]}" || e2e_rc=$?
    echo "== end-to-end tests (pytest), ${titles[1]} =="
    "${pytest[@]}" "${args1[@]}" || e2e_rc=$?
    exit $e2e_rc
fi

logs=("$build/e2e-${keys[0]}.log" "$build/e2e-${keys[1]}.log")
rm -f "${logs[0]}.status" "${logs[1]}.status"
started=$SECONDS
e2e_group "${names[0]}" "${logs[0]}" "${args0[@]}" &
pids=($!)
e2e_group "${names[1]}" "${logs[1]}" "${args1[@]}" &
pids+=($!)
echo "== end-to-end tests (pytest), in parallel: ${titles[0]} (log ${logs[0]}); ${titles[1]} (log ${logs[1]}) =="

# Each group's output is printed whole as it ends, the first to end first.
pending=(0 1)
next_note=$((SECONDS + 60))
while [ ${#pending[@]} -gt 0 ]; do
    still=()
    for i in "${pending[@]}"; do
        if [ ! -e "${logs[i]}.status" ] && kill -0 "${pids[i]}" 2>/dev/null; then
            still+=("$i")
            continue
        fi
        rc=0
        wait "${pids[i]}" || rc=$?
        took=$((SECONDS - started))
        [ -r "${logs[i]}.status" ] && read -r rc took <"${logs[i]}.status"
        verdict=passed
        if [ "$rc" != 0 ]; then
            verdict="FAILED (exit $rc)"
            e2e_rc=1
        fi
        echo "== end-to-end tests (pytest), ${titles[i]} [sandbox ${names[i]}] =="
        cat "${logs[i]}"
        echo "== end-to-end tests, ${keys[i]}: $verdict in $(fmt_time "$took") (log ${logs[i]}) =="
    done
    pending=(${still[@]+"${still[@]}"})
    if [ ${#pending[@]} -gt 0 ] && [ $SECONDS -ge $next_note ]; then
        running=()
        for i in "${pending[@]}"; do running+=("${keys[i]}"); done
        echo "   ... $(fmt_time $((SECONDS - started))): still running: ${running[*]}"
        next_note=$((SECONDS + 60))
    fi
    [ ${#pending[@]} -eq 0 ] || sleep 1
done
exit $e2e_rc
