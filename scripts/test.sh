#!/usr/bin/env bash
# test.sh - gpubox's whole test suite, as `make test` runs it (and CI through
# .ci/run): the C unit tests (cmocka, through ctest), the install test
# (tests/install: `make deb` and `make install` into scratch roots), the
# CUDA limiter's checks on a real GPU (tests/gpu/check.sh: skipped, and
# says so, without one), a short run of each libFuzzer target
# (scripts/fuzz.sh) and the end-to-end tests
# (pytest, driving the real gpuboxd over HTTP against the real dockerd).
#
# The end-to-end tests run in three groups: all of them with the SQLite
# store; the replica-set, older-route, patch and volume modules again with
# etcd (tests/e2e/conftest.py starts one etcd for that group; the etcd
# outage, compaction and migration tests start their own in the first); and
# the fleet tests (tests/e2e/fleet: three gpuboxd on three sandboxes sharing
# a three-member etcd cluster, through scripts/test-fleet.sh, which makes
# and removes its own sandboxes). The groups run side by side, the first two
# each in a sandbox of its own (scripts/lib/netns-dockerd.sh: a network
# namespace with its own dockerd, loopback and bridge), each into its own
# log, printed whole when the group ends. Where no sandbox can be made (no
# `ip netns`), or with GPUBOX_E2E_PARALLEL=0, they run one after the other,
# the first two on the default dockerd; the fleet group needs sandboxes, so
# it is left out (with a warning) when none can be made.
# GPUBOX_E2E_FLEET=0 leaves the fleet group out.
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
    local rc=$? name destroyers=() fleet_pid=""
    # the fleet group's scripts/test-fleet.sh (a grandchild: the group's
    # subshell started it) tears its own sandboxes down on TERM
    if [ -n "${fleet_log:-}" ] && [ -r "$fleet_log.pid" ] && [ ! -e "$fleet_log.status" ]; then
        read -r fleet_pid <"$fleet_log.pid" || true
        [ -n "$fleet_pid" ] && kill -TERM "$fleet_pid" 2>/dev/null || fleet_pid=""
    fi
    # the sandboxes and what still runs in them (an interrupted run's tests);
    # waited for by pid: a bare `wait` would also wait for the dockerd that
    # dockerd_ensure started in the background, which never ends by itself
    for name in ${NSD_CREATED[@]+"${NSD_CREATED[@]}"}; do
        nsd_destroy "$name" &
        destroyers+=($!)
    done
    [ ${#destroyers[@]} -eq 0 ] || wait "${destroyers[@]}" || true
    if [ -n "$fleet_pid" ]; then
        for _ in $(seq 1 300); do
            kill -0 "$fleet_pid" 2>/dev/null || break
            sleep 0.5
        done
    fi
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

echo "== web console (web/): type check, component tests (Vitest) =="
# The build (scripts/web-build.sh) ran `npm ci` into web/node_modules.
(cd web && npx --no-install tsc --noEmit && npx --no-install vitest run --reporter=dot)

echo "== unit tests (ctest) =="
ctest --test-dir "$build" --output-on-failure -j2

# libgpubox-cuda on a real GPU (no Docker); without one it says it skipped.
echo "== GPU checks (tests/gpu/check.sh) =="
tests/gpu/check.sh

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
# sets, the older routes, patch / restart / rollback, volumes, users. A pattern
# that matches no module (yet) is left out. The web console's browser tests
# (test_console.py), live usage (its idle clocks live in the store) and the
# real Prometheus run in this group only: it is the shorter one.
only_etcd=(tests/e2e/test_console.py tests/e2e/test_usage.py tests/e2e/test_prometheus.py)
etcd_modules=()
for m in tests/e2e/test_replicasets*.py tests/e2e/test_daemon_restart*.py tests/e2e/test_legacy_routes.py \
    tests/e2e/test_patch*.py tests/e2e/test_volumes*.py tests/e2e/test_users.py "${only_etcd[@]}"; do
    [[ -e $m ]] && etcd_modules+=("$m")
done
pytest=(/usr/bin/python3 -m pytest -q -p no:cacheprovider)
# The two groups: a key (for sandbox and log names), a title, pytest's args.
keys=("$e2e_store" etcd)
[ "$e2e_store" = etcd ] && keys[0]=etcd-all
titles=("$e2e_store store" "etcd store: ${etcd_modules[*]#tests/e2e/}")
args0=(--store-backend "$e2e_store" tests/e2e "${only_etcd[@]/#/--ignore=}" "$@")
args1=(--store-backend etcd "${etcd_modules[@]}" "$@")
# The third group, the fleet tests: scripts/test-fleet.sh with the same
# pytest args.
fleet=1
[ "${GPUBOX_E2E_FLEET:-1}" = 0 ] && fleet=0
fleet_title="fleet: tests/e2e/fleet (3 nodes, 3 etcd members)"
fleet_log="$build/e2e-fleet.log"
rm -f "$fleet_log.pid" "$fleet_log.status"

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

# fleet_group LOG ARGS...: scripts/test-fleet.sh, all output into LOG, its
# pid into LOG.pid (for cleanup), "EXIT SECONDS" into LOG.status.
fleet_group() {
    local log=$1 start=$SECONDS rc=0 pid
    shift
    scripts/test-fleet.sh "$build" "$@" >"$log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$log.pid"
    wait "$pid" || rc=$?
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
    # Every group reports even when an earlier one fails; the status says whether all passed.
    echo "== end-to-end tests (pytest), ${titles[0]} =="
    "${pytest[@]}" "${args0[@]}" || e2e_rc=$?
    echo "== end-to-end tests (pytest), ${titles[1]} =="
    "${pytest[@]}" "${args1[@]}" || e2e_rc=$?
    if [ $fleet = 1 ] && [ "${GPUBOX_E2E_PARALLEL:-1}" = 0 ]; then
        echo "== end-to-end tests, ${fleet_title} (scripts/test-fleet.sh) =="
        rc=0
        scripts/test-fleet.sh "$build" "$@" || rc=$?
        if [ $rc = 77 ]; then
            echo "test: WARNING: the fleet tests cannot run here (no network namespaces); left out" >&2
        elif [ $rc != 0 ]; then
            e2e_rc=$rc
        fi
    elif [ $fleet = 1 ]; then
        echo "test: WARNING: the fleet tests (tests/e2e/fleet) need sandboxes, and none can be made here: left out" >&2
    fi
    exit $e2e_rc
fi

logs=("$build/e2e-${keys[0]}.log" "$build/e2e-${keys[1]}.log")
rm -f "${logs[0]}.status" "${logs[1]}.status"
started=$SECONDS
e2e_group "${names[0]}" "${logs[0]}" "${args0[@]}" &
pids=($!)
e2e_group "${names[1]}" "${logs[1]}" "${args1[@]}" &
pids+=($!)
where=("sandbox ${names[0]}" "sandbox ${names[1]}")
pending=(0 1)
if [ $fleet = 1 ]; then
    keys+=(fleet)
    titles+=("$fleet_title")
    logs+=("$fleet_log")
    where+=("sandboxes of scripts/test-fleet.sh")
    fleet_group "$fleet_log" "$@" &
    pids+=($!)
    pending+=(2)
fi
groups_note=""
for i in "${pending[@]}"; do groups_note+="${groups_note:+; }${titles[i]} (log ${logs[i]})"; done
echo "== end-to-end tests (pytest), in parallel: $groups_note =="

# Each group's output is printed whole as it ends, the first to end first.
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
        if [ "${keys[i]}" = fleet ] && [ "$rc" = 77 ]; then
            verdict="LEFT OUT (no network namespaces for its nodes)"
        elif [ "$rc" != 0 ]; then
            verdict="FAILED (exit $rc)"
            e2e_rc=1
        fi
        echo "== end-to-end tests (pytest), ${titles[i]} [${where[i]}] =="
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
