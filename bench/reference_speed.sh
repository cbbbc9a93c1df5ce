#!/usr/bin/env bash
# tokens/s of the same GraphGPT training step (stage graph_matching, fp32, frozen LLM, projector
# and <g_start>/<g_end> rows trained with AdamW) in graphtune and in the PyTorch reference
# (bench/reference/train_step.py: transformers' LlamaForCausalLM), one process with 2 threads
# and 2 processes with 1 thread each (graphtune dp=2 under mpirun; the reference under torchrun
# with DDP over gloo), measured in one run so the rows compare. This machine may be shared:
# read the ratios, not the absolute rates.
#
#   bench/reference_speed.sh [STEPS]        (default 6; graphtune's rate: median of steps 3..STEPS)
#   env: BATCH (4 rows), DIM (512), LAYERS (8), FFN (1376), MAX_NODES (2 nodes per subgraph:
#        records of ~600-750 tokens), PROFILE=N (the reference's N most expensive operators),
#        FIXTURE_DIR (keep the bench model, records and job.toml there),
#        GRAPHTUNE_WORKER, GRAPHTUNE_BIN, GRAPHTUNE_REF_DRIVER, GRAPHTUNE_PYTHON, GRAPHTUNE_ASSETS
#
# The bench model is the wider LLaMA tests/test_graphgpt_reference.py checks graphtune against
# (dim 512, 8 layers, 8 heads, 4 kv heads, FFN 1376, untied head, vocab 512 + 3), written by
# transformers with random weights; tok512 is the tokenizer. tokens/s counts a batch's real
# tokens (attention mask 1, padding excluded, all ranks together) per step, graphtune's
# definition (train_log.jsonl). The job has exactly BATCH records, so every graphtune step is an
# epoch of the same rows (reshuffled: under dp=2 a replica's two rows change); the reference
# runs that batch as graphtune's own tests/graphgpt_reference_driver builds it, over and over
# (its rate: median step after 2 warm-up steps), rank r of DDP rows [r*B/2, (r+1)*B/2).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
[ "$STEPS" -ge 4 ] || { echo "reference_speed: STEPS must be >= 4 (steps 1-2 are warm-up)"; exit 2; }
BATCH=${BATCH:-4} DIM=${DIM:-512} LAYERS=${LAYERS:-8} FFN=${FFN:-1376} MAX_NODES=${MAX_NODES:-2}
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
G=${GRAPHTUNE_BIN:-build/launcher/graphtune}
DRIVER=${GRAPHTUNE_REF_DRIVER:-build/tests/graphgpt_reference_driver}
PY=${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}
TORCHRUN=$(dirname "$PY")/torchrun
TOK=${GRAPHTUNE_ASSETS:-../shared/assets}/llm/tok512.bin
for f in "$W" "$G" "$DRIVER" "$PY" "$TORCHRUN" "$TOK"; do
  [ -e "$f" ] || { echo "reference_speed: $f not found (build graphtune, run scripts/install-deps.sh)"; exit 2; }
done
# FIXTURE_DIR: keep the model, the records and the job there (bench/run.sh reuses them). A run
# again in it writes each of them anew and replaces graphtune's two runs (--job.overwrite).
if [ -n "${FIXTURE_DIR:-}" ]; then
  T=$FIXTURE_DIR
  mkdir -p "$T"
else
  T=$(mktemp -d)
  trap 'rm -rf "$T"' EXIT
fi
MPIRUN=(timeout 600 mpirun --allow-run-as-root --oversubscribe)
STEP_PY=bench/reference/train_step.py
REF_STEPS=$((STEPS - 2))

# 1. the bench model, the records and the job
"$PY" - "$T/llm" "$DIM" "$LAYERS" "$FFN" <<'EOF'
import sys
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM
transformers.logging.disable_progress_bar()
out, dim, layers, ffn = sys.argv[1], *map(int, sys.argv[2:])
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=512, hidden_size=dim, intermediate_size=ffn, num_hidden_layers=layers,
                  num_attention_heads=dim // 64, num_key_value_heads=dim // 128, max_position_embeddings=1024,
                  rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
LlamaForCausalLM(cfg).save_pretrained(out, safe_serialization=True)
EOF
"$G" data build --graph embedded --task graph_matching --split train --max-nodes "$MAX_NODES" \
  --max-records "$BATCH" --out "$T/gm.json" --overwrite >/dev/null 2>&1
cat >"$T/job.toml" <<EOF
[job]
name = "reference-speed"
out_dir = "$T/run"
[model]
path = "$T/llm"
tokenizer = "$TOK"
dtype = "fp32"
[data]
instructions = "$T/gm.json"
graph = "embedded"
max_len = 1024
num_workers = 0
[training]
stage = "graph_matching"
steps = $STEPS
batch_size = $BATCH
seed = 7
trainable = "graphgpt"
log_every = 1
EOF
"$DRIVER" "$T/job.toml" "$T/batch" >"$T/driver.out" 2>"$T/driver.err" ||
  { echo "reference_speed: the driver failed:"; tail -5 "$T/driver.err"; exit 1; }
