#!/usr/bin/env bash
# A GraphGPT stage-1 step (graph_matching, frozen LLM, projector and <g_start>/<g_end> rows
# trained) at a real LLM's layer shape with a few of its layers: Vicuna-7B's by default (dim
# 4096, FFN 11008, 32 heads, no grouped-query attention), random weights that transformers
# writes, llama2.c's 512-token tokenizer so records stay short to write. One run prints:
#   - graphtune's tokens/s (the records' tokens) packed with the shared prompt prefix once (the
#     default), packed with each record's own prefix ([training].share_prefix false) and padded
#     ([training].packing false), and the MFU of each: 4 x N x tokens/s (N: the decoder layers'
#     parameters; a frozen LLM carries the gradient back to its inputs, not to its weights;
#     attention's own FLOPs left out, so a lower bound; with the prefix shared, the work the
#     records would take, the useful MFU) against PEAK_TFLOPS when given (the gpu check passes
#     its measured bf16 matmul peak);
#   - the attention kernel graphtune's stage said it runs (on a GPU);
#   - the device's peak memory against `graphtune plan`'s figure for the same job;
#   - the PyTorch reference (bench/reference/llm_step.py) on the same device, dtype and tokens:
#     the frozen LlamaForCausalLM alone, rows of the records' mean length with no padding.
#
#   bench/layer_shape_step.sh OUT_DIR
#   env: DEVICE (cuda), DTYPE (bf16), DIM (4096), LAYERS (4), HEADS (32), KV_HEADS (HEADS),
#        FFN (11008), BATCH (8), MAX_NODES (8: records of ~600-900 tokens), STEPS (6: rates are
#        medians of steps 3..STEPS), PEAK_TFLOPS, GRAPHTUNE_BIN, GRAPHTUNE_WORKER,
#        GRAPHTUNE_PYTHON, GRAPHTUNE_ASSETS
# On this CPU try a small shape: DEVICE=cpu DTYPE=fp32 DIM=256 HEADS=4 FFN=688 LAYERS=2 BATCH=2
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/layer_shape_step.sh OUT_DIR}
DEVICE=${DEVICE:-cuda} DTYPE=${DTYPE:-bf16} DIM=${DIM:-4096} LAYERS=${LAYERS:-4} HEADS=${HEADS:-32}
KV_HEADS=${KV_HEADS:-$HEADS} FFN=${FFN:-11008} BATCH=${BATCH:-8} MAX_NODES=${MAX_NODES:-8} STEPS=${STEPS:-6}
G=${GRAPHTUNE_BIN:-build/launcher/graphtune}
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
PY=${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}
TOK=${GRAPHTUNE_ASSETS:-../shared/assets}/llm/tok512.bin
for f in "$G" "$W" "$PY" "$TOK"; do
  [ -e "$f" ] || command -v "$f" >/dev/null || { echo "layer_shape_step: $f not found (build graphtune, run scripts/install-deps.sh)"; exit 2; }
done
[ "$STEPS" -ge 4 ] || { echo "layer_shape_step: STEPS must be >= 4 (steps 1-2 are warm-up)"; exit 2; }
mkdir -p "$OUT"

# 1. The model (on the device when it has one: a 7B layer is 200 M parameters to draw) and records.
"$PY" - "$OUT/llm" "$DIM" "$LAYERS" "$HEADS" "$KV_HEADS" "$FFN" "$DEVICE" <<'EOF'
import sys
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM
transformers.logging.disable_progress_bar()
out, dim, layers, heads, kv, ffn, device = sys.argv[1], *map(int, sys.argv[2:7]), sys.argv[7]
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=512, hidden_size=dim, intermediate_size=ffn, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=4096,
                  rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
with torch.device(device):
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
EOF
"$G" data build --graph embedded --task graph_matching --split train --max-nodes "$MAX_NODES" \
  --max-records $((BATCH * STEPS)) --out "$OUT/gm.json" --overwrite >/dev/null 2>&1
cat >"$OUT/job.toml" <<EOF
[model]
path = "$OUT/llm"
tokenizer = "$TOK"
dtype = "$DTYPE"
[data]
instructions = "$OUT/gm.json"
graph = "embedded"
max_len = 2048
num_workers = 0
group_by_length = false
[training]
stage = "graph_matching"
steps = $STEPS
batch_size = $BATCH
trainable = "graphgpt"
log_every = 1
EOF

