#!/usr/bin/env bash
# check.sh - libgpubox-cuda.so (src/cuda/) on a real NVIDIA GPU, without
# Docker or gpuboxd: it builds the library and small CUDA programs (nvcc),
# runs them with the library preloaded and a limits file of its own
# (GPUBOX_CUDA_DIR, as the tests do; in a container gpuboxd mounts
# /run/gpubox instead), and checks, on GPU 0:
#   0. each process's context memory (NVML's per-process memory) is
#      counted: allocation stops at the share less it (below). Without
#      Docker the processes share the host's PID namespace, so NVML's PIDs
#      are their own and match directly (there is no pids file; in a
#      gpuboxd container its monitor writes /run/gpubox/limits/pids, the
#      host PIDs to translate NVML's, docs/gpus.md "Context memory");
#   1. allocation stops at the share (cudaMalloc, libcudart's way to the
#      driver; and the driver API through cuGetProcAddress_v2 and dlsym);
#   2. cudaMemGetInfo reports the share as the total;
#   3. NVML's memory info reports the share and the container's use (and,
#      reported only, what nvidia-smi shows with the library preloaded);
#   4. PyTorch's torch.cuda.mem_get_info() reports the share and a tensor
#      over it fails (skipped, saying so, where `import torch` fails or
#      torch sees no GPU);
#   5. two processes share the budget, and a holder's memory comes back
#      when it is killed with SIGKILL;
#   6. a compute share of 30% (cores=30) gives 25-35% of the kernel
#      throughput of an unlimited run.
# It prints one line a check (PASS/FAIL/SKIP, with what was measured) and
# exits 1 when any check failed. Other work on the GPU skews check 6.
#
# Without a GPU (`nvidia-smi -L` fails) it prints
# "tests/gpu/check.sh: skipped, no NVIDIA GPU" and exits 0 (scripts/test.sh
# calls it so). --compile-only builds everything and stops: the .cu files
# compile with nvcc on a machine without a GPU.
#
# Usage: tests/gpu/check.sh [--compile-only]
#   env: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
#        CC (default cc), SHARE_MIB (default 2048: the memory share),
#        GPUBOX_CUDA_LIB (a built libgpubox-cuda.so to use instead of
#        building one), KEEP=1 (keep the scratch directory)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
compile_only=0
[ "${1:-}" = "--compile-only" ] && compile_only=1

if [ "$compile_only" = 0 ] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu/check.sh: skipped, no NVIDIA GPU"
    exit 0
fi

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cc=${CC:-cc}
share=${SHARE_MIB:-2048}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpubox-gpu-check.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

# ---- build ----
echo "== building in $work"
if [ -n "${GPUBOX_CUDA_LIB:-}" ]; then
    cp "$GPUBOX_CUDA_LIB" "$work/libgpubox-cuda.so"
else
    # as CMakeLists.txt builds it: C11 (GNU), only the hooks exported, libc only
    "$cc" -std=gnu11 -O2 -Wall -Wextra -D_GNU_SOURCE -DGPUCUDA_PIN_GLIBC -fPIC -shared \
        -fvisibility=hidden -o "$work/libgpubox-cuda.so" "$root"/src/cuda/{hooks,limits,budget,track,rate,context,pids}.c \
        -Wl,--no-undefined -Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 || exit 1
fi
"$cc" -std=gnu11 -O2 -D_GNU_SOURCE -I"$root/src" -o "$work/cuda_probe" "$root/tests/fakes/cuda_probe.c" -ldl ||
    exit 1
for prog in gpu_alloc gpu_spin; do
    "$nvcc" -O2 -o "$work/$prog" "$root/tests/gpu/$prog.cu" || exit 1
done
if [ "$compile_only" = 1 ]; then
    echo "tests/gpu/check.sh: built libgpubox-cuda.so, cuda_probe, gpu_alloc, gpu_spin (compile only)"
    exit 0
fi

# ---- set-up: GPU 0, a share of SHARE_MIB ----
export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
card=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
echo "== GPU 0: $uuid, $card MiB; share $share MiB"
if [ "$card" -le $((share + 1024)) ]; then
    echo "tests/gpu/check.sh: SHARE_MIB=$share is too large for a $card MiB card" >&2
    exit 1
fi
mkdir -p "$work/limits" "$work/budget"
limits() { echo "$1" >"$work/limits/limits.new" && mv "$work/limits/limits.new" "$work/limits/limits"; }
limits "$uuid $share"
lib=$work/libgpubox-cuda.so
with() { env GPUBOX_CUDA_DIR="$work" LD_PRELOAD="$lib" "$@"; }

