#!/usr/bin/env bash
# The whole GraphGPT recipe on one graph, in one process, on the CPU, in a few minutes:
#   1. data      instruction records in GraphGPT's JSON: graph matching (train), node
#                classification (warm-up = the val split, train, test: disjoint papers)
#   2. lm        LM warm-up of a tiny LLaMA from scratch (tokenizer trained on the texts); it
#                learns to answer from text on the warm-up papers, never on stage 2's or the test's
#   3. grounding text-graph grounding of the graph encoder (CLIP-style)
#   4. stage1    GraphGPT stage 1, graph matching (projector + <g_start>/<g_end> rows)
#   5. stage2    GraphGPT stage 2, node classification, from stage 1's projector
#   6. eval      test accuracy of the graph model, of the same LLM from the text alone, and chance
# Usage: scripts/demo.sh [GRAPH [extra --section.key VALUE for every stage ...]]
#   GRAPH: "embedded" (default: the synthetic citation graph) or a graph folder, e.g.
#          ../shared/assets/graph/cora_ml. Results go to runs/demo (runs/demo-<folder name>), or
#          to $GRAPHTUNE_DEMO_OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
GRAPH=${1:-embedded}
shift || true
if [ "$GRAPH" = embedded ]; then RUN=runs/demo; else RUN=runs/demo-$(basename "$GRAPH"); fi
RUN=${GRAPHTUNE_DEMO_OUT:-$RUN}
# GRAPHTUNE_BIN (the tests set it): use that build as it is.
if [ -z "${GRAPHTUNE_BIN:-}" ]; then
  scripts/install-deps.sh >/dev/null
  scripts/build.sh >/dev/null
fi
GT=${GRAPHTUNE_BIN:-build/launcher/graphtune}
DATA=$RUN/data
mkdir -p "$DATA"

declare -a NAMES=() SECS=()
stage() {  # stage NAME COMMAND...: runs and times one step
  local name=$1 t0 t1
  shift
  echo "== $name" >&2
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  NAMES+=("$name")
  SECS+=("$(awk "BEGIN { print $t1 - $t0 }")")
}

# Papers split 40/40/20: the warm-up LLM learns to answer from text on one 40% (the "val"
# split), stage 2 tunes the graph tokens on the other 40% (train), the test 20% is never seen.
# A warm-up on stage 2's own papers would leave it nothing to learn: the LLM would already know
# their answers from their text.
build_records() {
  local common=(--graph "$GRAPH" --hops 2 --seed 42 --train-frac 0.4 --val-frac 0.4 --overwrite)
  "$GT" data build "${common[@]}" --fanout 4 --max-nodes 8 --task graph_matching --split train --max-records 400 \
    --out "$DATA/graph_matching_train.json"
  local nc=("${common[@]}" --fanout 8 --max-nodes 24 --task node_classification)
  "$GT" data build "${nc[@]}" --split val --out "$DATA/node_classification_warmup.json"
  "$GT" data build "${nc[@]}" --split train --out "$DATA/node_classification_train.json"
  "$GT" data build "${nc[@]}" --split test --out "$DATA/node_classification_test.json"
}

# Every path of the configs, pointed into $RUN, and the graph.
PATHS=(--data.graph "$GRAPH")
MODEL=(--model.path "$RUN/lm/model" --model.graph_encoder "$RUN/grounding/graph_encoder.safetensors")
stage data build_records
stage lm "$GT" train --config configs/demo/lm.toml "${PATHS[@]}" --job.out_dir "$RUN/lm" \
  --data.instructions "$DATA/node_classification_warmup.json" "$@"
stage grounding "$GT" train --config configs/demo/grounding.toml "${PATHS[@]}" --job.out_dir "$RUN/grounding" "$@"
stage stage1 "$GT" train --config configs/demo/stage1.toml "${PATHS[@]}" "${MODEL[@]}" --job.out_dir "$RUN/stage1" \
  --data.instructions "$DATA/graph_matching_train.json" "$@"
stage stage2 "$GT" train --config configs/demo/stage2.toml "${PATHS[@]}" "${MODEL[@]}" --job.out_dir "$RUN/stage2" \
  --model.projector "$RUN/stage1/graph_projector.bin" --data.instructions "$DATA/node_classification_train.json" "$@"
EVAL=(--config configs/demo/stage2.toml "${PATHS[@]}" "${MODEL[@]}" --model.projector "$RUN/stage2/graph_projector.bin"
      --data.instructions "$DATA/node_classification_test.json")
stage eval "$GT" eval "${EVAL[@]}" --out "$RUN/eval/graph" "$@"
stage eval-text "$GT" eval "${EVAL[@]}" --eval.text_only true --out "$RUN/eval/text_only" "$@"

# metrics.json: the top-level "accuracy" (two-space indent) and node classification's "chance".
field() { sed -n "s/^ *\"$2\": \([0-9.e-]*\),\{0,1\}$/\1/p" "$1" | head -n 1; }
echo
echo "GraphGPT demo on '$GRAPH' ($RUN)"
printf '  %-10s %8s\n' stage seconds
total=0
for i in "${!NAMES[@]}"; do
  printf '  %-10s %8.1f\n' "${NAMES[$i]}" "${SECS[$i]}"
  total=$(awk "BEGIN { print $total + ${SECS[$i]} }")
done
printf '  %-10s %8.1f\n' total "$total"
echo "test accuracy, node classification ($(field "$RUN/eval/graph/metrics.json" n) papers):"
printf '  %-34s %.4f\n' "graph model (GraphGPT recipe)" "$(field "$RUN/eval/graph/metrics.json" accuracy)"
printf '  %-34s %.4f\n' "same LLM, text alone (no graph)" "$(field "$RUN/eval/text_only/metrics.json" accuracy)"
printf '  %-34s %.4f\n' "chance" "$(field "$RUN/eval/graph/metrics.json" chance)"
