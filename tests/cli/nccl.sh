#!/usr/bin/env bash
# The communicator backends behind make_world_communicator (comm/comm_backend.hpp), through
# tests/nccl_probe.cpp:
#  1. where the NCCL library was built, it exports its factory, and nothing else needs CUDA:
#     graphtune-worker, comm_driver and the probe list neither libnccl nor libcudart, and
#     resolve nothing from CUDA's library folders. (The PyPI torch wheel's libtorch_cuda
#     brings its own copies from the wheel; those are libtorch's, not graphtune's.)
#  2. on this GPU-less machine, backend nccl ends in one line and exit 2 (also under mpirun),
#     as do a missing or broken library and an unknown backend;
#  3. backend mpi opens and passes the probe's operations with 2 ranks.
# Where CUDA or NCCL were not found, part 1 cannot run: the test says so and exits 77.
source "$(dirname "$0")/lib.sh"
PROBE=${GRAPHTUNE_NCCL_PROBE:?set by ctest}
LIB=${GRAPHTUNE_NCCL_LIB:-}
MPIRUN=(timeout 120 mpirun --allow-run-as-root --oversubscribe)

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

if [ -n "$LIB" ]; then
  check "library built at $LIB" [ -f "$LIB" ]
  check "it exports graphtune_nccl_world" bash -c "nm -D --defined-only '$LIB' | grep -qw 'T graphtune_nccl_world'"
  check "and no gt:: symbols (hidden)" bash -c "! nm -DC --defined-only '$LIB' | grep -q ' gt::'"
  check "it links libnccl and libcudart itself" bash -c "readelf -d '$LIB' | grep -q 'libnccl' && readelf -d '$LIB' | grep -q 'libcudart'"
  for bin in "${GRAPHTUNE_WORKER:?}" "${GRAPHTUNE_COMM_DRIVER:?}" "$PROBE"; do
    name=$(basename "$bin")
    if [ ! -x "$bin" ]; then
      check "$name is built" false
      continue
    fi
    check "$name does not link libnccl, libcudart or the NCCL backend" \
      bash -c "! readelf -d '$bin' | grep -E 'NEEDED.*(libnccl|libcudart|graphtune_comm_nccl)'"
    IFS=: read -ra cuda_dirs <<<"${GRAPHTUNE_CUDA_LIB_DIRS:-}"
    resolved_from_cuda=0
    ldd "$bin" >"$TMP/ldd"
    for dir in "${cuda_dirs[@]}"; do  # as the loader names it, and with links resolved
      [ -n "$dir" ] || continue
      grep -qF -e "=> $dir/" -e "=> $(readlink -f "$dir")/" "$TMP/ldd" && resolved_from_cuda=1
    done
    check "$name resolves nothing from CUDA's folders (${GRAPHTUNE_CUDA_LIB_DIRS:-})" [ "$resolved_from_cuda" -eq 0 ]
  done
fi

# 2. Without a GPU (or without the library), nccl is one line and exit 2, before MPI is needed.
if [ -n "$LIB" ]; then want="[parallelism].backend: nccl: no usable CUDA device"; else want="[parallelism].backend: nccl: "; fi
expect_fail "nccl without a GPU" "$want" -- "$PROBE" open nccl
expect_fail "unknown backend" "[parallelism].backend: unknown backend 'gloo' (mpi or nccl)" -- "$PROBE" open gloo
expect_fail "GRAPHTUNE_NCCL_LIBRARY that does not exist" "nccl: GRAPHTUNE_NCCL_LIBRARY=$TMP/missing.so does not exist" -- \
  env GRAPHTUNE_NCCL_LIBRARY="$TMP/missing.so" "$PROBE" open nccl
echo "not a shared library" >"$TMP/broken.so"
expect_fail "a library that does not load" "nccl: cannot load $TMP/broken.so: " -- \
  env GRAPHTUNE_NCCL_LIBRARY="$TMP/broken.so" "$PROBE" open nccl
# Under mpirun the failing rank still prints its one line (mpirun adds its own summary).
"${MPIRUN[@]}" -np 2 "$PROBE" open nccl >"$TMP/mpi_nccl.out" 2>"$TMP/mpi_nccl.err"
rc=$?
check "nccl under mpirun -np 2: the job fails, not hangs (exit $rc)" bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ]"
check "nccl under mpirun -np 2: each rank says why in one line" \
  bash -c "[ \$(grep -cF 'graphtune: error: $want' '$TMP/mpi_nccl.err') -eq 2 ] && [ \$(grep -c 'graphtune: error' '$TMP/mpi_nccl.err') -eq 2 ]"

# 3. mpi works.
"${MPIRUN[@]}" -np 2 "$PROBE" open mpi >"$TMP/open.out" 2>"$TMP/open.err"
rc=$?
check "mpi: opens with 2 ranks" bash -c "[ $rc -eq 0 ] && grep -qx 'rank 0 of 2' '$TMP/open.out' && grep -qx 'rank 1 of 2' '$TMP/open.out'"
"${MPIRUN[@]}" -np 2 "$PROBE" ops mpi >"$TMP/ops.out" 2>"$TMP/ops.err"
rc=$?
sed 's/^/    /' "$TMP/ops.out"
check "mpi: ops with 2 ranks exit 0" [ "$rc" -eq 0 ]
check "mpi: all 7 checks passed" bash -c "[ \$(grep -c '^ok ' '$TMP/ops.out') -eq 7 ] && ! grep -q FAIL '$TMP/ops.out'"

if [ -z "$LIB" ]; then
  finish || exit 1
  echo "SKIP: the NCCL backend was not built (CMake found no CUDA or NCCL, or -DGRAPHTUNE_NCCL=OFF); its link checks did not run"
  exit 77
fi
finish
