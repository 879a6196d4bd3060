#!/usr/bin/env bash
# in-sandbox.sh - run one command in a test sandbox of its own (a network
# namespace with its own dockerd, scripts/lib/netns-dockerd.sh) with the test
# image imported, then tear the sandbox down. For developers who run a test
# module or a unit test by hand while another run uses the default dockerd:
#
#   scripts/in-sandbox.sh ctest --test-dir build/test -R docker
#   scripts/in-sandbox.sh /usr/bin/python3 -m pytest -q tests/e2e/test_patch.py
#
# DOCKER_HOST points at the sandbox's dockerd inside; 127.0.0.1 is its own.
# The exit status is the command's. Needs root.
set -euo pipefail
gpubox_root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
. "$gpubox_root/scripts/lib/dockerd.sh"
. "$gpubox_root/scripts/lib/testimage.sh"
. "$gpubox_root/scripts/lib/netns-dockerd.sh"

export GPUBOX_TEST_IMAGE=${GPUBOX_TEST_IMAGE:-gpubox-test:latest}
name="gpubox-dev-$$"
trap 'nsd_destroy "$name" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
nsd_reap_stale >/dev/null 2>&1 || true
mkdir -p "$gpubox_root/build"
nsd_up "$name" "$gpubox_root/build/dockerd-$name.log" --fake-hook >&2
nsd_import_image "$name" "$GPUBOX_TEST_IMAGE" >&2
rc=0
nsd_exec "$name" "$@" || rc=$?
exit $rc
