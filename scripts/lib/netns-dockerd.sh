# netns-dockerd.sh - test sandboxes: each one a network namespace with its own
# dockerd in it, so groups of end-to-end tests can run side by side on one
# machine without sharing container names, published ports, loopback ports
# or a default bridge. Sourced by scripts/test.sh; the base of the fleet
# tests (several gpuboxd, each on its own dockerd).
#
# A sandbox NAME ([A-Za-z0-9_.-], at most 40 characters) is:
#   /var/run/netns/NAME                 the network namespace (`ip netns`), lo up
#   $NSD_RUN_BASE/NAME   (/run/gpubox-test/NAME)      dockerd's socket
#       (docker.sock), pid file, exec root (exec/), config file, owner
#   $NSD_DATA_BASE/NAME  (/var/lib/gpubox-test/NAME)  dockerd's data root
#   a dockerd started with `nsenter --net` (not `ip netns exec`, which mounts
#   a fresh /sys that hides the cgroup mounts, so dockerd refuses to start),
#   its own managed containerd and containerd namespaces gpubox-test-NAME
#   (and -plugins), so it never meets another dockerd's containers.
# Only the network is separate: mounts, loop devices, /sys, /proc and the
# file system are the host's, so what the tests mount is seen by the
# sandbox's dockerd. Inside, 127.0.0.1 is the sandbox's own loopback; a
# container's published port answers there (docker-proxy runs in it).
#
# nsd_up NAME LOGFILE [--fake-hook]
#   nsd_create + nsd_start_dockerd.
# nsd_create NAME
#   Makes the netns and the directories. Stale state of the same name (a
#   previous run that crashed) is torn down first; a sandbox of that name
#   whose owner (the shell that made it) still runs is refused.
# nsd_start_dockerd NAME LOGFILE [--fake-hook]
#   Starts dockerd in the sandbox and waits until it answers (60 s). With
#   --fake-hook, tests/fakes/bin comes first on its PATH (the fake
#   nvidia-container-runtime-hook, as dockerd_ensure --fake-hook).
# nsd_docker_host NAME
#   Prints the sandbox dockerd's DOCKER_HOST (unix://.../docker.sock).
#   Docker clients reach it from anywhere; no netns needed.
# nsd_import_image NAME IMAGE
#   testimage_ensure IMAGE against the sandbox's dockerd.
# nsd_exec NAME COMMAND [ARGS...]
#   Runs a program (not a shell function) in the sandbox's netns with
#   DOCKER_HOST set to its dockerd; the host's mounts, /sys, cwd and
#   environment otherwise. Returns the program's exit status.
# nsd_destroy NAME
#   Ends what runs in the netns (TERM, then KILL), removes the containers,
#   stops dockerd, kills container processes a crashed dockerd left, unmounts
#   whatever is left under the sandbox's directories, removes them and the
#   netns. Idempotent; fine on a half-made or crashed sandbox.
# nsd_destroy_all
#   nsd_destroy for every sandbox this shell made (for an EXIT trap).
# nsd_reap_stale
#   nsd_destroy for every sandbox whose owner no longer runs (crashed runs).
#
# Needs root, iproute2 (`ip netns`), util-linux (nsenter) and dockerd.
# Safe under `set -euo pipefail`: no function reads an unset variable, and a
# failure is a return status, never an exit.

gpubox_root=${gpubox_root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
DOCKER=${DOCKER:-/usr/bin/docker}
NSD_RUN_BASE=${NSD_RUN_BASE:-/run/gpubox-test}
NSD_DATA_BASE=${NSD_DATA_BASE:-/var/lib/gpubox-test}
NSD_CREATED=()
if ! declare -F testimage_ensure >/dev/null; then
    # shellcheck source=scripts/lib/testimage.sh
    . "$gpubox_root/scripts/lib/testimage.sh"
fi

_nsd_valid_name() {
    local name=${1:-}
    if [[ ! $name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$ ]]; then
        echo "netns-dockerd: bad sandbox name '$name' ([A-Za-z0-9_.-], at most 40)" >&2
        return 1
    fi
}

nsd_docker_host() {
    echo "unix://$NSD_RUN_BASE/${1:?nsd_docker_host NAME}/docker.sock"
}

_nsd_docker() {
    local name=$1
    shift
    "$DOCKER" -H "$(nsd_docker_host "$name")" "$@"
}

# The start time of pid (clock ticks since boot), to tell a live owner from
# a reused pid; empty if pid does not run.
_nsd_start_time() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    local -a f
    # field 22 of stat; after "pid (comm) " it is the 20th
    read -r -a f <<<"${stat##*) }"
    echo "${f[19]:-}"
}

