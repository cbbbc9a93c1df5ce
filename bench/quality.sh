#!/usr/bin/env bash
# Does the GraphGPT recipe learn? One table per graph, every row on the same training papers and
# the same test papers, node classification, with 95% bootstrap intervals over the test papers:
#   - the graph model (SmolLM2-135M-Instruct frozen, the encoder frozen, the projector trained)
#     after each recipe this file runs, an ablation row each;
#   - the same LLM zero-shot from the text alone;
#   - the majority class, and an MLP and a two-layer GCN (PyTorch Geometric) trained on the same
#     labels and the node features the graph encoder gets (bench/quality_baselines.py), and a
#     GCN whose hidden size and feature normalisation are chosen on the validation papers, as
#     the recipe was: the one each graph model is measured against;
#   - a linear probe of each graph encoder's output: what the encoder carries.
# Graphs (QUALITY_GRAPHS):
#   cora_ml  Cora-ML (text: its keywords), as the text-graph folder `graphtune data convert`
#            writes (its features.npy: the 128-d text features the encoder gets);
#   linqs    the classic Cora (LINQS): no text, 1,433 binary word features, through the same
#            text-graph folder format as any user's graph (scripts/linqs_to_text_graph.py); the
#            LLM can learn the answer from the graph tokens only;
#   PATH     your own text-graph folder (docs/embedded-corpus.md, "Files"): does the recipe learn
#            on your graph? Without texts (every title and text empty) it runs as linqs does.
# Recipes (each after the same records; stage 2 trains on STAGE2_RECORDS of the training papers):
#   graphgpt  GraphGPT's: text-graph grounding (CLIP on the papers' texts), stage 1 on graph
#             matching, stage 2 (linqs has no text: a fresh encoder, and no stage 1, which matches
#             graph tokens to titles);
#   labels    the grounding also learns the training papers' classes ([data].instructions in
#             stage grounding: each is grounded in its class's text, on its record's subgraph;
#             encoder dropout 0.5, 600 steps), then the same stages;
#   lora      labels' encoder and stage 1, and stage 2 trains LoRA adapters on the frozen LLM
#             too ([training].trainable = "projector+lora", rank 8 on q_proj and v_proj, lr 2e-3);
#   lora_all  the same, stage 2 on every training paper;
#   gcn       lora_all with GraphGPT's other encoder, its two-layer GCN
#             ([model].graph_encoder_type = "gcn"), grounded in the labels as labels grounds the
#             graph transformer but with encoder dropout 0.4 for 900 steps (chosen on the
#             validation papers' probe), with its own stage 1. The default until hop_field;
#   encoder   gcn's grounding and stage 1, then stage 2 trains the encoder too, end to end
#             through the frozen LLM ([training].trainable = "graphgpt+encoder", no LoRA, lr 2e-3,
#             ENCODER_LR 1e-3), on every training paper;
#   lora_encoder  gcn's grounding and stage 1 (reused from recipe gcn), then stage 2 as gcn's
#             with the encoder trained too ([training].trainable = "projector+lora+encoder");
#   llaga     LLaGA's recipe: no GNN, no grounding, no stage 1; each paper's graph is LLaGA's
#             neighbour tree (2 hops, LLAGA_FANOUT children a slot, default 10: 111 graph tokens;
#             records of the same papers, data build --template llaga), each slot's features beside
#             its place in the tree ([model].graph_encoder_type = "llaga"); stage 2 trains the
#             projector and LoRA as gcn does, on every training paper;
#   hop_field LLaGA's other template, its hop-field overview: no GNN, no grounding, no stage 1;
#             each paper's graph tokens are its features (each row over its Euclidean norm,
#             FIELD_ROWS) after 0..FIELD_HOPS (default 16) steps of
#             the GCN's propagation over the whole graph, one token a hop (records of the same
#             papers, data build --template hop_field; [model].graph_encoder_type = "hop_field");
#             stage 2 as llaga's. Its probe reads the centre's own token (hop 0); a second row
#             reads every hop of the centre. The best recipe on both graphs' validation papers,
#             and the default;
#   hop_field_gcn  gcn's grounding, then hop_field with that grounded GCN's output for every
#             paper (standardised) beside its features before the propagation
#             ([model].hop_field_base); no stage 1.
# With RECIPE_SEEDS N (default 1) each recipe runs whole N times (grounding, stage 1, stage 2 and
# eval with --training.seed 1 .. N, into RECIPE/seedS): its row is the mean over the seeds, with
# each seed's accuracy, and a row compares it with the mean linear probe of its own encoders.
# RECIPE_SEEDS=2,3 (a comma list; "3," is seed 3 alone) runs those seeds only, into the same
# RECIPE/seedS folders: one seed of a long run again, or more seeds for a run that has some.
# KEEP_SEEDS=1 keeps each seed an earlier run into the same OUT finished with the same settings,
# build and CPU model (its eval written, and bench_settings.txt beside it saying them: another
# build or CPU trains another trajectory from the same seed) and runs the rest, the table
# taking in all: RECIPE_SEEDS=3 KEEP_SEEDS=1 after a run stopped in seed 3 runs seed 3 alone.
# TRAINED_IN=OUT scores, instead of training again, each seed an earlier run into that OUT
# finished with the same settings but SCORE_ON (training never sees the papers scored, and the
# runner is deterministic): its trained folders are copied and only eval runs. The test papers of
# settings chosen on the validation papers: SCORE_ON=val into runs/val, then
# TRAINED_IN=runs/val into runs/test (a seed the validation run lacks is trained).
# Not part of CI. The default (hop_field alone, one seed, with the baselines and zero-shot) took
# 39 minutes on 2 cores alone (Cora-ML 25, LINQS 14), before the GCN chosen on the validation
# papers added up to 5; every recipe, ablations included, several times that (docs/quality.md).
# Usage:
#   bench/quality.sh [OUT]        (after scripts/build.sh; OUT defaults to runs/quality)
# Run again into the same OUT (after it finished, or after a Ctrl-C), each graph's records,
# zero-shot and the recipes it runs replace the earlier ones, one line says so, and the folders
# of recipes not run this time are kept.
# Settings are chosen on the validation papers: SCORE_ON=val scores every row on them (the split's
# other 40%, which nothing trains on) into table-val.txt / table-val.json instead of the test
# papers' table.txt; ZERO_SHOT=0 leaves out the zero-shot row.
# Environment: QUALITY_GRAPHS ("cora_ml linqs", or folder paths), RECIPES ("hop_field"; every row:
# "graphgpt labels lora lora_all gcn encoder lora_encoder llaga hop_field hop_field_gcn"), RECIPE_SEEDS (1, or a list: 2,3),
# ENCODER_LR (1e-3),
# LLAGA_FANOUT (10), FIELD_HOPS (16, chosen on the validation papers; LLaGA's own is 4),
# FIELD_DROPOUT (0: stage 2's dropout of the hop field's features, [model].encoder_dropout),
# FIELD_ROWS (l2, chosen on the validation papers: each paper's features over their Euclidean
# norm before the hops; l1 over their sum of absolute values; as_is as they are;
# [model].hop_field_rows), FIELD_PROJECTOR (shared: the projector reads every hop with one map;
# per_hop: each hop with its own, SIGN's way; [model].hop_field_projector),
# STAGE2_RECORDS (480), STAGE2_EPOCHS (2, GraphGPT's own, chosen on the validation papers: stage
# 2's epochs in every recipe), STAGE2_ARGS (none: more "--section.key VALUE" pairs for stage 2 of
# every recipe, a lever to try: STAGE2_ARGS="--optimizer.weight_decay 0.1"), ANSWERS (free: the
# LLM's answers as it writes them; choices: decoded within the class names, [eval].answers, for
# every LLM row, zero-shot included),
# SEEDS (5, for GCN/MLP), RANKS (2: stages 1 and 2 on that many
# data-parallel ranks of one thread each, which on 2 cores trains 15% faster than one rank of two
# threads; every layout is proven equal to one process); for a quick try of the script itself,
# TEST_RECORDS (0: every test paper) and GM_RECORDS (96, stage 1's records); SHORT=1 tries a change
# in minutes: 64 stage-2 records, 100 test papers, 16 stage-1 records, 100 grounding steps, one
# seed for the GCN and MLP, stage 2 on the 64 records in every recipe (its numbers say whether it
# runs, not how well).
set -euo pipefail
# recipe runs in $(...), where bash drops -e: without this a stage that failed or was stopped by
# Ctrl-C was followed by the next ones, and the bench ended in a traceback over missing files.
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
BUILD=${GRAPHTUNE_BUILD:-build}
GT=${GRAPHTUNE_BIN:-$BUILD/launcher/graphtune}
PY=${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
OUT=${1:-runs/quality}
GRAPHS=${QUALITY_GRAPHS:-cora_ml linqs}
RECIPES=${RECIPES:-hop_field}
SHORT=${SHORT:-0}
SCORE_ON=${SCORE_ON:-test}
ZERO_SHOT=${ZERO_SHOT:-1}
case $SCORE_ON in test|val) ;; *) echo "bench/quality.sh: SCORE_ON must be test or val, got '$SCORE_ON'" >&2; exit 2 ;; esac
GROUNDING_STEPS=()  # the recipe's own, unless SHORT
if [ "$SHORT" = 1 ]; then
  : "${STAGE2_RECORDS:=64}" "${TEST_RECORDS:=100}" "${GM_RECORDS:=16}" "${SEEDS:=1}"
  GROUNDING_STEPS=(--training.steps 100)
