#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${GRAPHTUNE_BUILD:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