# 2. graphtune, packed and padded, back to back.
median_rate() {
  "$PY" -c 'import json, statistics, sys
rates = [json.loads(l)["tokens_per_s"] for l in open(sys.argv[1])][2:]
print(f"{statistics.median(rates):.1f}")' "$1/train_log.jsonl"
}
for mode in packed unshared padded; do
  "$W" train -c "$OUT/job.toml" --device "$DEVICE" --training.packing "$([ $mode = padded ] && echo false || echo true)" \
    --training.share_prefix "$([ $mode = packed ] && echo true || echo false)" \
    --job.out_dir "$OUT/$mode" --job.overwrite true >"$OUT/$mode.log" 2>&1 ||
    { echo "layer_shape_step: graphtune $mode failed:"; tail -5 "$OUT/$mode.log"; exit 1; }
done
packed=$(median_rate "$OUT/packed") unshared=$(median_rate "$OUT/unshared") padded=$(median_rate "$OUT/padded")
lengths=$(sed -n "s/.*rank 0 computed [0-9]* tokens for its records' \([0-9]*\).*/\1/p" "$OUT/packed.log" | tail -1)
mean_len=$(( ${lengths:-0} / (BATCH * STEPS) ))

# 3. The reference on the same tokens: BATCH rows of the records' mean length.
"$PY" bench/reference/llm_step.py --llm "$OUT/llm" --batch "$BATCH" --seq "$mean_len" --steps $((STEPS - 2)) \
  --device "$DEVICE" --dtype "$DTYPE" >"$OUT/reference.log" 2>&1 ||
  { echo "layer_shape_step: the reference failed:"; tail -5 "$OUT/reference.log"; exit 1; }
ref=$(sed -n 's/.*tokens_per_s \([0-9.]*\).*/\1/p' "$OUT/reference.log")
ref_peak=$(sed -n 's/.*peak_mib \([0-9a-z.]*\).*/\1/p' "$OUT/reference.log")

# 4. What the planner says this job takes on one device: BATCH rows of the mean length hold the
# packed row's tokens.
"$G" plan -c "$OUT/job.toml" --gpus 1x141GB --seq "$mean_len" --micro-batch "$BATCH" --dtype "$DTYPE" \
  >"$OUT/plan.txt" 2>&1 || true
plan_total=$(grep -o 'total [0-9.]* GiB' "$OUT/plan.txt" | head -1)

"$PY" - "$OUT/llm/config.json" "$packed" "$unshared" "$padded" "$ref" "${PEAK_TFLOPS:-}" <<'EOF'
import json, sys
cfg = json.load(open(sys.argv[1]))
h, f, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
kv = h // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
n = L * (2 * h * h + 2 * h * kv + 3 * h * f)
packed, unshared, padded, ref = map(float, sys.argv[2:6])
peak = float(sys.argv[6]) if sys.argv[6] else None
def row(name, rate):
    tf = 4 * n * rate / 1e12
    mfu = f", MFU {tf / peak:.0%} of {peak:.0f}" if peak else ""
    print(f"{name:<28} {rate:>10.1f} tokens/s  {tf:7.1f} TFLOP/s{mfu}")
print(f"model: dim {h}, FFN {f}, {cfg['num_attention_heads']} heads ({cfg['num_key_value_heads']} kv), {L} layers: N = {n / 1e6:.0f} M")
row("graphtune packed", packed)
row("graphtune packed, unshared", unshared)
row("graphtune padded", padded)
row("PyTorch reference (no pad)", ref)
print(f"graphtune packed / padded {packed / padded:.2f}x, packed / unshared prefix {packed / unshared:.2f}x, "
      f"packed / reference {packed / ref:.2f}x")
EOF
echo "attention: $(sed -n 's/^graphtune: rank 0: [^,]*, attention //p' "$OUT/packed.log" | head -1)"
echo "records: $((BATCH * STEPS)) of mean ${mean_len} tokens; batch $BATCH"
echo "tokens: $(sed -n 's/^graphtune: rank 0 computed //p' "$OUT/packed.log" | tail -1)"
echo "peak memory, graphtune packed: $(grep -o '[a-z]*:0: [0-9.]* GiB allocated (peak), [0-9.]* GiB reserved' "$OUT/packed.log" | head -1)"
echo "peak memory, graphtune padded: $(grep -o '[a-z]*:0: [0-9.]* GiB allocated (peak), [0-9.]* GiB reserved' "$OUT/padded.log" | head -1)"
echo "peak memory, reference: ${ref_peak} MiB allocated"
echo "graphtune plan, same job (seq $mean_len, micro-batch $BATCH): ${plan_total:-no figure (see $OUT/plan.txt)}"
