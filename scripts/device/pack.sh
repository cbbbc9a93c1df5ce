#!/usr/bin/env bash
# Gathers, here, what scripts/device/gpu_check.sh needs on the GPU machine, which has CUDA,
# NCCL and the same torch 2.11 in its Python environment but no OpenMPI, no Debian packages and
# no network, and which receives at most 64 MiB with a call. Into device_pack/ (git-ignored;
# name it in the call's `carry`):
#   bin/     graphtune, graphtune-worker and the test drivers, as built in BUILD_DIR
#   lib/     the NCCL backend library, and every shared library those and OpenMPI need that is
#            neither glibc's, nor libtorch's (the machine's own torch is used), nor CUDA's
#   mpi/usr  OpenMPI's runtime as Debian installs it (mpirun, its plugins and help texts),
#            relocated on the machine with OPAL_PREFIX
#   assets/  stories260K, its tokenizer and the golden text (from ../shared/assets)
# Nothing is built here: build first (scripts/test.sh or ninja -C BUILD_DIR).
#   usage: scripts/device/pack.sh [BUILD_DIR]      (default build; PACK_DIR=... packs elsewhere,
#          as tests/cli/device_pack.sh does)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
PACK=${PACK_DIR:-device_pack}
LIMIT_MIB=56  # of the 64 MiB that travel: the rest is the repository itself

bins=("$BUILD/launcher/graphtune" "$BUILD/worker/graphtune-worker" "$BUILD/tests/nccl_probe"
      "$BUILD/tests/pipeline_driver" "$BUILD/tests/comm_driver")
nccl_lib="$BUILD/comm/nccl/libgraphtune_comm_nccl.so"
for f in "${bins[@]}" "$nccl_lib"; do
  [ -f "$f" ] || { echo "pack: $f is not built (build $BUILD first)" >&2; exit 1; }
done
[ -f "$ASSETS/llm/stories260K.bin" ] || { echo "pack: no shared assets at $ASSETS" >&2; exit 1; }
command -v dpkg >/dev/null || { echo "pack: needs dpkg to find OpenMPI's files" >&2; exit 1; }
[ -n "${PACK_DIR:-}" ] || grep -qx '/device_pack/' .gitignore || { echo "pack: .gitignore must list /device_pack/" >&2; exit 1; }

if [ -e "$PACK" ] && [ -n "$(ls -A "$PACK")" ] && [ ! -x "$PACK/bin/graphtune" ]; then
  echo "pack: $PACK exists and is not an earlier pack: not replacing it" >&2; exit 1
fi
rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/mpi" "$PACK/assets/llm"
cp "${bins[@]}" "$PACK/bin/"
cp "$nccl_lib" "$PACK/lib/"
cp "$ASSETS/llm/stories260K.bin" "$ASSETS/llm/tok512.bin" "$ASSETS/llm/stories260K_greedy_once_upon_a_time_n256.txt" \
  "$PACK/assets/llm/"

# OpenMPI's runtime: the packages' files under /usr, documentation left out.
for pkg in openmpi-bin libopenmpi3 openmpi-common; do
  dpkg -L "$pkg" | while read -r f; do
    case "$f" in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | */include/*) continue ;; esac
    [ -f "$f" ] && ! [ -L "$f" ] && { mkdir -p "$PACK/mpi$(dirname "$f")"; cp "$f" "$PACK/mpi$f"; }
    [ -L "$f" ] && { mkdir -p "$PACK/mpi$(dirname "$f")"; cp -P "$f" "$PACK/mpi$f"; }
  done
done

ln -sf orterun "$PACK/mpi/usr/bin/mpirun"  # Debian's alternatives link, which stays behind

# Every shared library any of these ELF files resolves to, except glibc's (the machine has its
# own, as new or newer), and libtorch's and CUDA's: the machine's Python environment has those
# (torch and its nvidia-* wheels, all under site-packages).
site=$(readlink -f "$("${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}" -c \
  'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')")
torch_lib=$site/torch/lib
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libutil\.so|libresolv|libstdc\+\+|libgcc_s)'
find "$PACK/bin" "$PACK/lib" "$PACK/mpi" -type f | while read -r elf; do
  file -b "$elf" | grep -q '^ELF' || continue
  LD_LIBRARY_PATH="$torch_lib:$PACK/mpi/usr/lib/x86_64-linux-gnu/openmpi/lib" ldd "$elf" 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  real=$(readlink -f "$path")
  [[ "$name" =~ $skip ]] && continue
  case "$real" in "$site"/* | /usr/local/cuda* | "$(readlink -f "$PACK")"/*) continue ;; esac
  [ -e "$PACK/mpi/usr/lib/x86_64-linux-gnu/$name" ] && continue  # OpenMPI's own, packed above
  [ -e "$PACK/lib/$name" ] || cp "$real" "$PACK/lib/$name"
done

size=$(du -sm "$PACK" | cut -f1)
echo "pack: $PACK is $size MiB ($(find "$PACK" -type f | wc -l) files)"
[ "$size" -le "$LIMIT_MIB" ] || { echo "pack: over the $LIMIT_MIB MiB it may take" >&2; exit 1; }