fi
STAGE2_RECORDS=${STAGE2_RECORDS:-480}
TEST_RECORDS=${TEST_RECORDS:-0}
GM_RECORDS=${GM_RECORDS:-96}
SEEDS=${SEEDS:-5}
RECIPE_SEEDS=${RECIPE_SEEDS:-1}
KEEP_SEEDS=${KEEP_SEEDS:-0}
TRAINED_IN=${TRAINED_IN:-}
STAGE2_EPOCHS=${STAGE2_EPOCHS:-2}
ENCODER_LR=${ENCODER_LR:-1e-3}
LLAGA_FANOUT=${LLAGA_FANOUT:-10}
FIELD_HOPS=${FIELD_HOPS:-16}
FIELD_DROPOUT=${FIELD_DROPOUT:-0}
FIELD_ROWS=${FIELD_ROWS:-l2}
FIELD_PROJECTOR=${FIELD_PROJECTOR:-shared}
STAGE2_ARGS=${STAGE2_ARGS:-}
read -ra STAGE2_EXTRA <<< "$STAGE2_ARGS"
ANSWERS=${ANSWERS:-free}
RANKS=${RANKS:-2}
TUNE_RANKS=()
[ "$RANKS" -gt 1 ] && TUNE_RANKS=(--dp "$RANKS" --training.threads 1)
for graph in $GRAPHS; do
  case $graph in
    cora_ml) f=$ASSETS/graph/cora_ml/nodes.tsv ;;
    linqs) f=$ASSETS/graph/cora_linqs/cora.npz ;;
    *) f=$graph/nodes.tsv
       [ -f "$f" ] || { echo "bench/quality.sh: QUALITY_GRAPHS: '$graph' is neither cora_ml, linqs nor a text-graph folder (no $f)" >&2; exit 2; } ;;
  esac
  [ -f "$f" ] || { echo "bench/quality.sh: $f is missing (the shared assets; set GRAPHTUNE_ASSETS)" >&2; exit 2; }
