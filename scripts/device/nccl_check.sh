#!/usr/bin/env bash
# The NCCL backend on a GPU machine (it cannot run on the CPU-only CI machine): builds the
# probe and the library if needed, then runs tests/nccl_probe.cpp's operations with backend
# nccl (every value exact, "ok NAME" per check) and a stalled peer that must end the job in one
# line after a 2 s timeout. NCCL refuses two ranks on one GPU, so NP defaults to 2 where two
# GPUs are visible and to 1 otherwise (the collectives still run through NCCL's kernels).
#   usage: scripts/device/nccl_check.sh [BUILD_DIR]    (default build; NP=... to override)
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
export CCACHE_BASEDIR="$PWD" CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
if [ ! -x "$BUILD/tests/nccl_probe" ]; then  # a carried build is used as it is
  [ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
  cmake --build "$BUILD" -j "$(nproc)" --target graphtune_comm_nccl nccl_probe || exit 1
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
NP=${NP:-$((gpus >= 2 ? 2 : 1))}
echo "GPUs: $gpus, ranks: $NP"
MPIRUN=(timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$NP")
failed=0
"${MPIRUN[@]}" "$BUILD/tests/nccl_probe" ops nccl | tee /tmp/nccl_ops.out
rc=${PIPESTATUS[0]}
checks=$([ "$NP" -ge 2 ] && echo 8 || echo 6)
if [ "$rc" -eq 0 ] && [ "$(grep -c '^ok ' /tmp/nccl_ops.out)" -eq "$checks" ]; then echo "PASS ops ($checks checks)"; else echo "FAIL ops (exit $rc)"; failed=1; fi
if [ "$NP" -ge 2 ]; then
  start=$(date +%s)
  "${MPIRUN[@]}" "$BUILD/tests/nccl_probe" stall nccl 2>/tmp/nccl_stall.err
  rc=$? secs=$(($(date +%s) - start))
  line='graphtune: error: rank 0: recv with peer 1 timed out after 2 s (the peer never answered)'
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$secs" -lt 30 ] && grep -qxF "$line" /tmp/nccl_stall.err; then
    echo "PASS stall ($secs s)"
  else
    echo "FAIL stall (exit $rc after $secs s)"; cat /tmp/nccl_stall.err; failed=1
  fi
fi
exit $failed
