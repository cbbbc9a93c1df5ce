#!/usr/bin/env bash
# Records per second of the same GraphGPT training step (fp32, frozen LLM, projector and
# <g_start>/<g_end> rows trained with AdamW) in graphtune and in two PyTorch references
# (bench/reference/train_step.py: transformers' LlamaForCausalLM), on records of a realistic
# length spread, in one run so the rows compare (this machine may be shared: read the ratios,
# not the absolute rates):
#   - "GraphGPT as shipped": batches in random order, each padded to its longest record;
#   - "HF padding-free": the same batches through transformers' own DataCollatorWithFlattening
#     (records back to back in one row, position ids restarting; its first batch's loss is
#     checked equal to the padded one's);
#   - graphtune with packed micro-batches and the prompt prefix each micro-batch's records share
#     computed once (its default), packed with each record computing its own prefix
#     ([training].share_prefix false), and with padded rows ([training].packing false);
# each on one process of 2 threads and on 2 processes of 1 thread (graphtune dp=2 under
# mpirun; the references under torchrun with DDP over gloo). It prints the padding share of the
# as-shipped batches and the share of the prompt prefix every record shares, and what graphtune
# computed of them.
#
#   bench/reference_speed.sh [STEPS]        (default 6; rates over steps 3..STEPS)
#   env: RECORDS (cora_ml_stage2: Cora-ML's node-classification records, an abstract each;
#        cora_ml_stage1: its graph-matching records, lists of titles; embedded: the synthetic
#        graph's graph matching with MAX_NODES nodes, the old short fixture), BATCH (8), DIM
#        (512), LAYERS (8), FFN (1376), MAX_LEN (1024), MAX_NODES (2), PROFILE=N (the
#        as-shipped reference's N most expensive operators), FIXTURE_DIR (keep the bench model,
#        records and job.toml there), GRAPHTUNE_WORKER, GRAPHTUNE_BIN, GRAPHTUNE_REF_DRIVER,
#        GRAPHTUNE_PYTHON, GRAPHTUNE_ASSETS
#
# The bench model is the wider LLaMA tests/test_graphgpt_reference.py checks graphtune against
# (dim 512, 8 layers, 8 heads, 4 kv heads, FFN 1376, untied head, vocab 512 + 3), written by
# transformers with random weights; tok512 is the tokenizer. The job has BATCH x (STEPS - 1)
# records; graphtune draws its batches from them in random order (group_by_length off, as
# GraphGPT does); the references take STEPS - 1 batches the trainer's own stream drew
# (tests/graphgpt_reference_driver, a seed each) in turn. tokens/s counts real tokens (padding
# excluded, all ranks together); records/s divides it by the records' mean length, so every
# row counts the same work per record.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
[ "$STEPS" -ge 4 ] || { echo "reference_speed: STEPS must be >= 4 (steps 1-2 are warm-up)"; exit 2; }
BATCH=${BATCH:-8} DIM=${DIM:-512} LAYERS=${LAYERS:-8} FFN=${FFN:-1376} MAX_NODES=${MAX_NODES:-2}
RECORDS=${RECORDS:-cora_ml_stage2} MAX_LEN=${MAX_LEN:-1024}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
G=${GRAPHTUNE_BIN:-build/launcher/graphtune}
DRIVER=${GRAPHTUNE_REF_DRIVER:-build/tests/graphgpt_reference_driver}
PY=${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}
TORCHRUN=$(dirname "$PY")/torchrun
TOK=$ASSETS/llm/tok512.bin
for f in "$W" "$G" "$DRIVER" "$PY" "$TORCHRUN" "$TOK"; do
  [ -e "$f" ] || { echo "reference_speed: $f not found (build graphtune, run scripts/install-deps.sh)"; exit 2; }
done
# FIXTURE_DIR: keep the model, the records and the job there (bench/run.sh reuses them). A run
# again in it writes each of them anew and replaces graphtune's runs (--job.overwrite).
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
case "$RECORDS" in
  cora_ml_stage2) GRAPH=$ASSETS/graph/cora_ml TASK=node_classification STAGE=task NODES=() ;;
  cora_ml_stage1) GRAPH=$ASSETS/graph/cora_ml TASK=graph_matching STAGE=graph_matching NODES=() ;;
  embedded) GRAPH=embedded TASK=graph_matching STAGE=graph_matching NODES=(--max-nodes "$MAX_NODES") ;;
  *) echo "reference_speed: RECORDS must be cora_ml_stage2, cora_ml_stage1 or embedded"; exit 2 ;;
