#!/usr/bin/env bash
# scripts/device/pack.sh, which prepares the GPU machine's check here: the pack fits what
# travels with a call, holds the binaries, and its OpenMPI runs relocated (OPAL_PREFIX) from the
# pack's own libraries, as it must there, where no OpenMPI is installed.
source "$(dirname "$0")/lib.sh"
need_assets
ROOT=${GRAPHTUNE_SOURCE_DIR:?set by ctest}
BUILD=$(cd "$(dirname "$GT")/.." && pwd)
P=$TMP/pack
if ! command -v dpkg >/dev/null || ! dpkg -L openmpi-bin >/dev/null 2>&1; then
  echo "SKIP: OpenMPI is not a Debian package here (pack.sh gathers Debian's files)"
  exit 77
fi
PACK_DIR=$P GRAPHTUNE_ASSETS=$ASSETS "$ROOT/scripts/device/pack.sh" "$BUILD" >"$TMP/pack.out" 2>&1
rc=$?
cat "$TMP/pack.out"
check "pack.sh exits 0" [ "$rc" -eq 0 ]
check "it is within 56 MiB" [ "$(du -sm "$P" | cut -f1)" -le 56 ]
for f in bin/graphtune bin/graphtune-worker bin/nccl_probe bin/pipeline_driver lib/libgraphtune_comm_nccl.so \
         mpi/usr/bin/mpirun assets/llm/stories260K.bin; do
  check "it holds $f" [ -e "$P/$f" ]
done
check "no libtorch or CUDA library in it (the machine has its own)" \
  bash -c "! find '$P' -name 'libtorch*' -o -name 'libc10*' -o -name 'libcudart*' -o -name 'libnccl*' | grep -q ."
check "nor glibc" bash -c "! find '$P' -name 'libc.so*' -o -name 'libm.so*' | grep -q ."

export OPAL_PREFIX=$P/mpi/usr LD_LIBRARY_PATH=$P/lib:$P/mpi/usr/lib/x86_64-linux-gnu
check "its OpenMPI relocates to the pack" \
  bash -c "'$P/mpi/usr/bin/ompi_info' --path pkglibdir | grep -qF '$P/mpi/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3'"
timeout 60 "$P/mpi/usr/bin/mpirun" --allow-run-as-root --oversubscribe -x LD_LIBRARY_PATH -x OPAL_PREFIX -np 2 \
  "$P/bin/nccl_probe" open mpi >"$TMP/open.out" 2>"$TMP/open.err"
rc=$?
check "its mpirun starts the packed probe on 2 ranks (exit $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -qx 'rank 1 of 2' '$TMP/open.out'"
finish
