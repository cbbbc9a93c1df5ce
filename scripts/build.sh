#!/usr/bin/env bash
# Configures and builds graphtune into build/ (Ninja, Release, ccache when present).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRAPHTUNE_BUILD:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  mkdir -p "$BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)"
