#!/usr/bin/env bash
# libFuzzer over graphtune's parsers of untrusted bytes (tests/fuzz/): builds the targets with
# clang (-fsanitize=fuzzer,address,undefined) in build-fuzz, a standalone configure of tests/fuzz
# that needs no libtorch, and runs each for SECONDS (default 120), nproc targets at a time
# (FUZZ_JOBS overrides), on a copy of its committed corpus (tests/fuzz/corpus/<name>/ is never
# written). Prints per target the seconds, the inputs tried, the corpus size and the crashes;
# crash inputs are kept under build-fuzz/artifacts/<name>/. Exits 1 when any target crashed.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-120}
shift || true
BUILD=${GRAPHTUNE_FUZZ_BUILD:-build-fuzz}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(control_protocol safetensors_header instructions config hostfile torch_pickle pretokenizer gguf)
JOBS=${FUZZ_JOBS:-$(nproc)}

case $SECONDS_PER_TARGET in
  ''|*[!0-9]*) echo "scripts/fuzz.sh: SECONDS must be a whole number of seconds, got '$SECONDS_PER_TARGET'" >&2; exit 2 ;;
esac

if [ ! -f "$BUILD/build.ninja" ]; then
  mkdir -p "$BUILD"
  CC=clang CXX=clang++ cmake -S tests/fuzz -B "$BUILD" -G Ninja -DGRAPHTUNE_FUZZ=ON \
    >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]/#/fuzz_}" >"$BUILD/build.log" 2>&1 ||
  { cat "$BUILD/build.log" >&2; exit 1; }

# One target: a fresh copy of the committed corpus to grow, libFuzzer's log, its crash inputs.
run_target() {
  local name=$1 work="$BUILD/work/$1" artifacts="$BUILD/artifacts/$1/"
  rm -rf "$work" "$artifacts"
  mkdir -p "$work/corpus" "$artifacts"
  cp -r tests/fuzz/corpus/"$name"/. "$work/corpus/"
  local dict=()
  [ -f "tests/fuzz/dict/$name.dict" ] && dict=("-dict=tests/fuzz/dict/$name.dict")
  local start=$SECONDS rc=0
  # -max_len: the default (4096) is too short for a safetensors file with a few tensors, and
  # the control server refuses lines over 64 KiB anyway.
  "$BUILD/fuzz_$name" "$work/corpus" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
    -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 -artifact_prefix="$artifacts" \
    >"$work/log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - start))" >"$work/result"
}

echo "fuzz: ${#TARGETS[@]} targets x ${SECONDS_PER_TARGET}s, $JOBS at a time, build in $BUILD" >&2
running=0
for t in "${TARGETS[@]}"; do
  if [ ! -d "tests/fuzz/corpus/$t" ]; then
    echo "scripts/fuzz.sh: no corpus tests/fuzz/corpus/$t (targets: control_protocol safetensors_header instructions config hostfile torch_pickle pretokenizer gguf)" >&2
    exit 2
  fi
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-20s %8s %12s %8s %8s\n' target seconds execs corpus crashes
for t in "${TARGETS[@]}"; do
  work="$BUILD/work/$t"
  read -r rc secs <"$work/result"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  corpus=$(find "$work/corpus" -type f | wc -l)
  crashes=$(find "$BUILD/artifacts/$t" -type f | wc -l)
  printf '%-20s %8s %12s %8s %8s\n' "$t" "$secs" "${execs:-?}" "$corpus" "$crashes"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    echo "fuzz: $t exited $rc; its log: $work/log; crash inputs: $BUILD/artifacts/$t/" >&2
    grep -m 3 -E 'ERROR: |SUMMARY: |fuzz check failed|terminate called' "$work/log" | sed 's/^/    /' >&2 || true
  fi
done
exit "$failed"
