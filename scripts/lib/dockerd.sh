# dockerd.sh - make sure a Docker daemon answers, starting one if none does.
# Sourced by scripts/test.sh, scripts/run.sh and bench/*.sh.
#
# dockerd_ensure LOGFILE [--fake-hook]
#   If a daemon answers on $DOCKER_HOST (default unix:///var/run/docker.sock),
#   use it. Otherwise start dockerd in the background, with tests/fakes/bin on
#   its PATH when --fake-hook is given (so DeviceRequests of driver "nvidia"
#   work without NVIDIA hardware, DESIGN.md section 5), and wait for it.
#   Sets DOCKERD_STARTED_PID when this script started it.
# dockerd_stop_if_started
#   Stops the daemon only if dockerd_ensure started it.

DOCKERD_STARTED_PID=""
gpubox_root=${gpubox_root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# Debian's docker.io client; another docker client on PATH may speak a newer
# API than dockerd 20.10 and refuse to talk to it.
DOCKER=${DOCKER:-/usr/bin/docker}

dockerd_answers() {
    "$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

dockerd_ensure() {
    local log=$1 hook=${2:-}
    if dockerd_answers; then
        echo "dockerd: using the daemon that answers ($("$DOCKER" version --format '{{.Server.Version}}'))"
        return 0
    fi
    if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST#unix://}" = "$DOCKER_HOST" ]; then
        echo "dockerd: nothing answers at DOCKER_HOST=$DOCKER_HOST and it is not a local socket" >&2
        return 1
    fi
    local sock=${DOCKER_HOST:-}
    sock=${sock#unix://}
    sock=${sock:-/var/run/docker.sock}
    local path=$PATH
    [ "$hook" = --fake-hook ] && path="$gpubox_root/tests/fakes/bin:$PATH"
    echo "dockerd: none answers; starting one on unix://$sock (log: $log)"
    mkdir -p "$(dirname "$log")"
    PATH=$path setsid dockerd --host "unix://$sock" >"$log" 2>&1 </dev/null &
    DOCKERD_STARTED_PID=$!
    for _ in $(seq 1 120); do
        if dockerd_answers; then
            echo "dockerd: ready ($("$DOCKER" version --format '{{.Server.Version}}'))"
            return 0
        fi
        if ! kill -0 "$DOCKERD_STARTED_PID" 2>/dev/null; then
            echo "dockerd: it exited during start-up; last lines of $log:" >&2
            tail -n 20 "$log" >&2
            DOCKERD_STARTED_PID=""
            return 1
        fi
        sleep 0.5
    done
    echo "dockerd: not answering after 60 s; see $log" >&2
    return 1
}

dockerd_stop_if_started() {
    [ -n "$DOCKERD_STARTED_PID" ] || return 0
    kill -TERM "$DOCKERD_STARTED_PID" 2>/dev/null || true
    for _ in $(seq 1 60); do
        kill -0 "$DOCKERD_STARTED_PID" 2>/dev/null || break
        sleep 0.5
    done
    kill -KILL "$DOCKERD_STARTED_PID" 2>/dev/null || true
    DOCKERD_STARTED_PID=""
}

# dockerd_has_nvidia_driver IMAGE: true if the daemon accepts a DeviceRequest
# of driver "nvidia" (a real or fake nvidia-container-runtime-hook on its PATH).
dockerd_has_nvidia_driver() {
    "$DOCKER" run --rm --gpus '"device=GPU-probe"' "$1" true >/dev/null 2>&1
}