done
# SEED_LIST: the seeds each recipe runs with; SEED_FOLDERS=1 puts each into RECIPE/seedS.
case $RECIPE_SEEDS in
  *,*) IFS=, read -ra SEED_LIST <<< "$RECIPE_SEEDS"; SEED_FOLDERS=1 ;;
  *) SEED_LIST=(); SEED_FOLDERS=0 ;;
esac
for s in "${SEED_LIST[@]}" "${RECIPE_SEEDS//,*}"; do
  case $s in ''|*[!0-9]*|0) echo "bench/quality.sh: RECIPE_SEEDS must be a positive whole number or a comma list of them (2,3), got '$RECIPE_SEEDS'" >&2; exit 2 ;; esac
done
if [ "$SEED_FOLDERS" = 0 ]; then
  SEED_LIST=($(seq "$RECIPE_SEEDS"))
  if [ "$RECIPE_SEEDS" -gt 1 ]; then SEED_FOLDERS=1; fi
fi
case $KEEP_SEEDS in 0|1) ;; *) echo "bench/quality.sh: KEEP_SEEDS must be 0 or 1, got '$KEEP_SEEDS'" >&2; exit 2 ;; esac
case $STAGE2_EPOCHS in ''|*[!0-9]*|0) echo "bench/quality.sh: STAGE2_EPOCHS must be a positive whole number, got '$STAGE2_EPOCHS'" >&2; exit 2 ;; esac
awk -v p="$FIELD_DROPOUT" 'BEGIN { exit !(p ~ /^[0-9]*\.?[0-9]+$/ && p < 1) }' ||
  { echo "bench/quality.sh: FIELD_DROPOUT must be a number in [0, 1), got '$FIELD_DROPOUT'" >&2; exit 2; }