# True if the shell that made sandbox NAME still runs.
_nsd_owner_alive() {
    local owner="$NSD_RUN_BASE/$1/owner" pid start
    [ -r "$owner" ] || return 1
    read -r pid start <"$owner" || return 1
    [ -n "${pid:-}" ] && [ -n "${start:-}" ] || return 1
    [ "$(_nsd_start_time "$pid")" = "$start" ]
}

_nsd_owned_by_me() {
    local owner="$NSD_RUN_BASE/$1/owner" pid start
    [ -r "$owner" ] || return 1
    read -r pid start <"$owner" || return 1
    [ "${pid:-}" = "$$" ] && [ "${start:-}" = "$(_nsd_start_time $$)" ]
}

# The pid of sandbox NAME's dockerd if it runs, else nothing.
_nsd_dockerd_pid() {
    local name=$1 pid
    pid=$(cat "$NSD_RUN_BASE/$name/dockerd.pid" 2>/dev/null) || return 0
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    # the pid must still be that dockerd, not a reused pid
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" |
        grep -qF -- "--exec-root $NSD_RUN_BASE/$name/exec " && echo "$pid"
    return 0
}

_nsd_wait_gone() {
    local seconds=$1 pid
    shift
    for _ in $(seq 1 $((seconds * 10))); do
        local left=0
        for pid in "$@"; do
            kill -0 "$pid" 2>/dev/null && left=1
        done
        [ $left = 1 ] || return 0
        sleep 0.1
    done
    return 1
}

# Pids of the processes in sandbox NAME's netns; with "clients", only those
# that are not the Docker machinery (dockerd, containerd, shims, proxies).
_nsd_netns_pids() {
    local name=$1 which=${2:-all} pid comm
    [ -e "/var/run/netns/$name" ] || return 0
    for pid in $(ip netns pids "$name" 2>/dev/null); do
        [ "$pid" = "$$" ] || [ "$pid" = "${BASHPID:-}" ] && continue
        if [ "$which" = clients ]; then
            comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
            case $comm in
            dockerd | containerd | containerd-shim* | docker-proxy | runc) continue ;;
            esac
        fi
        echo "$pid"
    done
}

# TERM the processes, KILL what is left after `seconds`.
_nsd_end() {
    local seconds=$1
    shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    _nsd_wait_gone "$seconds" "$@" && return 0
    kill -KILL "$@" 2>/dev/null || true
    _nsd_wait_gone 5 "$@" || true
}

# Mount points at or under dir, deepest first.
_nsd_mounts_under() {
    local dir=$1
    awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print length($5), $5 }' /proc/self/mountinfo |
        sort -rn | cut -d' ' -f2-
}

_nsd_unmount_under() {
    local dir=$1 m
    for _ in 1 2 3; do
        local any=0
        while IFS= read -r m; do
            [ -n "$m" ] || continue
            any=1
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        done < <(_nsd_mounts_under "$dir")
        [ $any = 1 ] || return 0
    done
    [ -z "$(_nsd_mounts_under "$dir")" ]
}

