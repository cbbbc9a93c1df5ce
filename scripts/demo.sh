#!/usr/bin/env bash
# The whole GraphGPT recipe on one graph, on the CPU:
#   1. data      instruction records in GraphGPT's JSON: graph matching (train), node
#                classification (warm-up = the val split, train, test: disjoint papers)
#   2. lm        LM warm-up of a tiny LLaMA from scratch (tokenizer trained on the texts); it
#                learns to answer from text on the warm-up papers, never on stage 2's or the test's
#   3. grounding text-graph grounding of the graph encoder (CLIP-style; with --real also in the
#                classes of the training papers, docs/quality.md)
#   4. stage1    GraphGPT stage 1, graph matching (projector + <g_start>/<g_end> rows)
#   5. stage2    GraphGPT stage 2, node classification, from stage 1's projector
#   6. eval      test accuracy and macro-F1 of the graph model, of the same LLM from the text
#                alone, and chance
# With --real there is no warm-up: the LLM is SmolLM2-135M-Instruct (pretrained, frozen; the
# GGUF file install-deps puts in the environment), the graph Cora-ML, and the text-only
# evaluation is that LLM zero-shot. It runs GraphGPT's recipe as bench/quality.sh measured it
# best in about 15 minutes: grounding in the texts and the training papers' classes, stage 1,
# stage 2 on 240 of those papers with LoRA adapters on the LLM (the bench's default since, LLaGA's
# hop field with no GNN and no stage 1, scores higher: docs/quality.md). Then a GCN, an MLP and the majority class are trained on the same
# labels and the features the encoder gets (bench/quality_baselines.py, PyTorch Geometric), and
# one table puts them beside the graph model and zero-shot on the same test papers.
# Usage: scripts/demo.sh [--real] [--pp N] [GRAPH [extra --section.key VALUE for every stage ...]]
#   GRAPH: "embedded" (default: the synthetic citation graph) or a graph folder, e.g.
#          ../shared/assets/graph/cora_ml (the default with --real). Results go to runs/demo
#          (runs/demo-<folder name>, runs/demo-real; "-ppN" appended with --pp), or to
#          $GRAPHTUNE_DEMO_OUT. Run again, the demo starts over: it replaces the earlier demo's
#          run there (finished, or stopped with Ctrl-C) and says so in one line; a folder that
#          holds anything else is refused and left alone.
#   --pp N: the LM warm-up and GraphGPT's stages 1 and 2 run with the LLM's layers split over
#           N pipeline stages, N ranks under mpirun (default 2; --pp 1: one process). The
#           launcher gives each rank its share of the cores. The evaluations run on the same
#           ranks, the LLM split the same way; grounding runs one rank.
# Stages 1 and 2 and the evaluations are one `graphtune pipeline` (configs/demo/pipeline.toml):
# each stage's output feeds the next, in one run folder.
set -euo pipefail
cd "$(dirname "$0")/.."
REAL=0 PP=2
while [ $# -gt 0 ]; do
  case $1 in
    --real) REAL=1; shift ;;
    --pp) PP=$2; shift 2 ;;
    *) break ;;
  esac
done
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
if [ $REAL = 1 ]; then GRAPH=${1:-$ASSETS/graph/cora_ml}; else GRAPH=${1:-embedded}; fi
shift || true
if [ $REAL = 1 ]; then RUN=runs/demo-real
elif [ "$GRAPH" = embedded ]; then RUN=runs/demo
else RUN=runs/demo-$(basename "$GRAPH"); fi
[ "$PP" = 2 ] || RUN=$RUN-pp$PP
RUN=${GRAPHTUNE_DEMO_OUT:-$RUN}
# GRAPHTUNE_BIN (the tests set it): use that build as it is.
if [ -z "${GRAPHTUNE_BIN:-}" ]; then
  scripts/install-deps.sh >/dev/null
  scripts/build.sh >/dev/null
