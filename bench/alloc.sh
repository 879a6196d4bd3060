#!/usr/bin/env bash
# alloc.sh - how long gpuboxd's GPU allocation decision takes, in process,
# at 8, 1024 and 16384 simulated cards of mixed sizes, half held whole and
# part shared (bench/alloc_bench.c does the work; no daemon, no Docker).
#
# One decision is gpus_pool_alloc plus gpus_pool_release_grant - the API
# holds what it decides, so the give-back is timed with it - or, for a
# request the pool refuses, the refusal alone. Request kinds: whole cards
# (1 and 8), an 8 GB memory share (binpack, spread, and on 2 cards), a
# time-slice replica, and a 96 GB share no card can take (the refusal and
# its message). Whole-card requests take the lowest-index free cards and
# stop there, so they can beat the baseline; shares must look at every
# card.
#
# Baseline, in the same run on the same cards, in rounds interleaved with
# the decisions' rounds: one pass summing every card's free memory (8 bytes
# a card), the floor of a decision that looks at every card. Each row
# prints the medians of microseconds per decision and per baseline pass,
# and their ratio.
#
# Target (reported, never enforced): < 20 us per decision at 1024 cards.
#
# Usage: bench/alloc.sh BUILD_DIR
#   BUILD_DIR must be a non-Debug build (alloc_bench is built only there).
#   env: SECONDS_PER_ROW=0.5, CARDS=8,1024,16384
set -euo pipefail
build=$(cd "${1:?usage: alloc.sh BUILD_DIR}" && pwd)
bench=$build/alloc_bench
if [ ! -x "$bench" ]; then
    echo "alloc.sh: $bench is missing: build a release tree, e.g." >&2
    echo "  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build/release" >&2
    exit 1
fi
"$bench" --seconds "${SECONDS_PER_ROW:-0.5}" --cards "${CARDS:-8,1024,16384}"
