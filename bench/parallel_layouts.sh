#!/usr/bin/env bash
# Step time, pipeline bubble and memory of one training config under each parallel layout,
# measured in one run so the rows compare (this machine is shared: read the ratios, not the
# absolute times). Every rank runs one thread; "1 rank, 2 threads" shows what the same cores
# give without parallelism.
#
#   bench/parallel_layouts.sh [CONFIG] [STEPS] [--section.key VALUE ...]
#   PP_PARTITION=0,2 bench/parallel_layouts.sh ...   (an explicit partition for the pp rows)
#
# CONFIG defaults to configs/demo/stage1.toml (GraphGPT stage 1 on the demo's LLM: run
# scripts/demo.sh once first). Per layout it prints the median step of rank 0 (forward,
# backward and communication), the speed-up over one rank with one thread, the simulator's
# bubble for the schedule next to the measured one (1 - the mean share of the step the
# stages spent computing), peak RSS, the most micro-batches in flight and the most tensor bytes
# a step allocated (activations: what a schedule's in-flight micro-batches cost) per rank.
set -euo pipefail
cd "$(dirname "$0")/.."
CFG=${1:-configs/demo/stage1.toml}
STEPS=${2:-12}
shift $(($# > 2 ? 2 : $#))
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
COMMON=(--training.steps "$STEPS" --training.log_every "$STEPS" "$@")

layouts=(
  "1_rank_1_thread|1|--training.threads 1"
  "1_rank_2_threads|1|--training.threads 2"
  "dp2|2|--training.threads 1 --parallelism.dp 2"
  "pp2_gpipe_m4|2|--training.threads 1 --parallelism.pp 2 --parallelism.schedule gpipe --parallelism.microbatches 4"
  "pp2_1f1b_m4|2|--training.threads 1 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4"
  "pp2_gpipe_m8|2|--training.threads 1 --parallelism.pp 2 --parallelism.schedule gpipe --parallelism.microbatches 8"
  "pp2_1f1b_m8|2|--training.threads 1 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 8"
  "tp2|2|--training.threads 1 --parallelism.tp 2"
)

printf "%-18s %5s %10s %8s %9s %9s  %-22s %-15s %s\n" layout ranks "step ms" "vs 1x1" "sim bub" "meas bub" "peak RSS MiB/rank" "in flight/rank" "step tensors MiB/rank"
base=""
for row in "${layouts[@]}"; do
  IFS='|' read -r name np args <<<"$row"
  case "$name" in pp*) [ -z "${PP_PARTITION:-}" ] || args="$args --parallelism.partition $PP_PARTITION" ;; esac
  # shellcheck disable=SC2086
  if [ "$np" -eq 1 ]; then
    "$W" train -c "$CFG" "${COMMON[@]}" $args --job.out_dir "$OUT/$name" 2>"$OUT/$name.err" >/dev/null
  else
    "${MPIRUN[@]}" -np "$np" "$W" -c "$CFG" "${COMMON[@]}" $args --job.out_dir "$OUT/$name" 2>"$OUT/$name.err" >/dev/null
  fi || { echo "$name failed:"; tail -5 "$OUT/$name.err"; exit 1; }
  step=$(grep -o 'rank 0: .*median step [0-9.]* ms' "$OUT/$name.err" | grep -o '[0-9.]* ms' | cut -d' ' -f1)
  [ -n "$base" ] || base=$step
  sim=$(grep -o 'simulated bubble [0-9.]*' "$OUT/$name.err" | grep -o '[0-9.]*$' || true)
  busy=$(grep -o 'computing [0-9.]*%' "$OUT/$name.err" | grep -o '[0-9.]*' | awk '{s+=$1; n++} END {printf "%.3f", 1 - s / n / 100}')
  [ -n "$sim" ] || { sim="-"; busy="-"; }
  rss=$(grep -o 'rank [0-9]*: peak RSS [0-9]*' "$OUT/$name.err" | sort -k2n | awk '{printf "%s%s", sep, $5; sep="/"}')
  fly=$(grep -o 'rank [0-9]*: .*at most [0-9]* micro' "$OUT/$name.err" | sort -k2n | grep -o 'most [0-9]*' |
        awk '{printf "%s%s", sep, $2; sep="/"}')
  tensors=$(grep -o 'rank [0-9]*: .*peak step tensors [0-9.]*' "$OUT/$name.err" | sort -k2n | grep -o 'tensors [0-9.]*' |
            awk '{printf "%s%s", sep, $2; sep="/"}')
  printf "%-18s %5s %10s %8s %9s %9s  %-22s %-15s %s\n" "$name" "$np" "$step" \
    "$(awk -v a="$base" -v b="$step" 'BEGIN {printf "%.2fx", a / b}')" "$sim" "$busy" "$rss" "$fly" "$tensors"
done