case $FIELD_ROWS in as_is|l1|l2) ;; *) echo "bench/quality.sh: FIELD_ROWS must be as_is, l1 or l2, got '$FIELD_ROWS'" >&2; exit 2 ;; esac
case $FIELD_PROJECTOR in shared|per_hop) ;;
  *) echo "bench/quality.sh: FIELD_PROJECTOR must be shared or per_hop, got '$FIELD_PROJECTOR'" >&2; exit 2 ;; esac
case $ANSWERS in free|choices) ;; *) echo "bench/quality.sh: ANSWERS must be free or choices, got '$ANSWERS'" >&2; exit 2 ;; esac
# Checked here, not by the first stage 2 minutes into the run; graphtune itself checks the keys.
for ((i = 0; i < ${#STAGE2_EXTRA[@]}; i += 2)); do
  [[ ${STAGE2_EXTRA[i]} =~ ^--[a-z_0-9]+\.[a-z_0-9]+$ ]] && [ $((i + 1)) -lt ${#STAGE2_EXTRA[@]} ] ||
    { echo "bench/quality.sh: STAGE2_ARGS must be --section.key VALUE pairs, got '$STAGE2_ARGS'" >&2; exit 2; }
done
mkdir -p "$OUT"
if [ -n "$TRAINED_IN" ]; then
  [ -d "$TRAINED_IN" ] || { echo "bench/quality.sh: TRAINED_IN: '$TRAINED_IN' is not a folder (an earlier bench OUT)" >&2; exit 2; }
  [ "$(cd "$TRAINED_IN" && pwd -P)" != "$(cd "$OUT" && pwd -P)" ] ||
    { echo "bench/quality.sh: TRAINED_IN is OUT itself ('$OUT'); KEEP_SEEDS=1 keeps its finished seeds" >&2; exit 2; }
fi

now() { date +%s.%N; }
since() { awk "BEGIN { printf \"%.0f\", $(now) - $1 }"; }
log() { echo "== $*" >&2; }

# Each graph: its text-graph folder, then node-classification records split 40/40/20 (train,
# val unused, test) and graph-matching records of the training papers.
# has_text FOLDER: true when some node has a title or a text (grounding and stage 1 need them).
has_text() {
  "$PY" -c 'import csv, sys; r = csv.DictReader(open(sys.argv[1], encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE)
sys.exit(0 if any((row.get("title") or "").strip() or (row.get("text") or "").strip() for row in r) else 1)' "$1/nodes.tsv"
}

records() {  # records TEXTLESS FOLDER DIR
  local common=(--graph "$2" --hops 2 --seed 42 --train-frac 0.4 --val-frac 0.4 --overwrite)
  local nc=("${common[@]}" --fanout 8 --max-nodes 24 --task node_classification)
  "$GT" data build "${nc[@]}" --split train --out "$3/train.json"
  "$GT" data build "${nc[@]}" --split train --max-records "$STAGE2_RECORDS" --out "$3/stage2.json"
  "$GT" data build "${nc[@]}" --split "$SCORE_ON" --max-records "$TEST_RECORDS" --out "$3/$SCORE_ON.json"
  # The validation papers, where the GCN row's settings are chosen (already built when scored).
  [ "$SCORE_ON" = val ] || "$GT" data build "${nc[@]}" --split val --max-records "$TEST_RECORDS" --out "$3/val.json"
  [ "$1" = textless ] || "$GT" data build "${common[@]}" --fanout 4 --max-nodes 8 --task graph_matching --split train \
    --max-records "$GM_RECORDS" --out "$3/graph_matching.json"
  # LLaGA's trees of the same papers (the same split, ids and order).
  case " $RECIPES " in *" llaga "*)
    local tree=(--graph "$2" --seed 42 --train-frac 0.4 --val-frac 0.4 --overwrite --task node_classification
                --template llaga --hops 2 --fanout "$LLAGA_FANOUT")
    "$GT" data build "${tree[@]}" --split train --out "$3/llaga_train.json"
    "$GT" data build "${tree[@]}" --split train --max-records "$STAGE2_RECORDS" --out "$3/llaga_stage2.json"
    "$GT" data build "${tree[@]}" --split "$SCORE_ON" --max-records "$TEST_RECORDS" --out "$3/llaga_$SCORE_ON.json" ;;
  esac
  # LLaGA's hop fields of the same papers.
  case " $RECIPES " in *" hop_field "*|*" hop_field_gcn "*)
    local field=(--graph "$2" --seed 42 --train-frac 0.4 --val-frac 0.4 --overwrite --task node_classification
                 --template hop_field --hops "$FIELD_HOPS")
    "$GT" data build "${field[@]}" --split train --out "$3/hop_field_train.json"
    "$GT" data build "${field[@]}" --split train --max-records "$STAGE2_RECORDS" --out "$3/hop_field_stage2.json"
    "$GT" data build "${field[@]}" --split "$SCORE_ON" --max-records "$TEST_RECORDS" --out "$3/hop_field_$SCORE_ON.json" ;;
  esac
}

# One recipe on one graph, one seed: grounding (or none), stage 1 (where the graph has texts),
# stage 2, eval on the test papers, into DIR/NAME (DIR/NAME/seedS with several seeds). Prints
# the seconds it took (lora reuses labels' grounding and stage 1, which its time leaves out).
recipe() {  # recipe TEXTLESS FOLDER DIR NAME SEED
  local textless=$1 folder=$2 dir=$3 name=$4 seed=$5 t0 run from encoder projector=() tune=() records=$3/stage2.json
  run=$(recipe_dir "$dir" "$name" "$seed")
  from=$run
  t0=$(now)
  local stage=(--data.graph "$folder" --job.overwrite true --training.seed "$seed")
  case $name in
    graphgpt) [ "$textless" = textless ] || "$GT" train --config configs/demo/grounding.toml "${stage[@]}" \
                "${GROUNDING_STEPS[@]}" --job.out_dir "$run/grounding" >&2 ;;
    labels|gcn|encoder|hop_field_gcn)
      local kind=gt dropout=0.5 steps=600
      [ "$name" != labels ] && kind=gcn dropout=0.4 steps=900
      "$GT" train --config configs/demo/grounding.toml "${stage[@]}" --job.out_dir "$run/grounding" \
        --data.instructions "$dir/train.json" --model.encoder_dropout "$dropout" --training.steps "$steps" \
        "${GROUNDING_STEPS[@]}" --model.graph_encoder_type "$kind" >&2 ;;
    lora|lora_all) from=$(recipe_dir "$dir" labels "$seed")
           [ -f "$from/stage2/graph_encoder.safetensors" ] || { echo "bench/quality.sh: recipe $name needs recipe labels first (RECIPES)" >&2; exit 2; } ;;
    lora_encoder) from=$(recipe_dir "$dir" gcn "$seed")
           [ -f "$from/stage2/graph_encoder.safetensors" ] || { echo "bench/quality.sh: recipe $name needs recipe gcn first (RECIPES)" >&2; exit 2; } ;;
  esac
  case $name in
    lora|lora_all|gcn|llaga|hop_field|hop_field_gcn) tune=(--training.trainable projector+lora --optimizer.lr 2e-3) ;;
    encoder) tune=(--training.trainable graphgpt+encoder --optimizer.lr 2e-3 --optimizer.encoder_lr "$ENCODER_LR") ;;
    lora_encoder) tune=(--training.trainable projector+lora+encoder --optimizer.lr 2e-3 --optimizer.encoder_lr "$ENCODER_LR") ;;
  esac
  case $name in lora_all|gcn|encoder|lora_encoder) [ "$SHORT" = 1 ] || records=$dir/train.json ;; esac
  if [ -f "$from/grounding/graph_encoder.safetensors" ]; then encoder=(--model.graph_encoder "$from/grounding/graph_encoder.safetensors")
  else encoder=(--model.graph_encoder ""); fi
  if [ "$name" = llaga ]; then  # no GNN, no grounding, no stage 1: the projector learns the task
    records=$dir/llaga_train.json
    [ "$SHORT" = 1 ] && records=$dir/llaga_stage2.json
    encoder=(--model.graph_encoder "" --model.graph_encoder_type llaga --model.llaga_hops 2 --model.llaga_fanout "$LLAGA_FANOUT")
    projector=(--model.projector "")
  elif [ "$name" = hop_field ] || [ "$name" = hop_field_gcn ]; then  # the same: the projector learns to read the hops
    records=$dir/hop_field_train.json
    [ "$SHORT" = 1 ] && records=$dir/hop_field_stage2.json
    local base=()
    [ "$name" = hop_field_gcn ] && base=(--model.hop_field_base "$run/grounding/graph_encoder.safetensors")
    encoder=(--model.graph_encoder "" --model.graph_encoder_type hop_field --model.hop_field_hops "$FIELD_HOPS" "${base[@]}"
             --model.hop_field_rows "$FIELD_ROWS" --model.hop_field_projector "$FIELD_PROJECTOR"
             --model.encoder_dropout "$FIELD_DROPOUT")
    projector=(--model.projector "")
  elif [ "$textless" = textless ]; then
    projector=(--model.projector "")
  else
    [ "$from" != "$run" ] || "$GT" train --config configs/smollm2/stage1.toml "${stage[@]}" "${encoder[@]}" \
      --job.out_dir "$run/stage1" --data.instructions "$dir/graph_matching.json" "${TUNE_RANKS[@]}" >&2
    projector=(--model.projector "$from/stage1/graph_projector.bin")
  fi
  "$GT" train --config configs/smollm2/stage2.toml "${stage[@]}" "${encoder[@]}" "${projector[@]}" "${tune[@]}" \
    --training.epochs "$STAGE2_EPOCHS" --job.out_dir "$run/stage2" --data.instructions "$records" "${TUNE_RANKS[@]}" \
    "${STAGE2_EXTRA[@]}" >&2
  score "$folder" "$dir" "$name" "$run" "$seed"
  since "$t0"
}