echo "bench: LLaMA dim $DIM x $LAYERS layers (FFN $FFN, GQA $((DIM / 64))/$((DIM / 128)) heads, untied), fp32;" \
  "$(sed 's/graphgpt reference driver: //' "$T/driver.out")"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the runs"

# 2. the four runs, each compared pair back to back (the reference's 1 process with graphtune's,
# graphtune's dp=2 with DDP) so a neighbour's load on a shared machine hits both sides alike;
# the 1-minute load average before each run goes into the table.
load() { cut -d' ' -f1 /proc/loadavg; }
median_log() {  # graphtune: median tokens/s of steps 3..STEPS from rank 0's train_log.jsonl
  "$PY" -c 'import json, statistics, sys
rates = [json.loads(l)["tokens_per_s"] for l in open(sys.argv[1])][2:]
print(f"{statistics.median(rates):.1f}")' "$1/train_log.jsonl"
}
rate() { grep -o 'tokens_per_s [0-9.]*' "$1" | cut -d' ' -f2; }
profile=()
[ -z "${PROFILE:-}" ] || profile=(--profile "$PROFILE")
l_r1=$(load)
"$PY" "$STEP_PY" --llm "$T/llm" --dir "$T/batch" --steps "$REF_STEPS" --threads 2 "${profile[@]}" \
  >"$T/r1.out" 2>"$T/r1.err" || { echo "reference 1 process failed:"; tail -5 "$T/r1.err"; exit 1; }
r1=$(rate "$T/r1.out")
l_g1=$(load)
"$W" train -c "$T/job.toml" --training.threads 2 --job.out_dir "$T/g1" --job.overwrite true >/dev/null 2>"$T/g1.err" ||
  { echo "graphtune 1 process failed:"; tail -5 "$T/g1.err"; exit 1; }
g1=$(median_log "$T/g1")
l_g2=$(load)
"${MPIRUN[@]}" -np 2 "$W" -c "$T/job.toml" --parallelism.dp 2 --training.threads 1 --job.out_dir "$T/g2" \
  --job.overwrite true >/dev/null 2>"$T/g2.err" || { echo "graphtune dp=2 failed:"; tail -5 "$T/g2.err"; exit 1; }
g2=$(median_log "$T/g2")
l_r2=$(load)
OMP_NUM_THREADS=1 timeout 600 "$TORCHRUN" --standalone --nproc_per_node 2 "$STEP_PY" --llm "$T/llm" --dir "$T/batch" \
  --steps "$REF_STEPS" --threads 1 >"$T/r2.out" 2>"$T/r2.err" ||
  { echo "reference DDP failed:"; tail -5 "$T/r2.err"; exit 1; }
r2=$(rate "$T/r2.out")

# 3. the table
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo
row() { printf "%-30s %12s %10s %14s %12s\n" "$@"; }
row row "procs x thr" tokens/s "vs ref 1 proc" "load before"
row "reference (transformers)" "1 x 2" "$r1" "1.00x" "$l_r1"
row "graphtune" "1 x 2" "$g1" "$(ratio "$g1" "$r1")x" "$l_g1"
row "graphtune dp=2 (mpirun)" "2 x 1" "$g2" "$(ratio "$g2" "$r1")x" "$l_g2"
row "reference DDP (torchrun, gloo)" "2 x 1" "$r2" "$(ratio "$r2" "$r1")x" "$l_r2"
echo
verdict() { awk -v r="$1" 'BEGIN {print (r >= 1.15 ? "met" : "missed")}'; }
t1=$(ratio "$g1" "$r1")
t2=$(ratio "$g2" "$r2")
echo "target graphtune 1 process >= 1.15x reference 1 process: ${t1}x $(verdict "$t1")"
echo "target graphtune dp=2 >= 1.15x reference DDP 2 processes: ${t2}x $(verdict "$t2")"
echo
echo "graphtune rank reports (dp=2):"
grep -h 'rank [0-9]*: peak RSS' "$T/g2.err" | sed 's/^/  /'
grep -h 'done in' "$T/g1.err" "$T/g2.err" | sed 's/^/  /'
echo "reference: $(grep -h 'train_step:' "$T/r1.out")"
echo "reference: $(grep -h 'train_step:' "$T/r2.out")"
[ -z "${PROFILE:-}" ] || sed -n "/^profile of/,\$p" "$T/r1.out"
echo "machine: load average $(cut -d' ' -f1-3 /proc/loadavg) after the runs"
