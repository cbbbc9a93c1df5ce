#!/usr/bin/env bash
# Configures and builds graphtune into build/ (Ninja, Release, ccache when present).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRAPHTUNE_BUILD:-build}
# ccache across clones: CI builds a fresh clone in a new folder each time. Paths relative to the
# clone make the hashes match, and the sloppiness lets translation units that use the
# precompiled torch header be cached at all.
export CCACHE_BASEDIR="$PWD"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
if [ ! -f "$BUILD/build.ninja" ]; then
  mkdir -p "$BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)"