# score FOLDER DIR NAME RUN SEED: the eval of a trained run on the papers scored (SCORE_ON), in
# the recipe's own records. The encoder stage 2 ran with (a fresh one included, or the one it
# trained) is beside its projector, and its adapter.
score() {
  local scored=$2/$SCORE_ON.json adapter=()
  case $3 in llaga) scored=$2/llaga_$SCORE_ON.json ;; hop_field|hop_field_gcn) scored=$2/hop_field_$SCORE_ON.json ;; esac
  [ -d "$4/stage2/adapter" ] && adapter=(--model.adapter "$4/stage2/adapter")
  "$GT" eval --config configs/smollm2/stage2.toml --data.graph "$1" "${adapter[@]}" --training.seed "$5" \
    --model.graph_encoder "$4/stage2/graph_encoder.safetensors" --model.projector "$4/stage2/graph_projector.bin" \
    --data.instructions "$scored" --eval.answers "$ANSWERS" --out "$4/eval" --overwrite >&2
}

# trained_matches TRAINED_RUN NAME: whether that earlier run (TRAINED_IN) finished with these
# settings but the eval's own (SCORE_ON, ANSWERS); says why not.
trained_matches() {
  local eval_only='s/ score_on=[a-z]*//; s/ answers=[a-z]*//'
  [ -f "$1/eval/metrics.json" ] && [ -f "$1/bench_seconds.txt" ] && [ -f "$1/stage2/graph_projector.bin" ] ||
    { log "TRAINED_IN: no finished run in $1; training it here"; return 1; }
  [ "$(sed "$eval_only" "$1/bench_settings.txt" 2>/dev/null)" = "$(run_settings "$2" | sed "$eval_only")" ] ||
    { log "TRAINED_IN: $1 was trained with other settings; training it here"; return 1; }
}

