#!/usr/bin/env bash
# test-fleet.sh - the fleet tests (tests/e2e/fleet): several gpubox servers
# on this one machine, each on a node of its own, sharing one three-member
# etcd cluster. scripts/test.sh runs it as its third end-to-end group.
#
# It makes three test sandboxes (scripts/lib/netns-dockerd.sh: a network
# namespace with its own dockerd, with the fake nvidia hook and the test
# image) as the nodes a, b and c, and a fourth network namespace without a
# dockerd as the hub; joins them with a bridge in the hub
# (scripts/lib/fleet-net.sh: the hub 10.77.0.1, node i 10.77.0.(10+i));
# then runs pytest on tests/e2e/fleet inside the hub's namespace, where the
# tests start the etcd members and reach every node, with
#   GPUBOX_FLEET_HUB, GPUBOX_FLEET_NODES, GPUBOX_FLEET_DOCKER_HOSTS,
#   GPUBOX_FLEET_NET, GPUBOX_FLEET_WORKDIR
# (tests/e2e/fleet/fleetutil.py says what each is). Whatever way it ends,
# an EXIT trap tears everything down: pytest and etcd, the gpuboxd, the
# containers, the dockerds, the namespaces (the veths go with them).
#
# Usage: scripts/test-fleet.sh BUILD_DIR [pytest args...]
#   e.g. scripts/test-fleet.sh build/test -x -k partition
# A pytest arg that names a path replaces the default tests/e2e/fleet.
# Exit status: pytest's; 77 when this machine cannot make network
# namespaces at all (the fleet tests cannot run there). Needs root. Logs:
# BUILD_DIR/dockerd-fleet-<node>.log; gpuboxd's and etcd's logs are in
# pytest's temporary directories (and in the failure reports).
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: test-fleet.sh BUILD_DIR [pytest args...]}" && pwd)
shift
cd "$gpubox_root"

. scripts/lib/dockerd.sh
. scripts/lib/testimage.sh
. scripts/lib/netns-dockerd.sh
. scripts/lib/fleet-net.sh

export GPUBOX_TEST_IMAGE=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
export GPUBOXD="$build/gpuboxd"
export GPUBOX_CLI="$build/gpubox"
export GPUBOX_BUILD_DIR="$build"
export GPUBOX_SOURCE_DIR="$gpubox_root"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

started=$SECONDS
fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

