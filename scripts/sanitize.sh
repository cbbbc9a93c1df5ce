#!/usr/bin/env bash
# The bad-input corpus (and the parsers' own tests) again, in an AddressSanitizer +
# UndefinedBehaviorSanitizer build of graphtune: build-asan, -O1 with debug lines, every
# finding fatal. Run by .ci/run after scripts/test.sh; arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRAPHTUNE_ASAN_BUILD:-build-asan}
export CCACHE_BASEDIR="$PWD"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
# -g puts the build folder into ccache's hash: without this, each fresh clone builds cold.
export CCACHE_NOHASHDIR=true
if [ ! -f "$BUILD/build.ninja" ]; then
  mkdir -p "$BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DGRAPHTUNE_SANITIZE=ON >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log" >&2; exit 1; }
fi
# What runs sanitized: the bad-input corpus through both binaries, and the unit tests of the
# parsers and readers that corpus aims at.
UNIT_TESTS=(common_test control_protocol_test hostfile_test instruction_test weights_test checkpoint_test)
cmake --build "$BUILD" -j "$(nproc)" --target graphtune graphtune-worker "${UNIT_TESTS[@]}"
# Leaks are not checked: libtorch and OpenMPI keep allocations for the process's life.
# OpenMPI's memory hooks fight ASan's allocator; MPI does not need them on one host.
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMPI_MCA_memory=^patcher
cd "$BUILD"
labels=$(IFS='|'; echo "^(${UNIT_TESTS[*]})\$")
ctest --output-on-failure -j "$(nproc)" -L "$labels" "$@"
ctest --output-on-failure -R '^cli_bad_inputs$' "$@"