# scored_from TRAINED_RUN FOLDER DIR NAME SEED: that run scored here. Copies its trained folders
# (not its eval) and runs the eval; prints the seconds: its training's (its total less its own
# eval's, which began when its projector was written and ended with its metrics) plus this eval's.
scored_from() {
  local other=$1 run t0 d trained
  run=$(recipe_dir "$3" "$4" "$5")
  t0=$(now)
  rm -rf "$run"
  mkdir -p "$run"
  for d in "$other"/*/; do [ "$(basename "$d")" = eval ] || cp -r "$d" "$run/"; done
  echo "$other" > "$run/trained_in.txt"
  score "$2" "$3" "$4" "$run" "$5"
  trained=$(($(cat "$other/bench_seconds.txt") - ($(stat -c %Y "$other/eval/metrics.json") - $(stat -c %Y "$other/stage2/graph_projector.bin"))))
  echo $((trained + $(since "$t0")))
}

list() { local IFS=,; echo "$*"; }  # list A B C: "A,B,C"

# Where a recipe's seed runs: DIR/NAME for one seed (as before seeds existed), DIR/NAME/seedS.
recipe_dir() {  # recipe_dir DIR NAME SEED
  if [ "$SEED_FOLDERS" = 0 ]; then echo "$1/$2"; else echo "$1/$2/seed$3"; fi
}

# What else a trained seed depends on: the runner is deterministic on one machine with one build,
# but another build, or another CPU (its kernels round differently), trains another trajectory
# from the same seed. So KEEP_SEEDS and TRAINED_IN reuse a seed only from this build (a hash of
# the binaries) on this CPU model with as many cores.
worker_binary() {  # where the launcher finds it
  local d w
  d=$(dirname "$GT")
  w=${GRAPHTUNE_WORKER:-}
  [ -n "$w" ] || for w in "$d/graphtune-worker" "$d/../worker/graphtune-worker"; do [ -x "$w" ] && break; done
  echo "$w"
}
[ -x "$GT" ] && [ -x "$(worker_binary)" ] ||
  { echo "bench/quality.sh: $GT or its graphtune-worker is not built: run scripts/build.sh first" >&2; exit 2; }
BUILD_ID=$(cat "$GT" "$(worker_binary)" | sha256sum | cut -c1-16)
# A virtual machine's model name can be as vague as "Intel(R) Xeon(R) Processor": its instruction
# sets (which kernels libtorch picks) tell such CPUs apart.
MACHINE_ID="$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -1 | tr -s ' ' | tr ' ' _)"
MACHINE_ID+=",flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-8),cores=$(nproc)"

# run_settings NAME: what a recipe's run depends on beyond its graph and seed (the records are
# rebuilt the same from the split's fixed seed), written beside a finished run for KEEP_SEEDS.
run_settings() {
  local field="" ranks="" answers=""  # named only when not what every run had before they were recorded
  [ "$FIELD_ROWS" = as_is ] || field=" field_rows=$FIELD_ROWS"
  [ "$FIELD_PROJECTOR" = shared ] || field+=" field_projector=$FIELD_PROJECTOR"
  [ "$ANSWERS" = free ] || answers=" answers=$ANSWERS"
  # Every layout equals one process to rounding, not bit for bit: a seed is kept or reused only
  # from a run on as many ranks.
  [ "$RANKS" = 2 ] || ranks=" ranks=$RANKS"
  echo "recipe=$1 score_on=$SCORE_ON short=$SHORT test_records=$TEST_RECORDS stage2_records=$STAGE2_RECORDS" \
    "stage2_epochs=$STAGE2_EPOCHS gm_records=$GM_RECORDS encoder_lr=$ENCODER_LR llaga_fanout=$LLAGA_FANOUT" \
    "field_hops=$FIELD_HOPS field_dropout=$FIELD_DROPOUT${STAGE2_ARGS:+ stage2_args=$STAGE2_ARGS}$field$ranks$answers" \
    "build=$BUILD_ID machine=$MACHINE_ID"
}

# kept_seconds DIR NAME SEED: with KEEP_SEEDS=1, the seconds of that seed's finished run with
# these settings (it is kept); nothing where it is to run.
kept_seconds() {
  local run
  run=$(recipe_dir "$1" "$2" "$3")
  [ "$KEEP_SEEDS" = 1 ] && [ -f "$run/eval/metrics.json" ] && [ -f "$run/bench_seconds.txt" ] || return 0
  if [ "$(cat "$run/bench_settings.txt" 2>/dev/null)" = "$(run_settings "$2")" ]; then cat "$run/bench_seconds.txt"
  else echo "bench/quality.sh: $run was run with other settings; running it again" >&2; fi
}

for graph in $GRAPHS; do
  case $graph in
    cora_ml|linqs) name=$graph ;;
    *) name=$(basename "$(cd "$graph" && pwd)") ;;
  esac
  dir=$OUT/$name
  folder=$dir/folder
  # Run again, each stage here replaces its earlier run (--job.overwrite, eval --overwrite: an eval
  # stopped by Ctrl-C is otherwise refused; data build writes anew); the folders of recipes not in
  # RECIPES this time are kept.
  if [ -f "$dir/$SCORE_ON.json" ]; then
    kept=""
    [ "$KEEP_SEEDS" = 1 ] && kept=" (KEEP_SEEDS: their seeds finished with the same settings kept)"
    echo "bench/quality.sh: replacing the earlier run in $dir: the records, zero-shot and recipe(s)" $RECIPES"$kept" >&2
  fi
  mkdir -p "$dir"
  log "$name: the text-graph folder and the records"
  case $graph in
    linqs) "$PY" scripts/linqs_to_text_graph.py "$ASSETS/graph/cora_linqs" "$folder" ;;
    cora_ml) "$GT" data convert --graph "$ASSETS/graph/$graph" --out "$folder" --overwrite ;;
    *) folder=$(cd "$graph" && pwd) ;;  # the user's folder, read where it is
  esac
  textless=text
  has_text "$folder" || textless=textless
  records "$textless" "$folder" "$dir"

  runs=()
  if [ "$ZERO_SHOT" = 1 ]; then
    log "$name: zero-shot, the LLM from the text alone"
    t0=$(now)
    "$GT" eval --config configs/smollm2/stage2.toml --data.graph "$folder" --model.graph_encoder "" --model.projector "" \
      --data.instructions "$dir/$SCORE_ON.json" --eval.text_only true --eval.answers "$ANSWERS" --out "$dir/zero_shot" --overwrite >&2
    runs=(--run "SmolLM2-135M zero-shot, text alone=$dir/zero_shot=$(since "$t0")")
  fi
  probes=()
  pairs=()
  for recipe_name in $RECIPES; do
    evals=() encoders=() secs=0
    for seed in "${SEED_LIST[@]}"; do
      run_dir=$(recipe_dir "$dir" "$recipe_name" "$seed")
      s=$(kept_seconds "$dir" "$recipe_name" "$seed")
      if [ -n "$s" ]; then
        log "$name: recipe $recipe_name, seed $seed (of ${SEED_LIST[*]}): kept, finished earlier with these settings"
      else
        rm -f "$run_dir/bench_settings.txt" "$run_dir/bench_seconds.txt"
        trained=""
        [ -z "$TRAINED_IN" ] || trained=$(recipe_dir "$TRAINED_IN/$name" "$recipe_name" "$seed")
        if [ -n "$trained" ] && trained_matches "$trained" "$recipe_name"; then
          log "$name: recipe $recipe_name, seed $seed (of ${SEED_LIST[*]}): trained in $TRAINED_IN, scored here"
          s=$(scored_from "$trained" "$folder" "$dir" "$recipe_name" "$seed")
        else
          log "$name: recipe $recipe_name, seed $seed (of ${SEED_LIST[*]})"
          s=$(recipe "$textless" "$folder" "$dir" "$recipe_name" "$seed")
        fi
        run_settings "$recipe_name" > "$run_dir/bench_settings.txt"
        echo "$s" > "$run_dir/bench_seconds.txt"
      fi
      secs=$((secs + s))
      evals+=("$run_dir/eval")
      encoders+=("$run_dir/stage2/graph_encoder.safetensors")
    done
    case $recipe_name in
      graphgpt) label="graph model: GraphGPT's recipe" ; [ "$textless" = textless ] && label="graph model: GraphGPT's recipe, fresh encoder" ;;
      labels) label="graph model: + encoder grounded in the labels" ;;
      lora) label="graph model: + LoRA on the LLM" ;;
      lora_all) label="graph model: + stage 2 on every training paper" ;;
      gcn) label="graph model: + GraphGPT's GCN encoder" ;;
      encoder) label="graph model: GCN encoder trained in stage 2" ;;
      llaga) label="graph model: LLaGA's neighbour tree, no GNN" ;;
      hop_field) label="graph model: LLaGA's hop field, no GNN" ;;
      hop_field_gcn) label="graph model: LLaGA's hop field over the GCN encoder's output" ;;
      lora_encoder) label="graph model: + GCN encoder trained in stage 2" ;;
    esac
    runs+=(--run "$label=$(list "${evals[@]}")=$secs")
    case $recipe_name in
      graphgpt|labels|gcn|encoder|llaga|hop_field|hop_field_gcn|lora_encoder)
        probe="linear probe, encoder of '$recipe_name'"
        probes+=(--probe "$probe=$(list "${encoders[@]}")")
        pairs+=(--versus-probe "$label=$probe")
        # quality_baselines.py adds this row beside the hop field's probe: every hop read linearly.
        case $recipe_name in hop_field*) pairs+=(--versus-probe "$label=${probe/linear probe/linear reader of every hop}") ;; esac ;;
    esac
  done
  log "$name: the baselines and the table"
  scored_on=test table=table
  [ "$SCORE_ON" = val ] && scored_on=validation table=table-val
  "$PY" bench/quality_baselines.py --graph "$folder" --train "$dir/train.json" --test "$dir/$SCORE_ON.json" \
    --val "$dir/val.json" --seeds "$SEEDS" \
    --scored-on "$scored_on" "${probes[@]}" "${runs[@]}" "${pairs[@]}" --json "$dir/$table.json" | tee "$dir/$table.txt"
done
