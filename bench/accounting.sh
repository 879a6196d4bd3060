#!/usr/bin/env bash
# accounting.sh - what accounting answers cost after a year against after a
# day (issue 29 item 6, docs/users.md "Accounting that stays small"), in
# one run (bench/accounting_bench.c does the work; no daemon, no Docker).
#
# Two SQLite stores are filled for the same users: one with a day of
# synthetic intervals, one with a year of them (about PER_DAY a user a
# day, one to five cards or a share, one set of each user open), and both
# folded into the rollup as a running gpuboxd keeps it. With the default
# --accounting-retention (400d) every interval of the year is still in the
# store: the answers must not read them. Timed, median ms per call, in
# process: GET /api/v1/usage for everyone from the beginning, for one user
# over the last 24 hours, /metrics' per-user accounting, and one user's
# fair share (the queue's order). A third column times the year's store
# not folded, which reads every interval, as gpubox did before the rollup.
#
# Target (reported, never enforced): a year within about 1x of a day.
#
# Usage: bench/accounting.sh BUILD_DIR   (env: USERS=50 PER_DAY=8 SECONDS_PER_CALL=2)
#   A Debug + sanitizer build works but is slow to fill; an optimized one is
#   what to report.
set -euo pipefail
build=$(cd "${1:?usage: accounting.sh BUILD_DIR}" && pwd)
bench=$build/accounting_bench
if [ ! -x "$bench" ]; then
    echo "accounting.sh: $bench is missing: build the tree (cmake --build $build)" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bench" "$work" --users "${USERS:-50}" --per-day "${PER_DAY:-8}" \
    --seconds "${SECONDS_PER_CALL:-2}"