failed=0
pass() { echo "PASS $*"; }
fail() {
    echo "FAIL $*"
    failed=1
}
# within VALUE LOW HIGH
within() { [ -n "$1" ] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
field() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" | head -1; }
chunk=64

# 0: each process's context memory counts (NVML's per-process memory
# beyond its allocations, docs/gpus.md "Context memory"): measured once
# here, so the checks below expect share - context; contexts of two
# programs differ a little (slack)
slack=128
out=$(with "$work/cuda_probe" alloc mem 1 info 2>&1)
free=$(echo "$out" | grep '^info' | field free)
ctx=$((share - 1 - ${free:-$share}))
if within "$ctx" 1 $((share / 2)); then
    pass "context memory counted in the share: $ctx MiB ($out)"
else
    fail "context memory counted in the share: ${ctx} MiB ($out)"
    ctx=0
fi

# 1, 2: the runtime API
out=$(with "$work/gpu_alloc" fill $chunk info)
got=$(echo "$out" | sed -n 's/^fill //p')
if within "$got" $((share - ctx - slack - 2 * chunk)) $((share - ctx + slack)); then
    pass "cudaMalloc stops at the share: $got of $share MiB"
else
    fail "cudaMalloc stops at the share: got ${got:-?} MiB of $share ($out)"
fi
total=$(echo "$out" | grep '^info' | field total)
if [ "$total" = "$share" ]; then
    pass "cudaMemGetInfo total is the share: $total MiB"
else
    fail "cudaMemGetInfo total is the share: got ${total:-?} MiB ($out)"
fi
out=$("$work/gpu_alloc" info)
pass "(without the library cudaMemGetInfo says: ${out#info })"

# 1: the driver API, the ways programs reach it
for via in procaddr dlsym; do
    for kind in mem async; do
        out=$(with "$work/cuda_probe" --via $via fill $kind $chunk 2>&1)
        got=$(echo "$out" | sed -n 's/^fill //p')
        if within "$got" $((share - ctx - slack - 2 * chunk)) $((share - ctx + slack)); then
            pass "driver API --via $via $kind stops at the share: $got MiB"
        else
            fail "driver API --via $via $kind stops at the share: ${out:-no output}"
        fi
    done
done

# 3: NVML, as nvidia-smi and monitoring tools read it
out=$(with "$work/cuda_probe" alloc mem 512 nvml 2>&1)
line=$(echo "$out" | grep '^nvml_v2' || echo "$out" | grep '^nvml ')
if [ "$(echo "$line" | field total)" = "$share" ] &&
    within "$(echo "$line" | field used)" $((512 + ctx - slack)) $((512 + ctx + slack)); then
    pass "NVML memory info: $line"
else
    fail "NVML memory info reports the share and the use: $out"
fi
smi=$(with nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits -i 0 2>&1)
echo "NOTE nvidia-smi with the library preloaded (total, used MiB): $smi (nothing allocated)"

# 4: PyTorch
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    out=$(with python3 - "$share" <<'PY' 2>&1
import sys, torch
share = int(sys.argv[1])
free, total = torch.cuda.mem_get_info()
print("total", total >> 20)
try:
    torch.empty((share + 256) << 20, dtype=torch.uint8, device="cuda")
    print("over ok")
except torch.cuda.OutOfMemoryError:
    print("over oom")
x = torch.empty((share // 2) << 20, dtype=torch.uint8, device="cuda")
print("half ok")
PY
    )
    if echo "$out" | grep -qx "total $share" && echo "$out" | grep -qx "over oom" &&
        echo "$out" | grep -qx "half ok"; then
        pass "torch.cuda.mem_get_info() total is the share; a tensor over it fails, half fits"
    else
        fail "PyTorch: $out"
    fi
else
    echo "SKIP PyTorch: python3 -c 'import torch' fails or torch sees no GPU"
fi

# 5: two processes share one budget; kill -9 gives a holder's memory back
coproc HOLDER { exec env GPUBOX_CUDA_DIR="$work" LD_PRELOAD="$lib" "$work/gpu_alloc" alloc 1024 wait; }
read -r -u "${HOLDER[0]}" first
read -r -u "${HOLDER[0]}" second
if [ "$first $second" != "alloc ok waiting" ]; then
    fail "two processes: the holder said: $first $second"
fi
got=$(with "$work/gpu_alloc" fill $chunk | sed -n 's/^fill //p')
if within "$got" $((share - 1024 - 2 * ctx - 2 * slack - 2 * chunk)) \
    $((share - 1024 - 2 * ctx + 2 * slack)); then
    pass "two processes: the second got $got MiB beside the first's 1024 of $share"
else
    fail "two processes: the second got ${got:-?} MiB beside the first's 1024 of $share"
fi
kill -9 "$HOLDER_PID" 2>/dev/null
wait "$HOLDER_PID" 2>/dev/null
got=$(with "$work/gpu_alloc" fill $chunk | sed -n 's/^fill //p')
if within "$got" $((share - ctx - slack - 2 * chunk)) $((share - ctx + slack)); then
    pass "after kill -9 of the holder: $got MiB of $share"
else
    fail "after kill -9 of the holder: ${got:-?} MiB of $share"
fi

# 6: a compute share of 30%
free_run=$(with "$work/gpu_spin" 2 8 | sed -n 's/^kernels_per_s //p')
limits "$uuid $share cores=30"
limited=$(with "$work/gpu_spin" 6 10 | sed -n 's/^kernels_per_s //p')
limits "$uuid $share"
ratio=$(awk -v a="${limited:-0}" -v b="${free_run:-0}" 'BEGIN { if (b > 0) printf "%.1f", 100 * a / b; else print "?" }')
if awk -v r="$ratio" 'BEGIN { exit !(r != "?" && r >= 25 && r <= 35) }'; then
    pass "cores=30: $limited kernels/s, $ratio% of $free_run unlimited"
else
    fail "cores=30: ${limited:-?} kernels/s, $ratio% of ${free_run:-?} unlimited (want 25-35%)"
fi

if [ "$failed" = 0 ]; then
    echo "tests/gpu/check.sh: all checks passed"
else
    echo "tests/gpu/check.sh: some checks FAILED"
fi
exit "$failed"