esac
NB=$((STEPS - 1))  # batches: graphtune's steps draw from NB x BATCH records, the references take NB
"$G" data build --graph "$GRAPH" --task "$TASK" --split train "${NODES[@]}" --max-records $((NB * BATCH)) \
  --out "$T/records.json" --overwrite >/dev/null 2>&1
cat >"$T/job.toml" <<EOF
[job]
name = "reference-speed"
out_dir = "$T/run"
[model]
path = "$T/llm"
tokenizer = "$TOK"
dtype = "fp32"
[data]
instructions = "$T/records.json"
graph = "$GRAPH"
max_len = $MAX_LEN
num_workers = 0
[training]
stage = "$STAGE"
steps = $STEPS
batch_size = $BATCH
seed = 7
trainable = "graphgpt"
log_every = 1
EOF
batches=()
for k in $(seq 1 "$NB"); do
  "$DRIVER" "$T/job.toml" "$T/batch$k" --training.seed "$k" >"$T/driver.out" 2>"$T/driver.err" ||
    { echo "reference_speed: the driver failed:"; tail -5 "$T/driver.err"; exit 1; }
  batches+=("$T/batch$k")
done
# The as-shipped batches' padding, the records' mean length and the prompt prefix they all share
# (the longest run of leading tokens common to every record).
read -r PADDING MEAN_LEN PREFIX < <("$PY" - "${batches[@]}" <<'EOF'
import sys
from safetensors.torch import load_file
real = cells = records = 0
prefix = None
for d in sys.argv[1:]:
    b = load_file(d + "/graphtune.safetensors")
    m, ids = b["attention_mask"], b["input_ids"]
    real += int(m.sum()); cells += m.numel(); records += m.shape[0]
    for row in ids.tolist():
        prefix = row if prefix is None else prefix
        n = 0
        while n < min(len(prefix), len(row)) and prefix[n] == row[n]:
            n += 1
        prefix = prefix[:n]
print(f"{1 - real / cells:.4f} {real / records:.1f} {len(prefix)}")
EOF
)
echo "bench: LLaMA dim $DIM x $LAYERS layers (FFN $FFN, GQA $((DIM / 64))/$((DIM / 128)) heads, untied), fp32;" \
  "records $RECORDS ($TASK), $NB batches of $BATCH, mean $MEAN_LEN real tokens a record"
awk -v p="$PADDING" -v l="$MEAN_LEN" -v x="$PREFIX" 'BEGIN {
  printf "shares of the as-shipped steps'"'"' positions: padding %.1f%%, the prefix every record shares %.1f%% (%d tokens a record)\n",
    100 * p, 100 * x / l * (1 - p), x }'
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the runs"