fi
GT=${GRAPHTUNE_BIN:-build/launcher/graphtune}

# The run folder is the demo's own: an earlier demo's run in it, finished or stopped by Ctrl-C,
# is replaced whole (the launcher would refuse a folder holding a run's committed work). What the
# demo does not write, such as a user's own run or a GRAPHTUNE_DEMO_OUT pointed at the wrong
# place, is refused and left as it is; so is a folder a job still holds. The demo writes data/
# before anything else, so a folder without it is not one of its runs. The lock on the folder
# itself, held while the demo runs, keeps a second demo from replacing it under the first.
refuse() { echo "scripts/demo.sh: $RUN: $*" >&2; exit 2; }
[ ! -e "$RUN" ] || [ -d "$RUN" ] || refuse "is not a folder"
mkdir -p "$RUN"
exec 9<"$RUN"
flock -n 9 || refuse "another demo is running in it; one demo a folder"
shopt -s nullglob dotglob
EARLIER=("$RUN"/*)
shopt -u nullglob dotglob
if [ ${#EARLIER[@]} -gt 0 ]; then
  OTHERS=()
  for path in "${EARLIER[@]}"; do
    case " data lm grounding stage1 stage2 eval eval_text_only quality.json quality.txt graphtune.lock " in
      *" ${path##*/} "*) ;;
      *) OTHERS+=("${path##*/}") ;;
    esac
  done
  if [ ${#OTHERS[@]} -gt 0 ] || [ ! -d "$RUN/data" ]; then
    LIST="no data/"
    if [ ${#OTHERS[@]} -gt 0 ]; then LIST=$(printf '%s, ' "${OTHERS[@]:0:3}"); LIST=${LIST%, }; fi
    [ ${#OTHERS[@]} -le 3 ] || LIST+=", ..."
    refuse "holds what is not a demo run ($LIST): left as it is; set GRAPHTUNE_DEMO_OUT to another folder"
  fi
  for lock in "$RUN"/graphtune.lock "$RUN"/*/graphtune.lock; do
    if [ -e "$lock" ] && ! flock -n "$lock" true; then refuse "a job still runs in it ($(cat "$lock"))"; fi
  done
  echo "demo: replacing the earlier demo run in $RUN" >&2
  rm -rf "${EARLIER[@]}"
fi
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
# their answers from their text. --real has no warm-up and uses the same split (val unused), so
# its test papers are the first of the small demo's.
build_records() {
  local common=(--graph "$GRAPH" --hops 2 --seed 42 --train-frac 0.4 --val-frac 0.4 --overwrite)
  local nc=("${common[@]}" --fanout 8 --max-nodes 24 --task node_classification)
  local gm=("${common[@]}" --fanout 4 --max-nodes 8 --task graph_matching --split train)
  if [ $REAL = 1 ]; then
    "$GT" data build "${gm[@]}" --max-records 96 --out "$DATA/graph_matching_train.json"
    # The training papers whose labels grounding and the GCN learn; stage 2 tunes on 240 of them.
    "$GT" data build "${nc[@]}" --split train --out "$DATA/node_classification_labels.json"
    "$GT" data build "${nc[@]}" --split train --max-records 240 --out "$DATA/node_classification_train.json"
    "$GT" data build "${nc[@]}" --split test --max-records 200 --out "$DATA/node_classification_test.json"
    return
  fi
  "$GT" data build "${gm[@]}" --max-records 400 --out "$DATA/graph_matching_train.json"
  "$GT" data build "${nc[@]}" --split val --out "$DATA/node_classification_warmup.json"
  "$GT" data build "${nc[@]}" --split train --out "$DATA/node_classification_train.json"
  "$GT" data build "${nc[@]}" --split test --out "$DATA/node_classification_test.json"
}

# Every path of the configs, pointed into $RUN, and the graph.
PATHS=(--data.graph "$GRAPH")
ENCODER=(--model.graph_encoder "$RUN/grounding/graph_encoder.safetensors")
if [ $REAL = 1 ]; then
  CONFIGS=configs/smollm2
  MODEL=("${ENCODER[@]}")  # the configs name the LLM: smollm2
else
  CONFIGS=configs/demo
  MODEL=(--model.path "$RUN/lm/model" "${ENCODER[@]}")
fi
stage data build_records
[ $REAL = 1 ] || stage lm "$GT" train --config configs/demo/lm.toml --pp "$PP" "${PATHS[@]}" --job.out_dir "$RUN/lm" \
  --data.instructions "$DATA/node_classification_warmup.json" "$@"
GROUNDING=()
[ $REAL = 0 ] || GROUNDING=(--data.instructions "$DATA/node_classification_labels.json" --model.encoder_dropout 0.5
  --training.steps 600)
stage grounding "$GT" train --config configs/demo/grounding.toml "${PATHS[@]}" --job.out_dir "$RUN/grounding" \
  "${GROUNDING[@]}" "$@"
# --real: stage 2 also trains LoRA adapters on the frozen LLM (the best row of docs/quality.md);
# the graph eval applies them, the zero-shot one runs the LLM as it is.
TUNE=()
[ $REAL = 0 ] || TUNE=(--stage2.training.trainable projector+lora --stage2.optimizer.lr 2e-3)
stage pipeline "$GT" pipeline --config $CONFIGS/pipeline.toml --pp "$PP" --pipeline.out_dir "$RUN" "${TUNE[@]}" \
  --pipeline.eval_instructions "$DATA/node_classification_test.json" "${PATHS[@]}" "${MODEL[@]}" \
  --stage1.data.instructions "$DATA/graph_matching_train.json" \
  --stage2.data.instructions "$DATA/node_classification_train.json" "$@"

# --real: the baselines on the same labels, features and test papers, and the table.
if [ $REAL = 1 ]; then
  stage baselines bash -c '"$1" data convert --graph "$2" --out "$3/folder" --overwrite &&
    "${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}" bench/quality_baselines.py --graph "$3/folder" \
      --train "$3/node_classification_labels.json" --test "$3/node_classification_test.json" \
      --run "graph model (GraphGPT recipe)=$4/eval" --run "same LLM zero-shot, text alone=$4/eval_text_only" \
      --json "$4/quality.json" >"$4/quality.txt"' _ "$GT" "$GRAPH" "$DATA" "$RUN"
fi

# metrics.json: the first value of a field (accuracy: the top-level one).
field() { sed -n "s/^ *\"$2\": \([0-9.e-]*\),\{0,1\}$/\1/p" "$1" | head -n 1; }
score() { printf '  %-34s %8.4f %9.4f\n' "$1" "$(field "$2" accuracy)" "$(field "$2" macro_f1)"; }
echo
echo "GraphGPT demo on '$GRAPH' ($RUN)"
printf '  %-10s %8s\n' stage seconds
total=0
for i in "${!NAMES[@]}"; do
  printf '  %-10s %8.1f\n' "${NAMES[$i]}" "${SECS[$i]}"
  total=$(awk "BEGIN { print $total + ${SECS[$i]} }")
done
printf '  %-10s %8.1f\n' total "$total"
echo "test papers, node classification ($(field "$RUN/eval/metrics.json" n) papers):"
printf '  %-34s %8s %9s\n' "" accuracy macro-F1
score "graph model (GraphGPT recipe)" "$RUN/eval/metrics.json"
score "same LLM, text alone (no graph)" "$RUN/eval_text_only/metrics.json"
printf '  %-34s %8.4f\n' "always the most common class" "$(field "$RUN/eval/metrics.json" majority)"
printf '  %-34s %8.4f\n' "chance" "$(field "$RUN/eval/metrics.json" chance)"
if [ $REAL = 1 ]; then
  echo "the same test papers, beside baselines trained on the labels the grounding learnt (bench/quality_baselines.py):"
  cat "$RUN/quality.txt"
fi