makers=()
cleanup() {
    local rc=$? name destroyers=()
    # node set-ups still under way (an interrupted start): ended first
    [ ${#makers[@]} -eq 0 ] || kill -TERM "${makers[@]}" 2>/dev/null || true
    [ ${#makers[@]} -eq 0 ] || wait "${makers[@]}" 2>/dev/null || true
    # Every sandbox at once; nsd_destroy ends what runs in it first (pytest
    # and etcd in the hub, gpuboxd in the nodes). Waited for by pid: a bare
    # `wait` would wait for any other child too.
    for name in ${NSD_CREATED[@]+"${NSD_CREATED[@]}"}; do
        nsd_destroy "$name" &
        destroyers+=($!)
    done
    [ ${#destroyers[@]} -eq 0 ] || wait "${destroyers[@]}" || true
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in ip bridge nsenter iptables dockerd etcd; do
    if ! command -v "$tool" >/dev/null; then
        echo "test-fleet: $tool is missing; run scripts/install-deps.sh test" >&2
        exit 1
    fi
done
[ -x "$GPUBOXD" ] || { echo "test-fleet: no $GPUBOXD; build it first (make build-test)" >&2; exit 1; }
if ! unshare --net true 2>/dev/null; then
    echo "test-fleet: cannot make a network namespace here (root and CAP_SYS_ADMIN needed): the fleet tests cannot run" >&2
    exit 77
fi

# Names at most 40 characters (netns-dockerd.sh), unique per run.
tag=$$
hub="gpubox-fleet-hub-$tag"
labels=(a b c)
nodes=()
for l in "${labels[@]}"; do nodes+=("gpubox-fleet-$l-$tag"); done

# make_node NAME LABEL: a sandbox with the test image, whose dockerd has
# the (fake) nvidia driver (as test.sh's sandbox_make).
make_node() {
    nsd_up "$1" "$build/dockerd-fleet-$2.log" --fake-hook &&
        nsd_import_image "$1" "$GPUBOX_TEST_IMAGE" || return 1
    if ! DOCKER_HOST=$(nsd_docker_host "$1") dockerd_has_nvidia_driver "$GPUBOX_TEST_IMAGE"; then
        echo "test-fleet: node $1: its dockerd has no \"nvidia\" device driver (see $build/dockerd-fleet-$2.log)" >&2
        return 1
    fi
}

echo "== fleet: sandboxes (hub $hub; nodes ${nodes[*]}) =="
nsd_reap_stale || true
nsd_create "$hub"
# The nodes side by side, each in a subshell (its output into a file,
# printed once all are made): nsd_create's note of each in NSD_CREATED
# stays in the subshell, so the names are noted here, first.
NSD_CREATED+=("${nodes[@]}")
for i in "${!nodes[@]}"; do
    make_node "${nodes[i]}" "${labels[i]}" >"$build/fleet-setup-${labels[i]}.log" 2>&1 &
    makers+=($!)
done
made=1
for i in "${!nodes[@]}"; do
    wait "${makers[i]}" || made=0
    cat "$build/fleet-setup-${labels[i]}.log"
done
makers=()
[ $made = 1 ] || { echo "test-fleet: cannot make the nodes; see above" >&2; exit 1; }
fleet_net_up "$hub" "${nodes[@]}"

# etcd's data on a tmpfs in the hub's directory (nsd_destroy unmounts it):
# on a loaded machine a slow fsync would hold up raft's heartbeats and set
# off elections no test asked for. Where no tmpfs can be mounted, the tests
# use pytest's temporary directory.
workdir="$NSD_RUN_BASE/$hub/work"
mkdir -p "$workdir"
if ! mount -t tmpfs -o size=512m,mode=0700 gpubox-fleet "$workdir"; then
    echo "test-fleet: no tmpfs for etcd's data; it goes to pytest's temporary directory" >&2
    workdir=""
fi

hosts=()
for n in "${nodes[@]}"; do hosts+=("$(nsd_docker_host "$n")"); done
export GPUBOX_FLEET_HUB="$hub"
GPUBOX_FLEET_NODES=$(IFS=,; echo "${nodes[*]}")
GPUBOX_FLEET_DOCKER_HOSTS=$(IFS=,; echo "${hosts[*]}")
export GPUBOX_FLEET_NODES GPUBOX_FLEET_DOCKER_HOSTS
export GPUBOX_FLEET_NET="$FLEET_NET"
export GPUBOX_FLEET_WORKDIR="$workdir"
# The hub has no dockerd: a test that forgot to say which node's dockerd it
# means fails at once rather than finding another one.
export DOCKER_HOST="unix://$NSD_RUN_BASE/$hub/no-dockerd-in-the-hub.sock"

targets=(tests/e2e/fleet)
for a in "$@"; do
    if [[ $a != -* ]] && [ -e "${a%%::*}" ]; then targets=(); fi
done
shown="${targets[*]+${targets[*]} }$*"
echo "== fleet: pytest ${shown% } (in the hub's network namespace; $(fmt_time $((SECONDS - started))) to set up) =="
rc=0
nsenter --net="/var/run/netns/$hub" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
    ${targets[@]+"${targets[@]}"} "$@" </dev/null &
pytest_pid=$!
wait "$pytest_pid" || rc=$?
verdict=passed
[ $rc = 0 ] || verdict="FAILED (exit $rc)"
echo "== fleet: $verdict in $(fmt_time $((SECONDS - started))) (teardown follows) =="
exit $rc