# 2. the runs, each pair back to back so a neighbour's load on a shared machine hits both sides
# alike; the 1-minute load average before each run goes into the table.
load() { cut -d' ' -f1 /proc/loadavg; }
median_log() {  # graphtune: median tokens/s of steps 3..STEPS from rank 0's train_log.jsonl
  "$PY" -c 'import json, statistics, sys
rates = [json.loads(l)["tokens_per_s"] for l in open(sys.argv[1])][2:]
print(f"{statistics.median(rates):.1f}")' "$1/train_log.jsonl"
}
rate() { grep -o 'tokens_per_s [0-9.]*' "$1" | cut -d' ' -f2; }
declare -A R L
ref() {  # ref NAME PROCS ARGS...: the reference, 1 process x 2 threads or DDP over 2 x 1
  local name=$1 procs=$2; shift 2
  L[$name]=$(load)
  if [ "$procs" = 1 ]; then
    "$PY" "$STEP_PY" --llm "$T/llm" --dir "${batches[@]}" --steps "$REF_STEPS" --threads 2 "$@" \
      >"$T/$name.out" 2>"$T/$name.err" || { echo "reference $name failed:"; tail -5 "$T/$name.err"; exit 1; }
  else
    OMP_NUM_THREADS=1 timeout 900 "$TORCHRUN" --standalone --nproc_per_node 2 "$STEP_PY" --llm "$T/llm" \
      --dir "${batches[@]}" --steps "$REF_STEPS" --threads 1 "$@" >"$T/$name.out" 2>"$T/$name.err" ||
      { echo "reference $name failed:"; tail -5 "$T/$name.err"; exit 1; }
  fi
  R[$name]=$(rate "$T/$name.out")
}
gt() {  # gt NAME PROCS ARGS...: graphtune, 1 process x 2 threads or dp=2 over 2 x 1
  local name=$1 procs=$2; shift 2
  L[$name]=$(load)
  if [ "$procs" = 1 ]; then
    "$W" train -c "$T/job.toml" --training.threads 2 --job.out_dir "$T/$name" --job.overwrite true "$@" >/dev/null \
      2>"$T/$name.err" || { echo "graphtune $name failed:"; tail -5 "$T/$name.err"; exit 1; }
  else
    "${MPIRUN[@]}" -np 2 "$W" -c "$T/job.toml" --parallelism.dp 2 --training.threads 1 --job.out_dir "$T/$name" \
      --job.overwrite true "$@" >/dev/null 2>"$T/$name.err" || { echo "graphtune $name failed:"; tail -5 "$T/$name.err"; exit 1; }
  fi
  R[$name]=$(median_log "$T/$name")
}
profile=()
[ -z "${PROFILE:-}" ] || profile=(--profile "$PROFILE")
ref shipped1 1 "${profile[@]}"
gt packed1 1
gt unshared1 1 --training.share_prefix false
ref flat1 1 --flatten
gt padded1 1 --training.packing false
ref shipped2 2
gt packed2 2
gt unshared2 2 --training.share_prefix false
ref flat2 2 --flatten
gt padded2 2 --training.packing false

# 3. the table
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
per_record() { awk -v a="$1" -v l="$MEAN_LEN" 'BEGIN {printf "%.2f", a / l}'; }
echo
row() { printf "%-30s %12s %10s %10s %14s %12s\n" "$@"; }
row row "procs x thr" tokens/s records/s "vs as shipped" "load before"
for procs in 1 2; do
  thr=$([ "$procs" = 1 ] && echo "1 x 2" || echo "2 x 1")
  base=${R[shipped$procs]}
  for r in "shipped:GraphGPT as shipped" "flat:HF padding-free" "packed:graphtune" "unshared:graphtune, own prefixes" \
           "padded:graphtune padded"; do
    name=${r%%:*}$procs
    row "${r#*:}" "$thr" "${R[$name]}" "$(per_record "${R[$name]}")" "$(ratio "${R[$name]}" "$base")x" "${L[$name]}"
  done
done
echo
verdict() { awk -v r="$1" -v t="$2" 'BEGIN {print (r >= t ? "met" : "missed")}'; }
for procs in 1 2; do
  what=$([ "$procs" = 1 ] && echo "1 process" || echo "dp=2")
  t=$(ratio "${R[packed$procs]}" "${R[shipped$procs]}")
  f=$(ratio "${R[packed$procs]}" "${R[flat$procs]}")
  echo "target graphtune $what >= 1.3x GraphGPT as shipped: ${t}x $(verdict "$t" 1.3); ahead of HF padding-free: ${f}x $(verdict "$f" 1.0)"
done
echo "computed, as shares of the as-shipped positions: HF padding-free: no padding, every record's prefix;" \
  "graphtune: $(sed -n 's/.*packing left out the \([0-9.]*%\) of padded rows that is padding, the shared prompt prefix computed once a micro-batch another \([0-9.]*%\).*/no padding (\1 left out), the shared prefix once a micro-batch (\2 more left out)/p' "$T/packed1.err")"
echo
echo "graphtune rank reports (dp=2):"
grep -h 'rank [0-9]*: peak RSS' "$T/packed2.err" | sed 's/^/  /'
grep -h 'done in' "$T/packed1.err" "$T/packed2.err" | sed 's/^/  /'
for name in shipped1 flat1 shipped2 flat2; do echo "reference: $(grep -h 'train_step:' "$T/$name.out")"; done
[ -z "${PROFILE:-}" ] || sed -n "/^profile of/,\$p" "$T/shipped1.out"
echo "machine: load average $(cut -d' ' -f1-3 /proc/loadavg) after the runs"