# Containers a dockerd that died without stopping them left running: their
# processes are in cgroups named after their ids (data root's containers/).
_nsd_kill_orphan_containers() {
    local data=$1 cdir id cg pids
    [ -d "$data/containers" ] || return 0
    for cdir in "$data"/containers/*/; do
        [ -d "$cdir" ] || continue
        id=$(basename "$cdir")
        [[ $id =~ ^[0-9a-f]{64}$ ]] || continue
        while IFS= read -r cg; do
            pids=$(tr '\n' ' ' <"$cg/cgroup.procs" 2>/dev/null) || true
            # shellcheck disable=SC2086
            [ -z "${pids// /}" ] || kill -KILL $pids 2>/dev/null || true
        done < <(find /sys/fs/cgroup -maxdepth 4 -type d -name "$id" 2>/dev/null)
        while IFS= read -r cg; do
            rmdir "$cg" 2>/dev/null || true
        done < <(find /sys/fs/cgroup -maxdepth 4 -depth -type d -name "$id" 2>/dev/null)
    done
}

nsd_create() {
    local name=${1:-}
    _nsd_valid_name "$name" || return 1
    local run="$NSD_RUN_BASE/$name" data="$NSD_DATA_BASE/$name"
    if [ -e "$run" ] || [ -e "$data" ] || [ -e "/var/run/netns/$name" ]; then
        if _nsd_owner_alive "$name" && ! _nsd_owned_by_me "$name"; then
            echo "netns-dockerd: sandbox $name belongs to pid $(cut -d' ' -f1 "$run/owner") which still runs" >&2
            return 1
        fi
        echo "netns-dockerd: removing what is left of sandbox $name"
        nsd_destroy "$name" || return 1
    fi
    mkdir -p "$run/exec" "$data" || return 1
    chmod 0700 "$run" "$data"
    echo "$$ $(_nsd_start_time $$)" >"$run/owner"
    # remembered before anything else exists, so nsd_destroy_all finds it
    NSD_CREATED+=("$name")
    if ! ip netns add "$name"; then
        echo "netns-dockerd: cannot create network namespace $name (ip netns add; root and CAP_SYS_ADMIN needed)" >&2
        return 1
    fi
    if ! nsenter --net="/var/run/netns/$name" ip link set lo up; then
        echo "netns-dockerd: cannot bring up lo in network namespace $name" >&2
        return 1
    fi
}

nsd_start_dockerd() {
    local name=${1:-} log=${2:-} hook=${3:-}
    _nsd_valid_name "$name" || return 1
    [ -n "$log" ] || { echo "netns-dockerd: usage: nsd_start_dockerd NAME LOGFILE [--fake-hook]" >&2; return 1; }
    local run="$NSD_RUN_BASE/$name" data="$NSD_DATA_BASE/$name"
    if [ ! -e "/var/run/netns/$name" ] || [ ! -d "$run" ]; then
        echo "netns-dockerd: no sandbox $name; nsd_create it first" >&2
        return 1
    fi
    local path=$PATH
    [ "$hook" = --fake-hook ] && path="$gpubox_root/tests/fakes/bin:$PATH"
    # Its own (empty) config file: whatever /etc/docker/daemon.json says
    # (hosts, data-root, ...) is for the host's dockerd.
    echo '{}' >"$run/daemon.json"
    mkdir -p "$(dirname "$log")"
    PATH=$path setsid nsenter --net="/var/run/netns/$name" dockerd \
        --config-file "$run/daemon.json" \
        --host "unix://$run/docker.sock" \
        --pidfile "$run/dockerd.pid" \
        --data-root "$data" \
        --exec-root "$run/exec" \
        --containerd-namespace "gpubox-test-$name" \
        --containerd-plugins-namespace "gpubox-test-$name-plugins" \
        >"$log" 2>&1 </dev/null &
    local pid=$!
    # not a job of this shell: nsd_destroy ends it, by its pid file
    disown "$pid" 2>/dev/null || true
    for _ in $(seq 1 120); do
        if _nsd_docker "$name" version --format '{{.Server.Version}}' >/dev/null 2>&1; then
            echo "netns-dockerd: sandbox $name: dockerd $(_nsd_docker "$name" version --format '{{.Server.Version}}') on $(nsd_docker_host "$name") (log: $log)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "netns-dockerd: sandbox $name: dockerd exited during start-up; last lines of $log:" >&2
            tail -n 20 "$log" >&2
            return 1
        fi
        sleep 0.5
    done
    echo "netns-dockerd: sandbox $name: dockerd not answering after 60 s; see $log" >&2
    return 1
}

nsd_up() {
    nsd_create "${1:-}" && nsd_start_dockerd "$@"
}

nsd_import_image() {
    local name=${1:-} image=${2:-} created=${TESTIMAGE_CREATED:-}
    _nsd_valid_name "$name" || return 1
    DOCKER_HOST=$(nsd_docker_host "$name") testimage_ensure "$image" || true
    # TESTIMAGE_CREATED speaks of the default dockerd's image: the sandbox's
    # goes with the sandbox
    TESTIMAGE_CREATED=$created
    if ! _nsd_docker "$name" image inspect "$image" >/dev/null 2>&1; then
        echo "netns-dockerd: sandbox $name: cannot import the test image $image" >&2
        return 1
    fi
}

nsd_exec() {
    local name=${1:-}
    _nsd_valid_name "$name" || return 1
    shift
    nsenter --net="/var/run/netns/$name" env DOCKER_HOST="$(nsd_docker_host "$name")" "$@"
}

nsd_destroy() {
    local name=${1:-}
    _nsd_valid_name "$name" || return 1
    local run="$NSD_RUN_BASE/$name" data="$NSD_DATA_BASE/$name" ok=0 pid ids

    # 1. whatever else runs in the netns (tests, gpuboxd, etcd), so nothing
    # makes containers while they are removed
    # shellcheck disable=SC2046
    _nsd_end 10 $(_nsd_netns_pids "$name" clients)

    # 2. the containers, then dockerd (it stops its containerd)
    pid=$(_nsd_dockerd_pid "$name")
    if [ -n "$pid" ]; then
        ids=$(timeout 30 "$DOCKER" -H "$(nsd_docker_host "$name")" ps -aq 2>/dev/null | tr '\n' ' ') || true
        # shellcheck disable=SC2086
        [ -z "${ids// /}" ] || timeout 120 "$DOCKER" -H "$(nsd_docker_host "$name")" rm -f -v $ids >/dev/null 2>&1 || true
        _nsd_end 30 "$pid"
    fi

    # 3. what is left in the netns (containerd, shims, docker-proxy) and the
    # containers of a dockerd that died without stopping them
    # shellcheck disable=SC2046
    _nsd_end 5 $(_nsd_netns_pids "$name")
    _nsd_kill_orphan_containers "$data"

    # 4. mounts (overlays, shm, netns files) and directories
    local dir
    for dir in "$run" "$data"; do
        [ -e "$dir" ] || continue
        if ! _nsd_unmount_under "$dir"; then
            echo "netns-dockerd: sandbox $name: still mounted under $dir, left in place:" >&2
            _nsd_mounts_under "$dir" >&2
            ok=1
            continue
        fi
        rm -rf --one-file-system "$dir" || ok=1
    done

    # 5. the netns
    if [ -e "/var/run/netns/$name" ]; then
        ip netns delete "$name" 2>/dev/null || {
            umount -l "/var/run/netns/$name" 2>/dev/null || true
            rm -f "/var/run/netns/$name" 2>/dev/null || true
        }
        if [ -e "/var/run/netns/$name" ]; then
            echo "netns-dockerd: sandbox $name: cannot delete its network namespace" >&2
            ok=1
        fi
    fi

    local kept=() n
    for n in ${NSD_CREATED[@]+"${NSD_CREATED[@]}"}; do
        [ "$n" = "$name" ] || kept+=("$n")
    done
    NSD_CREATED=(${kept[@]+"${kept[@]}"})
    return $ok
}

nsd_destroy_all() {
    local name ok=0
    for name in ${NSD_CREATED[@]+"${NSD_CREATED[@]}"}; do
        nsd_destroy "$name" || ok=1
    done
    return $ok
}

nsd_reap_stale() {
    local dir name ok=0
    for dir in "$NSD_RUN_BASE"/*/ "$NSD_DATA_BASE"/*/; do
        [ -d "$dir" ] || continue
        name=$(basename "$dir")
        _nsd_valid_name "$name" 2>/dev/null || continue
        _nsd_owner_alive "$name" && continue
        [ -e "$dir" ] || continue # reaped through its other directory
        echo "netns-dockerd: removing stale sandbox $name (its owner is gone)"
        nsd_destroy "$name" || ok=1
    done
    return $ok
}
